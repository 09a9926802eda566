//! Event queues (PRM "Event Queue"): where the device reports completions and asynchronous events.
//!
//! The device writes 64-byte EQEs into a ring in host memory; an entry at consumer index `ci` is
//! valid when its owner bit equals `(ci >> log_size) & 1` inverted from the initial value, so the
//! driver initializes every owner bit to 1. The EQ doorbell (UAR + 0x40 arms, + 0x48 does not)
//! tells the device the consumer index.

use mlx5_ifc::event::{EQE_BYTES, EQE_OWNER};
use mlx5_ifc::prm::eq::{CreateEqIn, CreateEqOut, DestroyEqIn, DestroyEqOut, Eqc};
use mlx5_ifc::{regs, Be32, Opcode};

use crate::error::{Error, Result};
use crate::fw::caps::Caps;
use crate::fw::cmd::{run, run_create, Exec};
use crate::fw::quarantine::Quarantine;
use crate::fw::queue::{ceil_log2, QueueBuf};
use crate::fw::uar::Uar;
use crate::io::barrier;
use crate::io::platform::Platform;

/// Spare EQEs added to every EQ (the device may post a few more than the driver consumes).
pub(crate) const EQ_SPARE: u32 = 0x80;

/// An event queue.
#[derive(Debug)]
pub(crate) struct Eq {
    eqn: u8,
    log_size: u8,
    buf: QueueBuf,
    uar: Uar,
    cons: spin::Mutex<u32>,
}

/// An event the device posted (a 64-byte EQE: type at byte 1, data at 0x20..0x3c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Event {
    /// Event type (`mlx5_ifc::event`).
    pub event_type: u8,
    /// Sub-type.
    pub sub_type: u8,
    /// The 28 bytes of event data.
    pub data: [u8; 28],
}

impl Event {
    fn be32(&self, at: usize) -> u32 {
        u32::from_be_bytes([
            self.data[at],
            self.data[at + 1],
            self.data[at + 2],
            self.data[at + 3],
        ])
    }

    /// The CQ of a completion event.
    pub fn cqn(&self) -> Option<u32> {
        match self.event_type {
            mlx5_ifc::event::COMPLETION => Some(self.be32(0x18) & 0xff_ffff),
            mlx5_ifc::event::CQ_ERROR => Some(self.be32(0) & 0xff_ffff),
            _ => None,
        }
    }

    /// The QP (or SRQ) of a work-queue event.
    pub fn qpn(&self) -> Option<u32> {
        use mlx5_ifc::event::*;
        match self.event_type {
            PATH_MIG | COMM_EST | SQ_DRAINED | WQ_CATAS_ERROR | PATH_MIG_FAILED
            | WQ_INVAL_REQ_ERROR | WQ_ACCESS_ERROR | SRQ_CATAS_ERROR | SRQ_LAST_WQE
            | SRQ_RQ_LIMIT => Some(self.be32(0x18) & 0xff_ffff),
            _ => None,
        }
    }
}

impl Eq {
    /// CREATE_EQ for at least `nent` events of the types in `events` (event type numbers), with
    /// MSI-X vector `intr`, doorbells on `uar`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create<P: Platform>(
        cmd: &dyn Exec<P>,
        p: &P,
        q: &Quarantine,
        caps: &Caps,
        uar: Uar,
        nent: u32,
        events: &[u8],
        intr: u16,
    ) -> Result<Self> {
        let log_size = ceil_log2(u64::from(nent) + u64::from(EQ_SPARE));
        if log_size > caps.log_max_eq_sz() {
            return Err(Error::InvalidArgument {
                op: "create_eq",
                field: "nent",
                requested: u64::from(nent),
                max: crate::fw::caps::p2(caps.log_max_eq_sz()).saturating_sub(u64::from(EQ_SPARE)),
                limit: "log_max_eq_sz",
            });
        }
        let buf = QueueBuf::alloc(p, EQE_BYTES << log_size, "allocate an EQ ring")?;
        for i in 0..(1usize << log_size) {
            buf.buf().write_u8(i * EQE_BYTES + EQE_OWNER, 1)?;
        }
        let mut mask = [0u64; 4];
        for &e in events {
            mask[usize::from(e / 64) % 4] |= 1 << (e % 64);
        }
        let made = run_create::<CreateEqIn, CreateEqOut, _, _, _>(
            cmd,
            p,
            Opcode::CreateEq,
            Some(&buf),
            |v| {
                {
                    let mut c = v.nested_mut(CreateEqIn::EQ_CONTEXT_ENTRY);
                    c.set(Eqc::LOG_EQ_SIZE, u64::from(log_size))?;
                    c.set(Eqc::UAR_PAGE, u64::from(uar.index()))?;
                    c.set(Eqc::INTR, u64::from(intr))?;
                    c.set(Eqc::LOG_PAGE_SIZE, u64::from(buf.log_page_size()))?;
                }
                // event_bitmask is an array of 4 big-endian 64-bit words; word i holds event types
                // 64i..64i+63, bit (type % 64).
                let bm = v.bytes_mut(CreateEqIn::EVENT_BITMASK);
                for (w, m) in mask.iter().enumerate() {
                    let at = w * 8;
                    bm[at..at + 8].copy_from_slice(&m.to_be_bytes());
                }
                Ok(())
            },
        );
        match made {
            Ok(out) => Ok(Self {
                eqn: out.get(CreateEqOut::EQ_NUMBER) as u8,
                log_size,
                buf,
                uar,
                cons: spin::Mutex::new(0),
            }),
            Err(e) => {
                let done = !e.device_may_hold_memory();
                buf.retire(q, p, done, "CREATE_EQ failed with its outcome unknown");
                Err(e)
            }
        }
    }

    /// The EQ number CQs name (`c_eqn`).
    pub(crate) fn eqn(&self) -> u8 {
        self.eqn
    }

    /// Writes the consumer index to the EQ doorbell and arms the EQ (interrupt on the next event).
    pub(crate) fn arm<P: Platform>(&self, p: &P) {
        let ci = *self.cons.lock();
        self.doorbell(p, ci);
    }

    fn doorbell<P: Platform>(&self, p: &P, ci: u32) {
        barrier::mmio_wmb();
        let v = (u32::from(self.eqn) << 24) | (ci & 0xff_ffff);
        p.bar_write32(
            self.uar.bar_offset() + u64::from(regs::uar::EQ_DOORBELL_ARM),
            Be32::new(v),
        );
    }

    /// Takes the events the device posted (up to `out.len()`), then tells the device the new
    /// consumer index and re-arms. An EQE is the driver's when its owner bit equals
    /// `(ci >> log_size) & 1`.
    pub(crate) fn poll<P: Platform>(&self, p: &P, out: &mut [Event]) -> Result<usize> {
        let mut ci = self.cons.lock();
        let mut n = 0;
        while n < out.len() {
            let at = (*ci as usize & ((1usize << self.log_size) - 1)) * EQE_BYTES;
            // The EQE's last 8 bytes in one acquire load (the device writes that word whole;
            // the owner byte is its last byte).
            let owner = self.buf.buf().read_u64_acquire(at + EQE_OWNER - 7)?[7] & 1;
            if owner != ((*ci >> self.log_size) & 1) as u8 {
                break;
            }
            barrier::dma_rmb();
            let mut e = [0u8; EQE_BYTES];
            self.buf.buf().read_bytes(at, &mut e)?;
            let mut data = [0u8; 28];
            data.copy_from_slice(&e[0x20..0x3c]);
            out[n] = Event {
                event_type: e[1],
                sub_type: e[3],
                data,
            };
            n += 1;
            *ci = ci.wrapping_add(1);
        }
        if n > 0 {
            self.doorbell(p, *ci);
        }
        Ok(n)
    }

    /// DESTROY_EQ, then frees the ring (quarantined unless the command succeeded).
    pub(crate) fn destroy<P: Platform>(
        self,
        cmd: &dyn Exec<P>,
        p: &P,
        q: &Quarantine,
    ) -> Result<()> {
        let r = run::<DestroyEqIn, DestroyEqOut, _, _>(cmd, p, Opcode::DestroyEq, 0, |v| {
            v.set(DestroyEqIn::EQ_NUMBER, u64::from(self.eqn))?;
            Ok(())
        });
        self.buf.retire(q, p, r.is_ok(), "DESTROY_EQ failed");
        r.map(drop)
    }

    /// Forgets the EQ without a command (the device is unusable): the ring is quarantined.
    pub(crate) fn abandon(self, q: &Quarantine) {
        q.keep(self.buf.into_dma(), "EQ of an unusable device");
    }
}
