//! What an Ethernet work queue (SQ or RQ) owns besides its number: its ring, its doorbell
//! record and its work-request table — allocated together, and given back together: freed when
//! the device is known to be done with them, quarantined otherwise.

use crate::error::{Error, Result};
use crate::fw::queue::{alloc_dbr, QueueBuf};
use crate::io::platform::Platform;
use crate::io::{DmaBuf, SharedTable};
use crate::verbs::cq::Cq;
use crate::Device;

/// A work queue's memory.
pub(super) struct WqMem {
    pub(super) buf: QueueBuf,
    pub(super) dbr: DmaBuf,
    pub(super) table: SharedTable,
}

impl WqMem {
    /// A table of `words`, a ring of `bytes` and a doorbell record; nothing left behind on
    /// failure.
    pub(super) fn alloc<P: Platform>(p: &P, words: usize, bytes: usize) -> Result<Self> {
        let table = SharedTable::alloc(p, words).map_err(|source| Error::Platform {
            op: "allocate an Ethernet queue's work-request table",
            source,
        })?;
        let buf = match QueueBuf::alloc(p, bytes, "allocate an Ethernet queue's ring") {
            Ok(b) => b,
            Err(e) => {
                table.release(p);
                return Err(e);
            }
        };
        match alloc_dbr(p, "allocate an Ethernet queue's doorbell record") {
            Ok(dbr) => Ok(WqMem { buf, dbr, table }),
            Err(e) => {
                buf.free(p);
                table.release(p);
                Err(e)
            }
        }
    }

    /// Gives it back: freed if `done`, else the ring and the record quarantined (`why`).
    pub(super) fn retire<P: Platform>(self, dev: &Device<P>, done: bool, why: &'static str) {
        let (p, q) = (dev.platform(), dev.quarantine());
        self.buf.retire(q, p, done, why);
        q.retire(p, self.dbr, done, why);
        self.table.release(p);
    }
}

/// The end of a queue whose destroy command returned `destroyed`: its CQ forgets it, and its
/// memory is freed if the device let go of it, quarantined otherwise.
pub(super) fn end<P: Platform>(
    dev: &Device<P>,
    cq: &Cq<'_, P>,
    number: u32,
    destroyed: &Result<()>,
    mem: Option<WqMem>,
    why: &'static str,
) {
    if let Ok(Some(a)) = cq.detach(number) {
        a.release(dev.platform());
    }
    if let Some(m) = mem {
        m.retire(dev, destroyed.is_ok(), why);
    }
}
