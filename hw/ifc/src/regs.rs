//! BAR0 register offsets and the values the driver and device exchange through them
//! (PRM "Initialization Segment"; `initial_seg` in [`crate::prm::init_seg`]).
//!
//! BAR0 is accessed with aligned 32-bit big-endian loads and stores (and 64-bit stores for UAR
//! doorbells); these are the byte offsets of those words. `tests/conformance.rs` checks each one
//! against the bit offsets of the `initial_seg` layout.

/// `fw_rev`: \[31:16\] minor, \[15:0\] major.
pub const FW_REV: u32 = 0x000;
/// `cmdif_rev_fw_sub`: \[31:16\] command interface revision, \[15:0\] firmware sub-minor.
pub const CMDIF_REV_FW_SUB: u32 = 0x004;
/// `cmdq_addr_h`: command queue DMA address bits 63..32 (written by the driver).
pub const CMDQ_ADDR_H: u32 = 0x010;
/// `cmdq_addr_l_sz`: \[31:12\] address bits 31..12 (W), \[10:8\] nic_interface, \[7:4\] log_cmdq_size
/// (R), \[3:0\] log_cmdq_stride (R).
pub const CMDQ_ADDR_L_SZ: u32 = 0x014;
/// `cmd_dbell`: writing `1 << slot` hands that command queue entry to the firmware.
pub const CMD_DBELL: u32 = 0x018;
/// `initializing`: bit 31 = firmware still initializing; bit 23 = embedded CPU function.
pub const INITIALIZING: u32 = 0x1fc;
/// The 64-byte health buffer.
pub const HEALTH_BUFFER: u32 = 0x200;
/// Health buffer word holding `rfr` (bit 31) and `severity` (bits 26..24).
pub const HEALTH_RFR_SEVERITY: u32 = HEALTH_BUFFER + 0x38;
/// Health buffer word holding `irisc_index` (31..24), `synd` (23..16), `ext_synd` (15..0).
pub const HEALTH_SYND: u32 = HEALTH_BUFFER + 0x3c;
/// Health buffer `fw_ver` word (all ones = the device fell off the bus).
pub const HEALTH_FW_VER: u32 = HEALTH_BUFFER + 0x30;
/// `cmd_exec_to`: default command execution timeout (\[31:29\] unit, \[19:0\] value).
pub const CMD_EXEC_TO: u32 = 0xff8;
/// `cmd_q_init_to`: command queue init timeout; 0 = timeouts not published.
pub const CMD_Q_INIT_TO: u32 = 0xffc;
/// `health_counter`: firmware heartbeat, keeps changing while the firmware lives.
pub const HEALTH_COUNTER: u32 = 0x1010;
/// Size of one UAR page; UAR index `n` sits at `n * UAR_PAGE_SIZE` in BAR0.
pub const UAR_PAGE_SIZE: u64 = 4096;

/// The only command interface revision this driver (and Linux) accepts.
pub const CMD_IF_REV: u16 = 5;
/// Bit of [`INITIALIZING`] that reads 1 while the firmware initializes.
pub const INITIALIZING_BIT: u32 = 1 << 31;
/// Bit of [`INITIALIZING`] that marks an embedded-CPU (ECPF) function.
pub const EMBEDDED_CPU_BIT: u32 = 1 << 23;

/// Decodes a published timeout register (`cmd_exec_to`, `cmd_q_init_to`) to milliseconds:
/// bits \[30:29\] unit (0 ms, 1 s, 2 min, 3 h), bits \[19:0\] value. `None` when not published (0).
pub const fn decode_timeout_ms(reg: u32) -> Option<u64> {
    if reg == 0 {
        return None;
    }
    let value = (reg & 0xf_ffff) as u64;
    let unit = match (reg >> 29) & 0x3 {
        0 => 1,
        1 => 1_000,
        2 => 60_000,
        _ => 3_600_000,
    };
    Some(value * unit)
}

/// Offsets inside a 4 KiB UAR page.
pub mod uar {
    /// CQ arm doorbell (64-bit).
    pub const CQ_DOORBELL: u32 = 0x20;
    /// EQ doorbell: update consumer index and arm.
    pub const EQ_DOORBELL_ARM: u32 = 0x40;
    /// EQ doorbell: update consumer index without arming.
    pub const EQ_DOORBELL_NOARM: u32 = 0x48;
    /// First BlueFlame register; register `i` is at `BF_OFFSET + i << log_bf_reg_size`.
    pub const BF_OFFSET: u32 = 0x800;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_decode() {
        assert_eq!(decode_timeout_ms(0), None);
        assert_eq!(decode_timeout_ms(60_000), Some(60_000));
        assert_eq!(decode_timeout_ms((1 << 29) | 2), Some(2_000));
        assert_eq!(decode_timeout_ms((2 << 29) | 1), Some(60_000));
    }
}
