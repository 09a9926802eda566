//! The queues' send doorbells: a register from the device's pool (`crate::fw::bfreg`), a UAR
//! page allocated or freed when the pool needs one. The pool's lock is never held across a
//! command.

use crate::error::Result;
use crate::fw::bfreg::{Bfreg, BfregUse};
use crate::fw::uar::Uar;
use crate::io::platform::Platform;

use super::Device;

impl<P: Platform> Device<P> {
    /// A send doorbell register for a new QP or SQ.
    pub(crate) fn take_bfreg(&self) -> Result<Bfreg> {
        if let Ok(b) = self.bfregs.lock().take() {
            return Ok(b);
        }
        let uar = self.with_cmd(|cmd, p| Uar::alloc(cmd, p, self.bar_size()))?;
        let (b, spare) = self.bfregs.lock().add_page(uar);
        if let Some(u) = spare {
            let _ = self.free_uar(u);
        }
        b
    }

    /// Gives a destroyed queue's register back; its page goes (DEALLOC_UAR) when no queue
    /// uses it any more.
    pub(crate) fn give_bfreg(&self, b: Bfreg) -> Result<()> {
        let empty = self.bfregs.lock().give(b);
        match empty {
            Some(u) => self.free_uar(u),
            None => Ok(()),
        }
    }

    /// The doorbell registers in use: UAR pages held, dedicated registers, queues on shared
    /// ones.
    pub fn bfreg_usage(&self) -> BfregUse {
        self.bfregs.lock().usage()
    }
}
