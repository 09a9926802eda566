//! MAD_IFC (0x50d): the port's management agents, as firmware runs them for a driver that asks.
//!
//! A RoCE port has no subnet manager agent; the one class the simulated agents answer is
//! Performance Management (class 0x04, version 1): Get of ClassPortInfo (attribute 0x0001),
//! answered with no optional capabilities (no extended counters). Every other MAD is answered,
//! as an agent answers what it does not implement, with a GetResp whose MAD status says so
//! (IBA 13.4.7: 0x0004 unsupported class or version, 0x0008 unsupported method, 0x000c
//! unsupported method/attribute combination) — the command itself succeeds.
//!
//! The command: `op_mod` bits 0 and 1 (ignore M_Key, B_Key) only, `port` 1 (BAD_PARAM
//! BAD_VHCA_PORT), the 256-byte MAD in, the response MAD out.

use mlx5_ifc::prm::vport::{MadIfcIn, MadIfcOut};

use super::cmd::{bad_param, input, output, CmdResult, Env, Req};
use crate::model::Model;
use crate::syndrome as syn;

/// MAD header offsets (IBA 13.4.3).
const BASE_VERSION: usize = 0;
const MGMT_CLASS: usize = 1;
const CLASS_VERSION: usize = 2;
const METHOD: usize = 3;
const STATUS: usize = 4;
const ATTR_ID: usize = 16;
/// The data of a PerfMgt MAD starts after its 24-byte header and 40 reserved bytes.
const PMA_DATA: usize = 64;

const CLASS_PERF_MGMT: u8 = 0x04;
const METHOD_GET: u8 = 0x01;
const METHOD_GET_RESP: u8 = 0x81;
const ATTR_CLASS_PORT_INFO: u16 = 0x0001;

const STATUS_BAD_VERSION: u16 = 0x0004;
const STATUS_BAD_METHOD: u16 = 0x0008;
const STATUS_BAD_ATTR: u16 = 0x000c;

pub(crate) fn mad_ifc(_: &mut Model, _: &mut Env<'_>, req: &Req<'_>, out: &mut [u8]) -> CmdResult {
    if req.op_mod & !0x3 != 0 {
        return Err(bad_param(syn::BAD_OP_MOD));
    }
    let i = input::<MadIfcIn>(req)?;
    if i.get(MadIfcIn::PORT) != 1 {
        return Err(bad_param(syn::BAD_VHCA_PORT));
    }
    let mut mad = [0u8; 256];
    mad.copy_from_slice(&i.bytes(MadIfcIn::MAD)[..256]);
    let attr = u16::from_be_bytes([mad[ATTR_ID], mad[ATTR_ID + 1]]);
    let status = if mad[BASE_VERSION] != 1
        || mad[MGMT_CLASS] != CLASS_PERF_MGMT
        || mad[CLASS_VERSION] != 1
    {
        STATUS_BAD_VERSION
    } else if mad[METHOD] != METHOD_GET {
        STATUS_BAD_METHOD
    } else if attr != ATTR_CLASS_PORT_INFO {
        STATUS_BAD_ATTR
    } else {
        // ClassPortInfo: BaseVersion 1, ClassVersion 1, CapabilityMask 0, the rest 0.
        mad[PMA_DATA..].fill(0);
        mad[PMA_DATA] = 1;
        mad[PMA_DATA + 1] = 1;
        0
    };
    mad[METHOD] = METHOD_GET_RESP;
    mad[STATUS..STATUS + 2].copy_from_slice(&status.to_be_bytes());
    output::<MadIfcOut>(out)?
        .bytes_mut(MadIfcOut::RESPONSE_MAD_PACKET)
        .copy_from_slice(&mad);
    Ok(())
}
