//! [`Interrupts`]: MSI or MSI-X vectors of a VFIO device delivered to eventfds.
//!
//! With vectors enabled, an mlx5 EQ created with `intr = n` signals eventfd `n` when it gets an
//! event (once armed), so a thread can block in [`Interrupts::wait`] (or put
//! [`Interrupts::eventfd`] into its own epoll set) instead of polling the EQ.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vfio_bindings::bindings::vfio::{VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_MSI_IRQ_INDEX};
use vfio_ioctls::VfioDevice;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::error::VfioError;

/// Which interrupt mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IrqKind {
    /// Message-signalled interrupts (one block of vectors).
    Msi,
    /// MSI-X (a table of independent vectors; what mlx5 uses).
    MsiX,
}

impl IrqKind {
    fn index(self) -> u32 {
        match self {
            Self::Msi => VFIO_PCI_MSI_IRQ_INDEX,
            Self::MsiX => VFIO_PCI_MSIX_IRQ_INDEX,
        }
    }
}

#[derive(Debug)]
struct Enabled {
    kind: IrqKind,
    fds: Vec<Arc<EventFd>>,
}

/// The device's interrupt vectors and their eventfds.
pub struct Interrupts {
    dev: Arc<VfioDevice>,
    state: Mutex<Option<Enabled>>,
}

impl std::fmt::Debug for Interrupts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupts")
            .field("enabled", &self.enabled())
            .finish()
    }
}

impl Interrupts {
    pub(crate) fn new(dev: Arc<VfioDevice>) -> Self {
        Self {
            dev,
            state: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Enabled>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many vectors of `kind` the function offers (0: none).
    pub fn available(&self, kind: IrqKind) -> u32 {
        self.dev.get_irq_info(kind.index()).map_or(0, |i| i.count)
    }

    /// The enabled mechanism and its number of vectors.
    pub fn enabled(&self) -> Option<(IrqKind, usize)> {
        self.lock().as_ref().map(|e| (e.kind, e.fds.len()))
    }

    /// Enables vectors `0..count` of `kind`, each signalling its own eventfd (replacing what was
    /// enabled before).
    pub fn enable(&self, kind: IrqKind, count: u32) -> Result<(), VfioError> {
        let avail = self.available(kind);
        if count == 0 || count > avail {
            return Err(VfioError::io(
                format!("enabling {count} {kind:?} vectors"),
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the function offers {avail}"),
                ),
            ));
        }
        self.disable()?;
        let fds = (0..count)
            .map(|_| EventFd::new(EFD_NONBLOCK).map(Arc::new))
            .collect::<io::Result<Vec<_>>>()
            .map_err(|e| VfioError::io("eventfd", e))?;
        let refs: Vec<&EventFd> = fds.iter().map(|f| f.as_ref()).collect();
        let r = match kind {
            IrqKind::Msi => self.dev.enable_msi(refs),
            IrqKind::MsiX => self.dev.enable_msix(refs),
        };
        r.map_err(|source| VfioError::Vfio {
            op: "enabling interrupts (VFIO_DEVICE_SET_IRQS)",
            source,
        })?;
        *self.lock() = Some(Enabled { kind, fds });
        Ok(())
    }

    /// Disables the vectors (a no-op if none are enabled).
    pub fn disable(&self) -> Result<(), VfioError> {
        let Some(e) = self.lock().take() else {
            return Ok(());
        };
        let r = match e.kind {
            IrqKind::Msi => self.dev.disable_msi(),
            IrqKind::MsiX => self.dev.disable_msix(),
        };
        r.map_err(|source| VfioError::Vfio {
            op: "disabling interrupts",
            source,
        })
    }

    fn fd(&self, vector: usize) -> Option<Arc<EventFd>> {
        self.lock().as_ref()?.fds.get(vector).cloned()
    }

    /// The eventfd of `vector`, for the caller's own epoll/select loop. It is non-blocking;
    /// reading it returns (and clears) the number of interrupts since the last read.
    pub fn eventfd(&self, vector: usize) -> Option<RawFd> {
        self.fd(vector).map(|f| f.as_raw_fd())
    }

    /// Interrupts on `vector` since the last call (0 if none), without blocking.
    pub fn take(&self, vector: usize) -> Result<u64, VfioError> {
        let fd = self.fd(vector).ok_or_else(|| no_vector(vector))?;
        read_count(&fd)
    }

    /// Blocks until `vector` fires or `timeout` passes; returns the interrupt count (0 on
    /// timeout).
    pub fn wait(&self, vector: usize, timeout: Duration) -> Result<u64, VfioError> {
        let fd = self.fd(vector).ok_or_else(|| no_vector(vector))?;
        if poll_in(&[fd.as_raw_fd()], timeout)?.first() == Some(&true) {
            read_count(&fd)
        } else {
            Ok(0)
        }
    }

    /// Blocks until any vector fires or `timeout` passes; returns (vector, count) for each that
    /// fired (empty on timeout).
    pub fn wait_any(&self, timeout: Duration) -> Result<Vec<(usize, u64)>, VfioError> {
        let fds: Vec<Arc<EventFd>> = self
            .lock()
            .as_ref()
            .map(|e| e.fds.clone())
            .unwrap_or_default();
        if fds.is_empty() {
            return Err(no_vector(0));
        }
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let ready = poll_in(&raw, timeout)?;
        let mut out = Vec::new();
        for (v, fd) in fds.iter().enumerate() {
            if ready[v] {
                let n = read_count(fd)?;
                if n > 0 {
                    out.push((v, n));
                }
            }
        }
        Ok(out)
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        if let Err(e) = self.disable() {
            log::warn!("{e}");
        }
    }
}

fn no_vector(vector: usize) -> VfioError {
    VfioError::io(
        format!("interrupt vector {vector}"),
        io::Error::new(io::ErrorKind::NotFound, "not enabled"),
    )
}

fn read_count(fd: &EventFd) -> Result<u64, VfioError> {
    match fd.read() {
        Ok(n) => Ok(n),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
        Err(e) => Err(VfioError::io("reading an interrupt eventfd", e)),
    }
}

/// poll(2) for readability; which of `fds` are readable. The eventfds stay open because the
/// callers hold their `Arc`s.
fn poll_in(fds: &[RawFd], timeout: Duration) -> Result<Vec<bool>, VfioError> {
    crate::sys::fd::poll_in(fds, timeout)
        .map_err(|e| VfioError::io("poll on interrupt eventfds", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_and_read_eventfds() {
        let a = EventFd::new(EFD_NONBLOCK).unwrap();
        let b = EventFd::new(EFD_NONBLOCK).unwrap();
        assert_eq!(
            poll_in(&[a.as_raw_fd(), b.as_raw_fd()], Duration::from_millis(1)).unwrap(),
            vec![false, false]
        );
        b.write(3).unwrap();
        assert_eq!(
            poll_in(&[a.as_raw_fd(), b.as_raw_fd()], Duration::from_secs(1)).unwrap(),
            vec![false, true]
        );
        assert_eq!(read_count(&b).unwrap(), 3);
        assert_eq!(read_count(&b).unwrap(), 0);
        assert_eq!(read_count(&a).unwrap(), 0);
    }
}
