//! The PCI function's BAR0 as the driver reaches it ([`SimDevice`]'s BAR methods): 32-bit reads,
//! 32- and 64-bit writes and BlueFlame copies routed to the init segment, the command doorbell
//! and the UAR pages ([`crate::bar`] keeps their state; [`crate::engine`] acts on doorbells), and
//! the MEMIC window, device memory that reads and writes as memory.

use mlx5_ifc::{Be32, Be64};

use crate::bar::{self, UarWrite, BAR_SIZE};
use crate::work::Work;
use crate::{engine, Mode, SimDevice};

impl SimDevice {
    /// A 32-bit read of BAR0 at byte offset `off` (4-aligned; else all ones and a warning).
    /// Injected [`crate::Fault::InitSegWord`] and [`crate::Fault::FellOffBus`] lies apply.
    pub fn bar_read32(&self, off: u64) -> Be32 {
        let now = self.now_ns();
        let mut st = self.shared().lock();
        if st.model.memic.contains(off, 4) && !st.bar.off_bus() {
            let mut b = [0u8; 4];
            let _ = st.model.memic.read(off, &mut b);
            return Be32::from_bytes(b);
        }
        let stuck = st.model.injected.stuck_initializing;
        Be32::new(st.bar.read32(off, now, stuck))
    }

    /// A 32-bit write of BAR0 at byte offset `off` (4-aligned; else ignored with a warning).
    /// A write to `cmd_dbell` hands the entries whose bits are set to the firmware (executed
    /// before this returns in [`Mode::Sync`]); an EQ doorbell in a UAR page updates the EQ.
    /// Lost while the device is off the bus ([`crate::Fault::FellOffBus`]).
    pub fn bar_write32(&self, off: u64, v: Be32) {
        if self.bar_write_bytes(off, &v.to_bytes()) {
            return;
        }
        let doorbell = {
            let mut st = self.shared().lock();
            if st.bar.off_bus() {
                return;
            }
            st.bar.write32(off, v.get())
        };
        if bar::is_uar_access(off, 4) {
            // (32 bits: an EQ or CQ doorbell; a send doorbell must be 64 bits wide.)
            self.shared()
                .datapath(false, |hw| engine::uar_write(hw, off, v.get().into(), 32));
        }
        let Some(bits) = doorbell else { return };
        match &self.inner.doorbells {
            Some(tx) if tx.send(Work::Cmd(bits)).is_ok() => {}
            _ => self.shared().ring(bits),
        }
    }

    /// A 64-bit write of BAR0 (8-aligned; UAR doorbells, recorded: [`SimDevice::uar_writes_since`]).
    /// EQ and CQ doorbells update the queue (see [`SimDevice::eq_armed`]); a doorbell naming
    /// no queue on that UAR page is recorded as a [`crate::DmaFaultKind::BadDoorbell`]. A send
    /// doorbell (offset 0x800 + k·2^`log_bf_reg_size` of the QP's UAR page, either half)
    /// executes the QP's send queue — inside this call in [`Mode::Sync`], with every frame it
    /// sends delivered and answered; on the device thread in [`Mode::Threaded`]. BlueFlame
    /// words (the rest of the half) are compared with the send queue
    /// ([`crate::DmaFaultKind::BlueFlameMismatch`]). Lost while the device is off the bus.
    pub fn bar_write64(&self, off: u64, v: Be64) {
        if self.bar_write_bytes(off, &v.to_bytes()) {
            return;
        }
        {
            let mut st = self.shared().lock();
            if st.bar.off_bus() {
                return;
            }
            st.bar.write64(off, v.get());
        }
        if bar::is_uar_access(off, 8) {
            self.uar_words(off, &[v]);
        }
    }

    /// A BlueFlame copy: `words` stored from `off` on, in order, as one burst (what a
    /// write-combining mapping hands the device). Each word is recorded in
    /// [`SimDevice::uar_writes_since`] and handled as by [`SimDevice::bar_write64`], under one lock;
    /// a send doorbell among them (the copy's first word) executes the send queue once the
    /// whole copy is in.
    pub fn bar_write_bf(&self, off: u64, words: &[Be64]) {
        {
            let mut st = self.shared().lock();
            if st.bar.off_bus() {
                return;
            }
            for (i, w) in words.iter().enumerate() {
                st.bar.write64(off + 8 * i as u64, w.get());
            }
        }
        self.uar_words(off, words);
    }

    /// The data path's side of 64-bit `words` written from `off` on (recorded already): the
    /// EQ, CQ and send doorbells among those in UAR pages; a send queue rung (a QP's or an
    /// Ethernet SQ's) executes — inside the call in [`Mode::Sync`] (or without a device
    /// thread), on the device thread otherwise, behind every doorbell and command rung before
    /// it: the device takes doorbells in the order they come, so a raw frame sent after a DR
    /// send ring's writes meets the steering entries they wrote.
    fn uar_words(&self, off: u64, words: &[Be64]) {
        let sync = self.mode() == Mode::Sync || self.inner.doorbells.is_none();
        let rung = self.shared().datapath(sync, |hw| {
            let mut rung = None;
            for (i, w) in words.iter().enumerate() {
                let at = off + 8 * i as u64;
                if bar::is_uar_access(at, 8) {
                    rung = engine::uar_write(hw, at, w.get(), 64).or(rung);
                }
            }
            if let (Some(r), true) = (rung, sync) {
                engine::ring(hw, r);
            }
            rung
        });
        if let (Some(r), Some(tx)) = (rung, &self.inner.doorbells) {
            if !sync && tx.send(Work::Sq(r)).is_err() {
                self.shared().sq_doorbell(r);
            }
        }
    }

    /// A write of `data` (any size) to BAR0's MEMIC window — device memory, which the host
    /// writes as plain memory (rdma-core maps it write-combining). `false`, and nothing written,
    /// outside the window (or off the bus, which loses the write).
    pub fn bar_write_bytes(&self, off: u64, data: &[u8]) -> bool {
        let mut st = self.shared().lock();
        if !st.model.memic.contains(off, data.len()) {
            return false;
        }
        if !st.bar.off_bus() {
            let _ = st.model.memic.write(off, data);
        }
        true
    }

    /// Device memory allocations (ALLOC_MEMIC) not yet given back.
    pub fn memic_allocations(&self) -> usize {
        self.shared().lock().model.memic.live()
    }

    /// SW ICM accounts: live SW ICM objects, the bytes they cover, the pages backed.
    pub fn sw_icm_accounts(&self) -> crate::SwIcmAccounts {
        self.shared().lock().model.icm.accounts()
    }

    /// Size of BAR0 (32 MiB).
    pub fn bar_size(&self) -> u64 {
        BAR_SIZE
    }

    /// How many writes to UAR pages there have been.
    pub fn uar_write_count(&self) -> u64 {
        self.shared().lock().bar.uar_write_count()
    }

    /// The writes to UAR pages from number `since` on (see [`SimDevice::uar_write_count`]), in
    /// order — as far as kept: the last [`crate::UAR_LOG`] (a long run's doorbells do not grow
    /// the simulator's memory).
    pub fn uar_writes_since(&self, since: u64) -> Vec<UarWrite> {
        self.shared().lock().bar.uar_writes_since(since)
    }
}
