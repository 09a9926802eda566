//! The health buffer, read while commands wait and when the driver checks the device.

use mlx5_ifc::prm::init_seg::HealthBuffer;
use mlx5_ifc::{regs, HealthSyndrome, View};

use crate::error::{Error, Result};
use crate::io::platform::Platform;

/// Reads the health buffer: a fatal syndrome (with `rfr`), or a device that reads all-ones, is an
/// error.
pub(crate) fn check_health<P: Platform + ?Sized>(p: &P) -> Result<()> {
    let fw_ver = p.bar_read32(u64::from(regs::HEALTH_FW_VER)).get();
    let init = p.bar_read32(u64::from(regs::INITIALIZING)).get();
    if fw_ver == u32::MAX && init == u32::MAX {
        return Err(Error::BadDeviceValue {
            what: "health buffer (device gone?)",
            value: u64::from(fw_ver),
            limit: 0,
        });
    }
    let mut hb = [0u8; 64];
    for w in [0x38usize, 0x3c] {
        let v = p.bar_read32(u64::from(regs::HEALTH_BUFFER) + w as u64);
        hb[w..w + 4].copy_from_slice(&v.to_bytes());
    }
    let v = View::<HealthBuffer>::new(&hb)?;
    let synd = v.get(HealthBuffer::SYND) as u8;
    if synd != 0 {
        let ext = v.get(HealthBuffer::EXT_SYND) as u16;
        if v.get(HealthBuffer::RFR) == 1 {
            return Err(Error::Health {
                synd: HealthSyndrome::from_raw(synd),
                ext_synd: ext,
            });
        }
        log::warn!(
            "firmware health syndrome {} (ext {ext:#x}) without reset request",
            HealthSyndrome::from_raw(synd)
        );
    }
    Ok(())
}
