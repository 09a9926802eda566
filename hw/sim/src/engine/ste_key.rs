//! The lookup keys of software steering (STE format v0, a ConnectX-5): for an STE's lookup type
//! (`entry_sub_type`, or an STE's `next_lu_type` when hashing into the next table), the 16
//! bytes the device builds from the packet, in the layout of that lookup's tag
//! (`mlx5_ifc::prm::ste`). The fields the builders of rdma-core's direct rules never write are
//! left 0 (they are always masked out).
//!
//! Outer lookups come in two values, `_O` (transmit side) and `_D` (receive side); both read
//! the outer headers. Inner lookups (after a tunnel header), MPLS, GRE, the flex parsers and the
//! tunnel header lookups are not modelled: the capabilities that would let software ask for them
//! (`flex_parser_protocols`, tunnel offloads) stay clear, and a walk that meets one ends in
//! [`KeyError::Unsupported`] — the frame is dropped and counted, never matched on a made-up key.

use mlx5_ifc::consts::ste_v0::{l3_type as l3t, lu_type as lu, vlan_qualifier as vq};
use mlx5_ifc::prm::ste_tag::{
    SteEthL2Dst as L2Dst, SteEthL2Src as L2Src, SteEthL2SrcDst as L2SrcDst,
};
use mlx5_ifc::prm::ste_tag::{SteEthL3Ipv45Tuple as V4Tuple, SteEthL3Ipv4Misc as V4Misc};
use mlx5_ifc::prm::ste_tag::{SteEthL3Ipv6Dst as V6Dst, SteEthL3Ipv6Src as V6Src};
use mlx5_ifc::prm::ste_tag::{SteEthL4 as L4, SteEthL4Misc as L4Misc, SteGeneralPurpose as Gp};
use mlx5_ifc::prm::ste_tag::{SteRegister0 as Reg0, SteRegister1 as Reg1, SteSrcGvmiQp as SrcQp};
use mlx5_ifc::{Field, Layout, ViewMut};

use crate::fabric::packet::{self, Headers, L3, TPID_CVLAN, TPID_SVLAN};

/// Bytes of a lookup key (and of an STE's tag and mask).
pub(crate) const KEY_BYTES: usize = 16;

/// What the device knows of a packet besides its bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The vhca id (gvmi) of the function that sent it.
    pub(crate) source_gvmi: u16,
    /// The send queue it came from (0 from the wire).
    pub(crate) source_qp: u32,
    /// It came from a function of this device, not from the wire.
    pub(crate) loopback: bool,
    /// Metadata register A (set by a transmit WQE's metadata; 0 here).
    pub(crate) reg_a: u32,
    /// Metadata register B (receive side).
    pub(crate) reg_b: u32,
    /// Steering registers C0..C7 (0 when the packet enters; rewritten by modify-header actions).
    pub(crate) reg_c: [u32; 8],
}

/// Why no key could be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// A lookup type this model does not parse (inner headers, tunnels, flex parsers).
    Unsupported(u64),
}

/// The first and second VLAN tags: (qualifier, priority, CFI, VID) — qualifier 0 none, 1 an
/// S-VLAN (TPID 0x88a8), 2 a C-VLAN (0x8100).
fn vlans(f: &[u8], h: &Headers) -> [(u64, u64, u64, u64); 2] {
    let mut out = [(0, 0, 0, 0); 2];
    for (i, o) in out.iter_mut().enumerate() {
        let at = 12 + 4 * i;
        if h.vlan_bytes < 4 * (i + 1) || f.len() < at + 4 {
            break;
        }
        let tpid = u16::from_be_bytes([f[at], f[at + 1]]);
        let tci = u64::from(u16::from_be_bytes([f[at + 2], f[at + 3]]));
        let q = match tpid {
            TPID_SVLAN => vq::SVLAN,
            TPID_CVLAN => vq::CVLAN,
            _ => vq::NONE,
        };
        *o = (q, tci >> 13, (tci >> 12) & 1, tci & 0xfff);
    }
    out
}

/// The `l3_type` of the L2 lookups: 1 IPv4, 2 IPv6, 0 neither.
fn l3_type(h: &Headers) -> u64 {
    match h.l3 {
        L3::V4 => l3t::IPV4,
        L3::V6 => l3t::IPV6,
        L3::None => 0,
    }
}

fn set<L: Layout>(k: &mut [u8; KEY_BYTES], f: Field<L>, v: u64) {
    if let Ok(mut w) = ViewMut::<L>::new(&mut k[..]) {
        // Values are cut to the field's width; a key is 16 bytes, every tag layout fits.
        let width = f.info.width;
        let v = if width >= 64 {
            v
        } else {
            v & ((1u64 << width) - 1)
        };
        let _ = w.set(f, v);
    }
}

fn be32(b: &[u8]) -> u64 {
    u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The key of lookup type `lu` for frame `f`.
pub(crate) fn build(lu: u64, f: &[u8], meta: &Meta) -> Result<[u8; KEY_BYTES], KeyError> {
    let mut k = [0u8; KEY_BYTES];
    let h = packet::parse(f).unwrap_or_default();
    let mac = |at: usize| -> u64 {
        f.get(at..at + 6)
            .map(|m| m.iter().fold(0u64, |a, &b| a << 8 | u64::from(b)))
            .unwrap_or(0)
    };
    let [v1, v2] = vlans(f, &h);
    let ecn = u64::from(h.tos & 3);
    let dscp = u64::from(h.tos >> 2);
    let tcp = if h.tcp() { u64::from(h.tcp_flags) } else { 0 };
    match lu {
        lu::ETHL2_SRC_O | lu::ETHL2_SRC_D | lu::ETHL2_DST_O | lu::ETHL2_DST_D => {
            // The two layouts differ only in which address the first six bytes hold.
            let src = matches!(lu, lu::ETHL2_SRC_O | lu::ETHL2_SRC_D);
            let m = if src { mac(6) } else { mac(0) };
            set(&mut k, L2Src::SMAC_47_16, m >> 16);
            set(&mut k, L2Src::SMAC_15_0, m);
            set(&mut k, L2Src::L3_ETHERTYPE, u64::from(h.ethertype));
            set(&mut k, L2Src::FIRST_VLAN_QUALIFIER, v1.0);
            set(&mut k, L2Src::FIRST_PRIORITY, v1.1);
            set(&mut k, L2Src::FIRST_CFI, v1.2);
            set(&mut k, L2Src::FIRST_VLAN_ID, v1.3);
            set(&mut k, L2Src::IP_FRAGMENTED, u64::from(h.frag));
            set(&mut k, L2Src::L3_TYPE, l3_type(&h));
            set(&mut k, L2Src::SECOND_VLAN_QUALIFIER, v2.0);
            set(&mut k, L2Src::SECOND_PRIORITY, v2.1);
            set(&mut k, L2Src::SECOND_CFI, v2.2);
            set(&mut k, L2Src::SECOND_VLAN_ID, v2.3);
            debug_assert_eq!(L2Src::SMAC_47_16.info.bit, L2Dst::DMAC_47_16.info.bit);
        }
        lu::ETHL2_SRC_DST_O | lu::ETHL2_SRC_DST_D => {
            let (d, s) = (mac(0), mac(6));
            set(&mut k, L2SrcDst::DMAC_47_16, d >> 16);
            set(&mut k, L2SrcDst::DMAC_15_0, d);
            set(&mut k, L2SrcDst::SMAC_47_32, s >> 32);
            set(&mut k, L2SrcDst::SMAC_31_0, s);
            set(&mut k, L2SrcDst::L3_TYPE, l3_type(&h));
            set(&mut k, L2SrcDst::FIRST_VLAN_QUALIFIER, v1.0);
            set(&mut k, L2SrcDst::FIRST_PRIORITY, v1.1);
            set(&mut k, L2SrcDst::FIRST_CFI, v1.2);
            set(&mut k, L2SrcDst::FIRST_VLAN_ID, v1.3);
        }
        lu::ETHL3_IPV4_5_TUPLE_O | lu::ETHL3_IPV4_5_TUPLE_D => {
            if h.l3 == L3::V4 {
                set(&mut k, V4Tuple::DESTINATION_ADDRESS, be32(&h.dst[12..]));
                set(&mut k, V4Tuple::SOURCE_ADDRESS, be32(&h.src[12..]));
                set(&mut k, V4Tuple::SOURCE_PORT, u64::from(h.sport));
                set(&mut k, V4Tuple::DESTINATION_PORT, u64::from(h.dport));
                set(&mut k, V4Tuple::FRAGMENTED, u64::from(h.frag));
                set(&mut k, V4Tuple::ECN, ecn);
                set_tcp_flags(&mut k, tcp, &TCP_FLAGS_V4);
                set(&mut k, V4Tuple::DSCP, dscp);
                set(&mut k, V4Tuple::PROTOCOL, u64::from(h.proto));
            }
        }
        lu::ETHL3_IPV4_MISC_O | lu::ETHL3_IPV4_MISC_D => {
            if let (L3::V4, Some(ip)) = (h.l3, f.get(h.l3_at..h.l3_at + 12)) {
                set(&mut k, V4Misc::VERSION, u64::from(ip[0] >> 4));
                set(&mut k, V4Misc::IHL, u64::from(ip[0] & 0xf));
                set(
                    &mut k,
                    V4Misc::TOTAL_LENGTH,
                    u64::from(u16::from_be_bytes([ip[2], ip[3]])),
                );
                set(
                    &mut k,
                    V4Misc::IDENTIFICATION,
                    u64::from(u16::from_be_bytes([ip[4], ip[5]])),
                );
                let ff = u64::from(u16::from_be_bytes([ip[6], ip[7]]));
                set(&mut k, V4Misc::FLAGS, ff >> 13);
                set(&mut k, V4Misc::FRAGMENT_OFFSET, ff);
                set(&mut k, V4Misc::TIME_TO_LIVE, u64::from(ip[8]));
                set(
                    &mut k,
                    V4Misc::CHECKSUM,
                    u64::from(u16::from_be_bytes([ip[10], ip[11]])),
                );
            }
        }
        // 0x0F is also DONT_CARE: an STE of that sub-type with an all-zero mask never needs its
        // key (see `ste`), one with a mask is an IPv6 source lookup.
        lu::ETHL3_IPV6_SRC_O | lu::ETHL3_IPV6_SRC_D => {
            if h.l3 == L3::V6 {
                k.copy_from_slice(&h.src);
            }
            debug_assert_eq!(V6Src::BYTES, KEY_BYTES);
        }
        lu::ETHL3_IPV6_DST_O | lu::ETHL3_IPV6_DST_D => {
            if h.l3 == L3::V6 {
                k.copy_from_slice(&h.dst);
            }
            debug_assert_eq!(V6Dst::BYTES, KEY_BYTES);
        }
        lu::ETHL4_O | lu::ETHL4_D => {
            set(&mut k, L4::FRAGMENTED, u64::from(h.frag));
            set(&mut k, L4::PROTOCOL, u64::from(h.proto));
            set(&mut k, L4::DST_PORT, u64::from(h.dport));
            set(&mut k, L4::ECN, ecn);
            set_tcp_flags(&mut k, tcp, &TCP_FLAGS_L4);
            set(&mut k, L4::SRC_PORT, u64::from(h.sport));
            set(&mut k, L4::IPV6_HOP_LIMIT, u64::from(h.ttl));
            set(&mut k, L4::DSCP, dscp);
            if let (L3::V6, Some(ip)) = (h.l3, f.get(h.l3_at..h.l3_at + 8)) {
                set(&mut k, L4::IPV6_VERSION, u64::from(ip[0] >> 4));
                set(
                    &mut k,
                    L4::IPV6_PAYLOAD_LENGTH,
                    u64::from(u16::from_be_bytes([ip[4], ip[5]])),
                );
                set(&mut k, L4::FLOW_LABEL, be32(ip) & 0xf_ffff);
            }
            if let (true, Some(at)) = (h.tcp(), h.l4_at) {
                set(&mut k, L4::TCP_DATA_OFFSET, u64::from(f[at + 12] >> 4));
            }
        }
        lu::ETHL4_MISC_O | lu::ETHL4_MISC_D => {
            if let Some(at) = h.l4_at {
                let seg = &f[at..];
                if h.tcp() {
                    set(&mut k, L4Misc::SEQ_NUM, be32(&seg[4..]));
                    set(&mut k, L4Misc::ACK_NUM, be32(&seg[8..]));
                    set(
                        &mut k,
                        L4Misc::WINDOW_SIZE,
                        u64::from(u16::from_be_bytes([seg[14], seg[15]])),
                    );
                    set(
                        &mut k,
                        L4Misc::CHECKSUM,
                        u64::from(u16::from_be_bytes([seg[16], seg[17]])),
                    );
                    set(
                        &mut k,
                        L4Misc::URGENT_POINTER,
                        u64::from(u16::from_be_bytes([seg[18], seg[19]])),
                    );
                } else {
                    set(
                        &mut k,
                        L4Misc::LENGTH,
                        u64::from(u16::from_be_bytes([seg[4], seg[5]])),
                    );
                    set(
                        &mut k,
                        L4Misc::CHECKSUM,
                        u64::from(u16::from_be_bytes([seg[6], seg[7]])),
                    );
                }
            }
        }
        lu::GENERAL_PURPOSE => set(
            &mut k,
            Gp::GENERAL_PURPOSE_LOOKUP_FIELD,
            u64::from(meta.reg_a),
        ),
        lu::STEERING_REGISTERS_0 => {
            let r = &meta.reg_c;
            set(&mut k, Reg0::REGISTER_0_H, u64::from(r[0]));
            set(&mut k, Reg0::REGISTER_0_L, u64::from(r[1]));
            set(&mut k, Reg0::REGISTER_1_H, u64::from(r[2]));
            set(&mut k, Reg0::REGISTER_1_L, u64::from(r[3]));
        }
        lu::STEERING_REGISTERS_1 => {
            let r = &meta.reg_c;
            set(&mut k, Reg1::REGISTER_2_H, u64::from(r[4]));
            set(&mut k, Reg1::REGISTER_2_L, u64::from(r[5]));
            set(&mut k, Reg1::REGISTER_3_H, u64::from(r[6]));
            set(&mut k, Reg1::REGISTER_3_L, u64::from(r[7]));
        }
        lu::SRC_GVMI_AND_QP => {
            set(&mut k, SrcQp::SOURCE_GVMI, u64::from(meta.source_gvmi));
            set(&mut k, SrcQp::FUNCTIONAL_LB, u64::from(meta.loopback));
            set(&mut k, SrcQp::SOURCE_QP, u64::from(meta.source_qp));
        }
        other => return Err(KeyError::Unsupported(other)),
    }
    Ok(k)
}

/// The nine TCP flag fields of a layout, NS (flag bit 8) first, FIN (bit 0) last.
type TcpFlags<L> = [Field<L>; 9];

const TCP_FLAGS_V4: TcpFlags<V4Tuple> = [
    V4Tuple::TCP_NS,
    V4Tuple::TCP_CWR,
    V4Tuple::TCP_ECE,
    V4Tuple::TCP_URG,
    V4Tuple::TCP_ACK,
    V4Tuple::TCP_PSH,
    V4Tuple::TCP_RST,
    V4Tuple::TCP_SYN,
    V4Tuple::TCP_FIN,
];

const TCP_FLAGS_L4: TcpFlags<L4> = [
    L4::TCP_NS,
    L4::TCP_CWR,
    L4::TCP_ECE,
    L4::TCP_URG,
    L4::TCP_ACK,
    L4::TCP_PSH,
    L4::TCP_RST,
    L4::TCP_SYN,
    L4::TCP_FIN,
];

fn set_tcp_flags<L: Layout>(k: &mut [u8; KEY_BYTES], flags: u64, fields: &TcpFlags<L>) {
    for (i, f) in fields.iter().enumerate() {
        set(k, *f, (flags >> (8 - i)) & 1);
    }
}
