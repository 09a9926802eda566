//! What an STE's actions do to a packet (STE format v0): VLAN pop and push, and the
//! modify-header list (8-byte SET / ADD / COPY entries in header-modify ICM) over the hardware
//! fields of v0 — MAC addresses, EtherType and first VLAN TCI, the IPv4/IPv6 addresses, DSCP /
//! ECN / TTL, L4 ports and TCP flags, TCP sequence and acknowledgement numbers, the steering
//! registers C0..C5 and the metadata registers.
//!
//! The field codes and their bit maps are those rdma-core's direct rules write (its v0 field
//! table); after a list is applied the IPv4 header checksum and the TCP/UDP checksum are
//! computed anew, as the device does for the headers it rewrites. A field the packet does not
//! have (an L4 port of a packet without L4) is left alone; a field code v0 does not map is an
//! error, and the walk that met it drops the packet.

use mlx5_ifc::consts::ste_v0::{modify_field as fc, modify_op as op};
use mlx5_ifc::prm::ste::{DrActionHwCopy as Copy, DrActionHwSet as Set};
use mlx5_ifc::{Layout, View};

use super::ste_key::Meta;
use crate::fabric::packet::{self, Headers, L3, TPID_CVLAN, TPID_SVLAN};

/// Bytes of one modify-header entry.
pub(crate) const ACTION_BYTES: usize = 8;

/// Why an action could not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActionError {
    /// A modify-header entry's opcode is none of NOP, COPY, SET, ADD.
    Opcode(u64),
    /// A field code v0 does not map.
    Field(u64),
    /// A bit range past the field's width.
    Range { field: u64, shift: u32, len: u32 },
    /// A decapsulation of a packet that is no tunnel the device parses.
    NotTunneled,
}

/// UDP ports of the tunnels a ConnectX-5 parses: VXLAN, VXLAN-GPE, GENEVE.
const VXLAN_PORT: u16 = 4789;
const VXLAN_GPE_PORT: u16 = 4790;
const GENEVE_PORT: u16 = 6081;
/// IP protocol of GRE; the GRE (and GENEVE) protocol type of an Ethernet payload.
const IPPROTO_GRE: u8 = 47;
const ETH_P_TEB: u16 = 0x6558;
/// VXLAN-GPE's next protocol for Ethernet.
const GPE_ETHERNET: u8 = 3;

/// Where the inner Ethernet frame of an L2 tunnel starts (VXLAN, VXLAN-GPE, GENEVE over UDP;
/// GRE carrying Ethernet), if `f` is one.
fn inner_l2(f: &[u8], h: &Headers) -> Option<usize> {
    let l4 = h.l3_at + h.l3_len;
    let at = if h.udp() {
        let t = l4 + 8;
        let hdr = f.get(t..t + 8)?;
        match h.dport {
            VXLAN_PORT => t + 8,
            VXLAN_GPE_PORT if hdr[3] == GPE_ETHERNET => t + 8,
            GENEVE_PORT if u16::from_be_bytes([hdr[2], hdr[3]]) == ETH_P_TEB => {
                t + 8 + 4 * usize::from(hdr[0] & 0x3f)
            }
            _ => return None,
        }
    } else if h.l3 != L3::None && h.proto == IPPROTO_GRE && !h.frag {
        let g = f.get(l4..l4 + 4)?;
        let flags = u16::from_be_bytes([g[0], g[1]]);
        if u16::from_be_bytes([g[2], g[3]]) != ETH_P_TEB {
            return None;
        }
        // Checksum (+ reserved), key and sequence number words, each when its flag is set.
        let words = [0x8000, 0x2000, 0x1000]
            .iter()
            .filter(|&&b| flags & b != 0)
            .count();
        l4 + 4 + 4 * words
    } else {
        return None;
    };
    (at + 14 <= h.ip_end).then_some(at)
}

/// Decapsulates an L2 tunnel: the inner Ethernet frame becomes the packet. `Err` when `f` is
/// no tunnel the device parses (the STE's `fail_on_error` then drops it).
pub(crate) fn decap_l2(f: &mut Vec<u8>) -> Result<(), ActionError> {
    let h = packet::parse(f).ok_or(ActionError::NotTunneled)?;
    let at = inner_l2(f, &h).ok_or(ActionError::NotTunneled)?;
    f.truncate(h.ip_end);
    f.drain(..at);
    Ok(())
}

/// Removes the outermost VLAN tag, if the frame has one.
pub(crate) fn pop_vlan(f: &mut Vec<u8>) {
    if f.len() >= 18 {
        let tpid = u16::from_be_bytes([f[12], f[13]]);
        if tpid == TPID_CVLAN || tpid == TPID_SVLAN {
            f.drain(12..16);
        }
    }
}

/// Inserts a VLAN tag (TPID in the high 16 bits, TCI in the low) after the source MAC.
pub(crate) fn push_vlan(f: &mut Vec<u8>, tag: u32) {
    if f.len() >= 12 {
        let b = tag.to_be_bytes();
        f.splice(12..12, b);
    }
}

/// Width in bits of each v0 field (0: not mapped).
fn width(code: u64) -> u32 {
    match code {
        fc::L2_0 | fc::L2_1 => 48,
        fc::L2_2 => 50,
        fc::L3_0 | fc::L3_2 | fc::L3_3 | fc::L3_4 | fc::L4_1 => 64,
        fc::REG_0 | fc::REG_1 | fc::REG_2 | fc::METADATA => 64,
        fc::L3_1 => 16,
        fc::L4_0 => 57,
        _ => 0,
    }
}

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |a, &x| a << 8 | u64::from(x))
}

fn put(b: &mut [u8], v: u64) {
    let n = b.len();
    for (i, x) in b.iter_mut().enumerate() {
        *x = (v >> (8 * (n - 1 - i))) as u8;
    }
}

/// Byte ranges of the frame a 64-bit field is made of, high part first: `(start, len)`.
fn spans(code: u64, h: &Headers) -> Vec<(usize, usize)> {
    let ip = h.l3_at;
    let v4 = h.l3 == L3::V4;
    let v6 = h.l3 == L3::V6;
    match code {
        fc::L2_0 => vec![(0, 6)],
        fc::L2_1 => vec![(6, 6)],
        fc::L3_0 if v4 => vec![(ip + 16, 4), (ip + 12, 4)],
        fc::L3_0 if v6 => vec![(ip + 24, 8)],
        fc::L3_2 if v6 => vec![(ip + 32, 8)],
        fc::L3_3 if v6 => vec![(ip + 8, 8)],
        fc::L3_4 if v6 => vec![(ip + 16, 8)],
        fc::L4_1 if h.tcp() => h.l4_at.map(|at| vec![(at + 4, 8)]).unwrap_or_default(),
        _ => vec![],
    }
}

/// The value of field `code` of the packet (0 for a part the packet does not have).
fn read(code: u64, f: &[u8], h: &Headers, m: &Meta) -> u64 {
    match code {
        fc::L2_2 => {
            let et = u64::from(h.ethertype);
            let tci = h.vlan.map(|(_, t)| u64::from(t)).unwrap_or(0);
            et << 32 | tci
        }
        fc::L3_1 => {
            let dscp_ecn = u64::from(h.tos >> 2) | u64::from(h.tos & 3) << 6;
            u64::from(h.ttl) << 8 | dscp_ecn
        }
        fc::L4_0 => {
            let flags = if h.tcp() { u64::from(h.tcp_flags) } else { 0 };
            flags << 48 | u64::from(h.dport) << 16 | u64::from(h.sport)
        }
        fc::REG_0 | fc::REG_1 | fc::REG_2 => {
            let i = (code - fc::REG_0) as usize * 2;
            u64::from(m.reg_c[i]) << 32 | u64::from(m.reg_c[i + 1])
        }
        fc::METADATA => u64::from(m.reg_b) << 32 | u64::from(m.reg_a),
        _ => spans(code, h).iter().fold(0u64, |acc, &(at, n)| {
            let part = f.get(at..at + n).map(be).unwrap_or(0);
            acc << (8 * n) | part
        }),
    }
}

/// Writes field `code` of the packet.
fn write(code: u64, f: &mut [u8], h: &Headers, m: &mut Meta, v: u64) {
    let ip = h.l3_at;
    match code {
        fc::L2_2 => {
            let et_at = 12 + h.vlan_bytes;
            if let Some(b) = f.get_mut(et_at..et_at + 2) {
                put(b, (v >> 32) & 0xffff);
            }
            if h.vlan.is_some() {
                put(&mut f[14..16], v & 0xffff);
            }
        }
        fc::L3_1 => match h.l3 {
            L3::V4 => {
                f[ip + 1] = ((v & 0x3f) << 2 | (v >> 6) & 3) as u8;
                f[ip + 8] = (v >> 8) as u8;
            }
            L3::V6 => {
                let tc = ((v & 0x3f) << 2 | (v >> 6) & 3) as u8;
                f[ip] = (f[ip] & 0xf0) | tc >> 4;
                f[ip + 1] = (f[ip + 1] & 0x0f) | tc << 4;
                f[ip + 7] = (v >> 8) as u8;
            }
            L3::None => {}
        },
        fc::L4_0 => {
            if let Some(at) = h.l4_at {
                put(&mut f[at..at + 2], v & 0xffff);
                put(&mut f[at + 2..at + 4], (v >> 16) & 0xffff);
                if h.tcp() {
                    let flags = ((v >> 48) & 0x1ff) as u16;
                    let w = u16::from_be_bytes([f[at + 12], f[at + 13]]) & !0x1ff | flags;
                    f[at + 12..at + 14].copy_from_slice(&w.to_be_bytes());
                }
            }
        }
        fc::REG_0 | fc::REG_1 | fc::REG_2 => {
            let i = (code - fc::REG_0) as usize * 2;
            m.reg_c[i] = (v >> 32) as u32;
            m.reg_c[i + 1] = v as u32;
        }
        fc::METADATA => {
            m.reg_b = (v >> 32) as u32;
            m.reg_a = v as u32;
        }
        _ => {
            let mut shift = 0;
            for &(at, n) in spans(code, h).iter().rev() {
                if let Some(b) = f.get_mut(at..at + n) {
                    put(b, v >> shift);
                }
                shift += 8 * n;
            }
        }
    }
}

fn ones(len: u32) -> u64 {
    if len >= 64 {
        u64::MAX
    } else {
        (1u64 << len) - 1
    }
}

/// Applies a modify-header list (`list.len()` a multiple of [`ACTION_BYTES`]) to frame `f` and
/// the registers in `m`, then computes the IPv4 and L4 checksums anew.
pub(crate) fn modify(list: &[u8], f: &mut [u8], m: &mut Meta) -> Result<(), ActionError> {
    for e in list.chunks_exact(ACTION_BYTES) {
        let Some(h) = packet::parse(f) else {
            return Ok(());
        };
        let set = View::<Set>::new(e).map_err(|_| ActionError::Opcode(u64::from(e[0])))?;
        let opcode = set.get(Set::OPCODE);
        if opcode == op::NOP {
            continue;
        }
        let dst = set.get(Set::DESTINATION_FIELD_CODE);
        let dst_w = width(dst);
        if dst_w == 0 {
            return Err(ActionError::Field(dst));
        }
        let shift = set.get(Set::DESTINATION_LEFT_SHIFTER) as u32;
        let len = match opcode {
            op::COPY => View::<Copy>::new(e)
                .map(|c| c.get(Copy::DESTINATION_LENGTH) as u32)
                .unwrap_or(0),
            // SET and ADD: a length of 0 means 32 bits.
            _ => match set.get(Set::DESTINATION_LENGTH) as u32 {
                0 => 32,
                n => n,
            },
        };
        if len == 0 || shift + len > dst_w {
            return Err(ActionError::Range {
                field: dst,
                shift,
                len,
            });
        }
        let mask = ones(len) << shift;
        let cur = read(dst, f, &h, m);
        let bits = match opcode {
            op::SET => set.get(Set::INLINE_DATA) & ones(len),
            op::ADD => ((cur >> shift) + set.get(Set::INLINE_DATA)) & ones(len),
            op::COPY => {
                let c = View::<Copy>::new(e).map_err(|_| ActionError::Opcode(opcode))?;
                let src = c.get(Copy::SOURCE_FIELD_CODE);
                let src_shift = c.get(Copy::SOURCE_LEFT_SHIFTER) as u32;
                let src_w = width(src);
                if src_w == 0 {
                    return Err(ActionError::Field(src));
                }
                if src_shift + len > src_w {
                    return Err(ActionError::Range {
                        field: src,
                        shift: src_shift,
                        len,
                    });
                }
                (read(src, f, &h, m) >> src_shift) & ones(len)
            }
            other => return Err(ActionError::Opcode(other)),
        };
        write(dst, f, &h, m, (cur & !mask) | bits << shift);
    }
    if let Some(h) = packet::parse(f) {
        packet::fill_checksums(f, &h, true, true);
    }
    debug_assert_eq!(Set::BYTES, ACTION_BYTES);
    Ok(())
}
