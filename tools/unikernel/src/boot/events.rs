//! Waiting for completions the way an interrupt-driven driver does: poll the CQ (memory, no
//! register), take the events already posted (which re-arms their EQ), arm the CQ, poll once more (a completion between the two polls raised no event),
//! then halt until the NIC's MSI-X vector fires (the LAPIC timer bounds each halt), and run
//! the driver's event path — completion events acknowledged on their CQ, async events logged,
//! page requests answered by the driver on the way.

use core::fmt;

use mlx5::Event;
use mlx5::{Device, Platform, Wc, WcStatus};

use super::irq;

/// How long one wait may take (TCG is slow; the simulator is another process).
pub const WAIT_NS: u64 = 30_000_000_000;

/// Why a wait ended without its completions.
#[derive(Debug)]
pub enum WaitError {
    /// The driver failed.
    Driver(mlx5::Error),
    /// A completion with an error status.
    Status {
        /// Its work request.
        wr_id: u64,
        /// Its status.
        status: WcStatus,
    },
    /// The deadline passed.
    Timeout {
        /// Completions that arrived.
        got: usize,
        /// Completions waited for.
        want: usize,
    },
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Driver(e) => write!(f, "{e}"),
            Self::Status { wr_id, status } => {
                write!(f, "work request {wr_id} completed with {status:?}")
            }
            Self::Timeout { got, want } => write!(
                f,
                "only {got} of {want} completions within {} s",
                WAIT_NS / 1_000_000_000
            ),
        }
    }
}

impl From<mlx5::Error> for WaitError {
    fn from(e: mlx5::Error) -> Self {
        Self::Driver(e)
    }
}

/// Fills `out` with successful completions of `cq` (on `dev`, whose EQs signal `vector`).
pub fn wait_cq<P: Platform>(
    dev: &Device<P>,
    cq: &mlx5::cq::Cq<'_, P>,
    vector: u8,
    out: &mut [Wc],
) -> Result<(), WaitError> {
    let deadline = dev.platform().now_ns().saturating_add(WAIT_NS);
    let mut got = 0;
    let take = |got: &mut usize, out: &mut [Wc]| -> Result<usize, WaitError> {
        let n = cq.poll(&mut out[*got..])?;
        for w in &out[*got..*got + n] {
            if w.status != WcStatus::Success {
                return Err(WaitError::Status {
                    wr_id: w.wr_id,
                    status: w.status,
                });
            }
        }
        *got += n;
        Ok(n)
    };
    loop {
        take(&mut got, out)?;
        if got == out.len() {
            return Ok(());
        }
        if dev.platform().now_ns() > deadline {
            return Err(WaitError::Timeout {
                got,
                want: out.len(),
            });
        }
        // An event that fired since the last look left its EQ disarmed until it is polled:
        // take it first, or the next completion would raise no interrupt.
        let seen = irq::count(vector);
        service_events(dev, Some(cq))?;
        cq.req_notify(false)?;
        if take(&mut got, out)? > 0 {
            continue;
        }
        while irq::count(vector) == seen && dev.platform().now_ns() <= deadline {
            irq::halt();
        }
        service_events(dev, Some(cq))?;
    }
}

/// The event path of one NIC: completion events (acknowledged on `cq` when they are its),
/// async events (logged), page requests (answered by the driver inside both polls).
pub fn service_events<P: Platform>(
    dev: &Device<P>,
    cq: Option<&mlx5::cq::Cq<'_, P>>,
) -> Result<usize, mlx5::Error> {
    let mut ev = [Event::default(); 16];
    let mut total = 0;
    loop {
        let n = dev.poll_completion_events(&mut ev)?;
        for e in &ev[..n] {
            if let (Some(c), Some(cqn)) = (cq, e.cqn()) {
                if c.cqn() == cqn {
                    c.ack_event()?;
                }
            }
        }
        total += n;
        if n < ev.len() {
            break;
        }
    }
    loop {
        let n = dev.poll_async_events(&mut ev)?;
        for e in &ev[..n] {
            log::warn!(
                "async event type {:#x} sub-type {:#x}",
                e.event_type,
                e.sub_type
            );
        }
        total += n;
        if n < ev.len() {
            break;
        }
    }
    Ok(total)
}
