//! HCA life-cycle commands: ENABLE/DISABLE_HCA, ISSI, capabilities, INIT/TEARDOWN_HCA, driver
//! version and register access (PRM "HCA Initialization and Teardown").

use mlx5_ifc::consts::{cap_mode, reg};
use mlx5_ifc::prm::hca::{
    AccessRegisterIn, AccessRegisterOut, DisableHcaIn, DisableHcaOut, EnableHcaIn, EnableHcaOut,
    InitHcaIn, InitHcaOut, QueryHcaCapIn, QueryHcaCapOut, QueryIssiIn, QueryIssiOut,
    SetDriverVersionIn, SetDriverVersionOut, SetHcaCapIn, SetHcaCapOut, SetIssiIn, SetIssiOut,
    TeardownHcaIn, TeardownHcaOut,
};
use mlx5_ifc::{CmdInHeader, Layout, Opcode, View, ViewMut};

use crate::error::{Error, Result};
use crate::fw::caps::CAP_BYTES;
use crate::fw::cmd::run;
use crate::fw::cmdq::CmdQueue;
use crate::io::platform::Platform;

/// ENABLE_HCA for the function itself.
pub(crate) fn enable_hca<P: Platform>(cmd: &CmdQueue, p: &P, embedded_cpu: bool) -> Result<()> {
    run::<EnableHcaIn, EnableHcaOut, _, _>(cmd, p, Opcode::EnableHca, 0, |v| {
        v.set(EnableHcaIn::EMBEDDED_CPU_FUNCTION, u64::from(embedded_cpu))?;
        Ok(())
    })
    .map(drop)
}

/// DISABLE_HCA for the function itself.
pub(crate) fn disable_hca<P: Platform>(cmd: &CmdQueue, p: &P, embedded_cpu: bool) -> Result<()> {
    run::<DisableHcaIn, DisableHcaOut, _, _>(cmd, p, Opcode::DisableHca, 0, |v| {
        v.set(DisableHcaIn::EMBEDDED_CPU_FUNCTION, u64::from(embedded_cpu))?;
        Ok(())
    })
    .map(drop)
}

/// QUERY_ISSI then SET_ISSI: interface step 1 when the firmware supports it, else stay at 0.
/// Returns the ISSI in use.
pub(crate) fn negotiate_issi<P: Platform>(cmd: &CmdQueue, p: &P) -> Result<u16> {
    let supported =
        match run::<QueryIssiIn, QueryIssiOut, _, _>(cmd, p, Opcode::QueryIssi, 0, |_| Ok(())) {
            Ok(o) => o.get(QueryIssiOut::SUPPORTED_ISSI_DW0) as u32,
            Err(Error::Cmd { status, .. }) => {
                log::info!("QUERY_ISSI refused ({status}); using ISSI 0");
                return Ok(0);
            }
            Err(e) => return Err(e),
        };
    if supported & 0b10 != 0 {
        run::<SetIssiIn, SetIssiOut, _, _>(cmd, p, Opcode::SetIssi, 0, |v| {
            v.set(SetIssiIn::CURRENT_ISSI, 1)?;
            Ok(())
        })?;
        Ok(1)
    } else if supported & 0b1 != 0 || supported == 0 {
        Ok(0)
    } else {
        Err(Error::Unsupported {
            what: "ISSI 0 or 1",
            found: u64::from(supported),
        })
    }
}

/// QUERY_HCA_CAP of `cap_type` (`consts::cap_type`), maximum or current: the first 256 bytes of
/// the capability.
pub(crate) fn query_hca_cap<P: Platform>(
    cmd: &CmdQueue,
    p: &P,
    cap_type: u16,
    current: bool,
) -> Result<[u8; CAP_BYTES]> {
    let mode = if current {
        cap_mode::CUR
    } else {
        cap_mode::MAX
    };
    let mut i = [0u8; QueryHcaCapIn::BYTES];
    ViewMut::<CmdInHeader>::new(&mut i)?
        .set(CmdInHeader::OPCODE, Opcode::QueryHcaCap as u64)?
        .set(CmdInHeader::OP_MOD, u64::from(cap_type << 1 | mode))?;
    let mut o = [0u8; QueryHcaCapOut::BYTES];
    cmd.exec(p, &i, &mut o)?;
    let cap = View::<QueryHcaCapOut>::new(&o)?.bytes(QueryHcaCapOut::CAPABILITY);
    let mut out = [0u8; CAP_BYTES];
    out.copy_from_slice(&cap[..CAP_BYTES]);
    Ok(out)
}

/// SET_HCA_CAP of `cap_type` with a 256-byte capability image.
pub(crate) fn set_hca_cap<P: Platform>(
    cmd: &CmdQueue,
    p: &P,
    cap_type: u16,
    cap: &[u8; CAP_BYTES],
) -> Result<()> {
    let mut i = [0u8; SetHcaCapIn::BYTES];
    ViewMut::<CmdInHeader>::new(&mut i)?
        .set(CmdInHeader::OPCODE, Opcode::SetHcaCap as u64)?
        .set(CmdInHeader::OP_MOD, u64::from(cap_type << 1))?;
    ViewMut::<SetHcaCapIn>::new(&mut i)?.bytes_mut(SetHcaCapIn::CAPABILITY)[..CAP_BYTES]
        .copy_from_slice(cap);
    let mut o = [0u8; SetHcaCapOut::BYTES];
    cmd.exec(p, &i, &mut o)
}

/// INIT_HCA.
pub(crate) fn init_hca<P: Platform>(
    cmd: &CmdQueue,
    p: &P,
    sw_owner_id: Option<[u8; 16]>,
) -> Result<()> {
    run::<InitHcaIn, InitHcaOut, _, _>(cmd, p, Opcode::InitHca, 0, |v| {
        if let Some(id) = sw_owner_id {
            v.set_bytes(InitHcaIn::SW_OWNER_ID, &id)?;
        }
        Ok(())
    })
    .map(drop)
}

/// TEARDOWN_HCA with `profile` (`consts::teardown_profile`).
pub(crate) fn teardown_hca<P: Platform>(cmd: &CmdQueue, p: &P, profile: u16) -> Result<()> {
    let out = run::<TeardownHcaIn, TeardownHcaOut, _, _>(cmd, p, Opcode::TeardownHca, 0, |v| {
        v.set(TeardownHcaIn::PROFILE, u64::from(profile))?;
        Ok(())
    })?;
    let state = out.get(TeardownHcaOut::STATE);
    if state != 0 {
        return Err(Error::BadDeviceValue {
            what: "TEARDOWN_HCA state (1 = failed)",
            value: state,
            limit: 0,
        });
    }
    Ok(())
}

/// SET_DRIVER_VERSION with an ASCII string (at most 64 bytes; longer is cut).
pub(crate) fn set_driver_version<P: Platform>(cmd: &CmdQueue, p: &P, version: &str) -> Result<()> {
    run::<SetDriverVersionIn, SetDriverVersionOut, _, _>(cmd, p, Opcode::SetDriverVersion, 0, |v| {
        let dst = v.bytes_mut(SetDriverVersionIn::DRIVER_VERSION);
        let n = version.len().min(dst.len());
        dst[..n].copy_from_slice(&version.as_bytes()[..n]);
        Ok(())
    })
    .map(drop)
}

/// ACCESS_REG: writes (`write = true`) or reads register `id` with `argument`; `data` (at most
/// 0x1f0 bytes) is the register image in and out.
pub(crate) fn access_reg<P: Platform>(
    cmd: &CmdQueue,
    p: &P,
    id: u16,
    argument: u32,
    write: bool,
    data: &mut [u8],
) -> Result<()> {
    const MAX: usize = crate::fw::cmd::SMALL_CMD_BYTES - AccessRegisterIn::BYTES;
    if data.len() > MAX {
        return Err(Error::InvalidArgument {
            op: "ACCESS_REG",
            field: "register length",
            requested: data.len() as u64,
            max: MAX as u64,
            limit: "command buffer",
        });
    }
    let len = AccessRegisterIn::BYTES + data.len();
    let mut i = [0u8; crate::fw::cmd::SMALL_CMD_BYTES];
    ViewMut::<CmdInHeader>::new(&mut i)?
        .set(CmdInHeader::OPCODE, Opcode::AccessReg as u64)?
        .set(
            CmdInHeader::OP_MOD,
            u64::from(if write { reg::WRITE } else { reg::READ }),
        )?;
    ViewMut::<AccessRegisterIn>::new(&mut i)?
        .set(AccessRegisterIn::REGISTER_ID, u64::from(id))?
        .set(AccessRegisterIn::ARGUMENT, u64::from(argument))?;
    i[AccessRegisterIn::BYTES..len].copy_from_slice(data);
    let mut o = [0u8; crate::fw::cmd::SMALL_CMD_BYTES];
    let olen = AccessRegisterOut::BYTES + data.len();
    cmd.exec(p, &i[..len], &mut o[..olen])?;
    data.copy_from_slice(&o[AccessRegisterOut::BYTES..olen]);
    Ok(())
}
