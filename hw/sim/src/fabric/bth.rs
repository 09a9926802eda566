//! The InfiniBand transport headers of a RoCE packet: the BTH, the extension headers each
//! opcode carries (XRCETH, DCETH, DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH), the payload
//! and its pad — as [`Packet`], and as the bytes between the network header and the ICRC
//! ([`put_transport`], [`parse_transport`]). The frame around them is [`super::frame`]'s.

use super::consts::BTH_BYTES;

/// InfiniBand transport opcodes: the service (`opcode >> 5`: 0 RC, 1 UC, 3 UD, 5 XRC, 6 DC) and
/// the operation (`opcode & 0x1f`). XRC has RC's operations; its requests carry an XRCETH (the
/// XRC SRQ at the target) right after the BTH.
///
/// DC (Dynamically Connected) has RC's operations too. Its wire format is not public (no
/// source — IBTA, Linux, rdma-core, Wireshark — describes it; docs/fields.md "DC"), so the
/// simulated NICs speak the simulator's own: service bits 0xc0 (a value IBTA assigns to no
/// transport), and on every request a 12-byte DCETH right after the BTH — the DC access key
/// (8 bytes), a flags byte (bit 7: connect, on the packets that start a DCI's connection to the
/// DCT at the PSN they carry) and the initiator's DCI number (24 bits). The BTH names the DCT
/// on requests and the DCI on responses, which carry no DCETH.
///
/// Masked (extended) atomics have no public wire format either: NVIDIA's manual says only that
/// the extra operands travel in an "extended transport header" and that the response is a
/// standard atomic response (docs/fields.md "Masked atomics"). The simulated NICs use two RC
/// operation codes IBTA leaves reserved: [`op::MASKED_CMP_SWAP`] (0x18) and
/// [`op::MASKED_FETCH_ADD`] (0x19), each a RETH (the remote address, its rkey, the argument
/// size N as the length) and the argument block as payload — swap, compare, swap mask, compare
/// mask, or the addend and the field boundary mask, N bytes each, big-endian. An 8-byte one is
/// answered by an ATOMIC ACKNOWLEDGE, the others by a READ response carrying the N original
/// bytes (big-endian).
pub(crate) mod op {
    pub(crate) const SEND_FIRST: u8 = 0x00;
    pub(crate) const SEND_MIDDLE: u8 = 0x01;
    pub(crate) const SEND_LAST: u8 = 0x02;
    pub(crate) const SEND_LAST_IMM: u8 = 0x03;
    pub(crate) const SEND_ONLY: u8 = 0x04;
    pub(crate) const SEND_ONLY_IMM: u8 = 0x05;
    pub(crate) const WRITE_FIRST: u8 = 0x06;
    pub(crate) const WRITE_MIDDLE: u8 = 0x07;
    pub(crate) const WRITE_LAST: u8 = 0x08;
    pub(crate) const WRITE_LAST_IMM: u8 = 0x09;
    pub(crate) const WRITE_ONLY: u8 = 0x0a;
    pub(crate) const WRITE_ONLY_IMM: u8 = 0x0b;
    pub(crate) const READ_REQ: u8 = 0x0c;
    pub(crate) const READ_RESP_FIRST: u8 = 0x0d;
    pub(crate) const READ_RESP_MIDDLE: u8 = 0x0e;
    pub(crate) const READ_RESP_LAST: u8 = 0x0f;
    pub(crate) const READ_RESP_ONLY: u8 = 0x10;
    pub(crate) const ACK: u8 = 0x11;
    pub(crate) const ATOMIC_ACK: u8 = 0x12;
    pub(crate) const CMP_SWAP: u8 = 0x13;
    pub(crate) const FETCH_ADD: u8 = 0x14;
    pub(crate) const SEND_LAST_INV: u8 = 0x16;
    pub(crate) const SEND_ONLY_INV: u8 = 0x17;
    /// A masked compare-and-swap request (the simulator's own encoding, see above).
    pub(crate) const MASKED_CMP_SWAP: u8 = 0x18;
    /// A masked fetch-and-add request (the simulator's own encoding, see above).
    pub(crate) const MASKED_FETCH_ADD: u8 = 0x19;
    /// Service bits: RC.
    pub(crate) const RC: u8 = 0x00;
    /// Service bits: UC.
    pub(crate) const UC: u8 = 0x20;
    /// Service bits: UD.
    pub(crate) const UD: u8 = 0x60;
    /// Service bits: XRC.
    pub(crate) const XRC: u8 = 0xa0;
    /// Service bits: DC (the simulator's own encoding, see above).
    pub(crate) const DC: u8 = 0xc0;
}

/// AETH syndromes (the top three bits; the low five carry credits, the RNR timer or a NAK code).
pub(crate) mod aeth {
    pub(crate) const ACK: u8 = 0x00;
    pub(crate) const RNR: u8 = 0x20;
    /// The credit field of an ACK that advertises no credit count ("invalid credits").
    pub(crate) const NO_CREDITS: u8 = 0x1f;
    pub(crate) const NAK_PSN_SEQ: u8 = 0x60;
    pub(crate) const NAK_INVALID_REQ: u8 = 0x61;
    pub(crate) const NAK_REMOTE_ACCESS: u8 = 0x62;
    pub(crate) const NAK_REMOTE_OP: u8 = 0x63;
}

/// Which extension headers an opcode carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Shape {
    xrceth: bool,
    dceth: bool,
    deth: bool,
    reth: bool,
    atomic: bool,
    aeth: bool,
    atomic_ack: bool,
    imm: bool,
    ieth: bool,
    payload: bool,
}

/// The headers of `opcode`, or `None` if the device does not implement it.
fn shape(opcode: u8) -> Option<Shape> {
    let (service, o) = (opcode & 0xe0, opcode & 0x1f);
    let base = Shape::default();
    let with_data = Shape {
        payload: true,
        ..base
    };
    if service == op::UD {
        return match o {
            0x04 => Some(Shape {
                deth: true,
                ..with_data
            }),
            0x05 => Some(Shape {
                deth: true,
                imm: true,
                ..with_data
            }),
            _ => None,
        };
    }
    if service == op::UC && o > op::WRITE_ONLY_IMM {
        return None;
    }
    if service != op::RC && service != op::UC && service != op::XRC && service != op::DC {
        return None;
    }
    let s = match o {
        op::SEND_FIRST | op::SEND_MIDDLE | op::SEND_LAST | op::SEND_ONLY => with_data,
        op::SEND_LAST_IMM | op::SEND_ONLY_IMM => Shape {
            imm: true,
            ..with_data
        },
        op::WRITE_FIRST | op::WRITE_ONLY => Shape {
            reth: true,
            ..with_data
        },
        op::WRITE_MIDDLE | op::WRITE_LAST => with_data,
        op::WRITE_LAST_IMM => Shape {
            imm: true,
            ..with_data
        },
        op::WRITE_ONLY_IMM => Shape {
            reth: true,
            imm: true,
            ..with_data
        },
        op::READ_REQ => Shape { reth: true, ..base },
        op::READ_RESP_FIRST | op::READ_RESP_LAST | op::READ_RESP_ONLY => Shape {
            aeth: true,
            ..with_data
        },
        op::READ_RESP_MIDDLE => with_data,
        op::ACK => Shape { aeth: true, ..base },
        op::ATOMIC_ACK => Shape {
            aeth: true,
            atomic_ack: true,
            ..base
        },
        op::CMP_SWAP | op::FETCH_ADD => Shape {
            atomic: true,
            ..base
        },
        op::SEND_LAST_INV | op::SEND_ONLY_INV => Shape {
            ieth: true,
            ..with_data
        },
        op::MASKED_CMP_SWAP | op::MASKED_FETCH_ADD => Shape {
            reth: true,
            ..with_data
        },
        _ => return None,
    };
    // Every XRC request names its XRC SRQ, every DC request its key and initiator; responses
    // do not.
    let response = (op::READ_RESP_FIRST..=op::ATOMIC_ACK).contains(&o);
    Some(Shape {
        xrceth: service == op::XRC && !response,
        dceth: service == op::DC && !response,
        ..s
    })
}

/// DCETH (the simulator's DC encoding): what a DC request carries after its BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dceth {
    /// The DC access key the DCT must hold.
    pub(crate) key: u64,
    /// The packet starts the DCI's connection to the DCT (at its PSN).
    pub(crate) connect: bool,
    /// The initiator's DCI number (24 bits).
    pub(crate) dci: u32,
}

/// The connect flag in a DCETH's flags byte.
const DCETH_CONNECT: u8 = 0x80;

/// RETH: the remote buffer of an RDMA WRITE or READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reth {
    pub(crate) va: u64,
    pub(crate) rkey: u32,
    pub(crate) len: u32,
}

/// AtomicETH: the operands of CMP_SWAP / FETCH_ADD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AtomicEth {
    pub(crate) va: u64,
    pub(crate) rkey: u32,
    pub(crate) swap_add: u64,
    pub(crate) compare: u64,
}

/// The default P_Key (full membership of the default partition), the one the device sends.
pub(crate) use mlx5_ifc::consts::roce::DEFAULT_PKEY;

/// The transport part of a packet: BTH fields, extension headers, payload (borrowed: from the
/// sender's gathered message, or from the received frame). A default packet carries the
/// default P_Key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Packet<'a> {
    pub(crate) opcode: u8,
    /// Solicited event.
    pub(crate) se: bool,
    /// Destination QP (24 bits).
    pub(crate) dqpn: u32,
    /// The BTH P_Key as received (the device sends the default, 0xffff).
    pub(crate) pkey: u16,
    pub(crate) ack_req: bool,
    /// PSN (24 bits).
    pub(crate) psn: u32,
    /// XRCETH: the XRC SRQ at the target (24 bits).
    pub(crate) xrc_srqn: Option<u32>,
    /// DCETH: a DC request's key, connect flag and initiator.
    pub(crate) dceth: Option<Dceth>,
    /// DETH: `(q_key, source QP)`.
    pub(crate) deth: Option<(u32, u32)>,
    pub(crate) reth: Option<Reth>,
    pub(crate) atomic: Option<AtomicEth>,
    /// AETH: `(syndrome, MSN)`.
    pub(crate) aeth: Option<(u8, u32)>,
    /// AtomicAckETH: the original value.
    pub(crate) atomic_ack: Option<u64>,
    /// ImmDt as it travels (big-endian bytes).
    pub(crate) imm: Option<[u8; 4]>,
    /// IETH: the rkey to invalidate.
    pub(crate) ieth: Option<u32>,
    pub(crate) payload: &'a [u8],
}

impl Default for Packet<'_> {
    fn default() -> Self {
        Packet {
            opcode: 0,
            se: false,
            dqpn: 0,
            pkey: DEFAULT_PKEY,
            ack_req: false,
            psn: 0,
            xrc_srqn: None,
            dceth: None,
            deth: None,
            reth: None,
            atomic: None,
            aeth: None,
            atomic_ack: None,
            imm: None,
            ieth: None,
            payload: &[],
        }
    }
}

pub(super) fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

pub(super) fn be24(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([0, b[off], b[off + 1], b[off + 2]])
}

pub(super) fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

pub(super) fn be64(b: &[u8], off: usize) -> u64 {
    (u64::from(be32(b, off)) << 32) | u64::from(be32(b, off + 4))
}

/// The transport bytes of `p` (BTH, extension headers, payload, pad), not the ICRC, as long
/// as [`put_transport`] makes them.
pub(super) fn transport_len(p: &Packet<'_>) -> usize {
    let s = shape(p.opcode).unwrap_or_default();
    let pad = (4 - p.payload.len() % 4) % 4;
    BTH_BYTES
        + 4 * usize::from(s.xrceth)
        + 12 * usize::from(s.dceth)
        + 8 * usize::from(s.deth)
        + 16 * usize::from(s.reth)
        + 28 * usize::from(s.atomic)
        + 4 * usize::from(s.aeth)
        + 8 * usize::from(s.atomic_ack)
        + 4 * usize::from(s.imm)
        + 4 * usize::from(s.ieth)
        + if s.payload { p.payload.len() + pad } else { 0 }
}

/// Appends the transport bytes of `p` (BTH, extension headers, payload, pad), not the ICRC.
pub(super) fn put_transport(t: &mut Vec<u8>, p: &Packet<'_>) {
    let pad = (4 - p.payload.len() % 4) % 4;
    t.push(p.opcode);
    t.push((u8::from(p.se) << 7) | ((pad as u8) << 4));
    t.extend_from_slice(&p.pkey.to_be_bytes());
    t.push(0);
    t.extend_from_slice(&(p.dqpn & 0xff_ffff).to_be_bytes()[1..]);
    t.push(u8::from(p.ack_req) << 7);
    t.extend_from_slice(&(p.psn & 0xff_ffff).to_be_bytes()[1..]);
    let s = shape(p.opcode).unwrap_or_default();
    if s.xrceth {
        t.extend_from_slice(&(p.xrc_srqn.unwrap_or(0) & 0xff_ffff).to_be_bytes());
    }
    if s.dceth {
        let d = p.dceth.unwrap_or(Dceth {
            key: 0,
            connect: false,
            dci: 0,
        });
        t.extend_from_slice(&d.key.to_be_bytes());
        t.push(if d.connect { DCETH_CONNECT } else { 0 });
        t.extend_from_slice(&(d.dci & 0xff_ffff).to_be_bytes()[1..]);
    }
    if s.deth {
        let (qkey, sqpn) = p.deth.unwrap_or_default();
        t.extend_from_slice(&qkey.to_be_bytes());
        t.push(0);
        t.extend_from_slice(&(sqpn & 0xff_ffff).to_be_bytes()[1..]);
    }
    if s.reth {
        let r = p.reth.unwrap_or(Reth {
            va: 0,
            rkey: 0,
            len: 0,
        });
        t.extend_from_slice(&r.va.to_be_bytes());
        t.extend_from_slice(&r.rkey.to_be_bytes());
        t.extend_from_slice(&r.len.to_be_bytes());
    }
    if s.atomic {
        let a = p.atomic.unwrap_or(AtomicEth {
            va: 0,
            rkey: 0,
            swap_add: 0,
            compare: 0,
        });
        t.extend_from_slice(&a.va.to_be_bytes());
        t.extend_from_slice(&a.rkey.to_be_bytes());
        t.extend_from_slice(&a.swap_add.to_be_bytes());
        t.extend_from_slice(&a.compare.to_be_bytes());
    }
    if s.aeth {
        let (syndrome, msn) = p.aeth.unwrap_or_default();
        t.push(syndrome);
        t.extend_from_slice(&(msn & 0xff_ffff).to_be_bytes()[1..]);
    }
    if s.atomic_ack {
        t.extend_from_slice(&p.atomic_ack.unwrap_or(0).to_be_bytes());
    }
    if s.imm {
        t.extend_from_slice(&p.imm.unwrap_or_default());
    }
    if s.ieth {
        t.extend_from_slice(&p.ieth.unwrap_or(0).to_be_bytes());
    }
    if s.payload {
        t.extend_from_slice(p.payload);
        t.resize(t.len() + pad, 0);
    }
}

/// BTH, extension headers and payload (pad removed), or `None` if malformed.
pub(super) fn parse_transport(t: &[u8]) -> Option<Packet<'_>> {
    if t.len() < BTH_BYTES || t[1] & 0x0f != 0 {
        return None;
    }
    let s = shape(t[0])?;
    let mut p = Packet {
        opcode: t[0],
        se: t[1] & 0x80 != 0,
        pkey: u16::from_be_bytes([t[2], t[3]]),
        dqpn: be24(t, 5),
        ack_req: t[8] & 0x80 != 0,
        psn: be24(t, 9),
        ..Packet::default()
    };
    let pad = usize::from((t[1] >> 4) & 3);
    let mut at = BTH_BYTES;
    let mut take = |n: usize| -> Option<usize> {
        let start = at;
        at = at.checked_add(n).filter(|&e| e <= t.len())?;
        Some(start)
    };
    if s.xrceth {
        let o = take(4)?;
        p.xrc_srqn = Some(be24(t, o + 1));
    }
    if s.dceth {
        let o = take(12)?;
        p.dceth = Some(Dceth {
            key: be64(t, o),
            connect: t[o + 8] & DCETH_CONNECT != 0,
            dci: be24(t, o + 9),
        });
    }
    if s.deth {
        let o = take(8)?;
        p.deth = Some((be32(t, o), be24(t, o + 5)));
    }
    if s.reth {
        let o = take(16)?;
        p.reth = Some(Reth {
            va: be64(t, o),
            rkey: be32(t, o + 8),
            len: be32(t, o + 12),
        });
    }
    if s.atomic {
        let o = take(28)?;
        p.atomic = Some(AtomicEth {
            va: be64(t, o),
            rkey: be32(t, o + 8),
            swap_add: be64(t, o + 12),
            compare: be64(t, o + 20),
        });
    }
    if s.aeth {
        let o = take(4)?;
        p.aeth = Some((t[o], be24(t, o + 1)));
    }
    if s.atomic_ack {
        let o = take(8)?;
        p.atomic_ack = Some(be64(t, o));
    }
    if s.imm {
        let o = take(4)?;
        p.imm = Some([t[o], t[o + 1], t[o + 2], t[o + 3]]);
    }
    if s.ieth {
        let o = take(4)?;
        p.ieth = Some(be32(t, o));
    }
    let rest = t.get(at..)?;
    if !s.payload {
        return (rest.is_empty() && pad == 0).then_some(p);
    }
    let len = rest.len().checked_sub(pad)?;
    p.payload = &rest[..len];
    Some(p)
}
