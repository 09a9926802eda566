//! Software steering, STE format v0 (ConnectX-5, `steering_format_version` 0): the values of
//! the fields of [`crate::prm::ste`] and [`crate::prm::ste_tag`] — entry types, lookup types,
//! actions, rewrite opcodes and field codes. From rdma-core 56.1 `providers/mlx5/dr_ste_v0.c`,
//! `dr_ste.h` and `mlx5dv_dr.h`, the software that writes the entries.

/// Bytes of one steering entry in ICM; entries of a hash table sit this far apart.
pub const SIZE: usize = 64;
/// log2 of [`SIZE`].
pub const LOG_SIZE: u32 = 6;
/// Bytes of the control part at the start of an entry (`ste_rx_steering_mult`, ...). The
/// software often rewrites only these (relinking an entry), so ICM sees 32-byte writes too.
pub const CTRL_SIZE: usize = 32;
/// Byte offset of the 16-byte tag: the value a lookup key is compared with.
pub const TAG_OFFSET: usize = 32;
/// Bytes of the tag, laid out by the entry's lookup type ([`crate::prm::ste_tag`]).
pub const TAG_SIZE: usize = 16;
/// Byte offset of the 16-byte bit mask applied to the key before the comparison.
pub const MASK_OFFSET: usize = 48;
/// Bytes of the mask (same layout as the tag).
pub const MASK_SIZE: usize = 16;
/// Tag byte 0 of an "always miss" entry (`dr_ste_set_always_miss`, dr_ste.c): under its all-zero
/// mask an entry hits only with an all-zero tag, so this one never hits and the walk goes on at
/// its miss address.
pub const ALWAYS_MISS_TAG: u8 = 0xdc;
/// `qp_list_pointer` of a receive entry: bit 31 says bits 23..0 are a flow tag for the CQE.
pub const FLOW_TAG_VALID: u64 = 1 << 31;

/// `entry_type` (bits 0..4 of every entry): which control layout follows the shared head.
pub mod entry_type {
    /// Transmit (`ste_sx_transmit`): push VLAN, encap.
    pub const TX: u64 = 1;
    /// Receive (`ste_rx_steering_mult`): flow tag, decap, pop VLAN.
    pub const RX: u64 = 2;
    /// Rewrite (`ste_modify_packet`): a list of header rewrite actions; on receive and transmit.
    pub const MODIFY_PKT: u64 = 6;
}

/// Lookup types (`entry_sub_type` of an entry, `next_lu_type` of the entry pointing at its
/// table): which 16-byte key the tag and mask are compared with, and which key is hashed to pick
/// an entry of the next table. A suffix names the headers the key is built from: `_I` inner
/// (after a tunnel header), `_O` outer on the transmit side, `_D` outer on the receive side; `_O`
/// and `_D` share a tag layout.
pub mod lu_type {
    /// No lookup.
    pub const NOP: u64 = 0x00;
    /// Source gvmi (vhca id) and source QP (`ste_src_gvmi_qp`).
    pub const SRC_GVMI_AND_QP: u64 = 0x05;
    /// Destination MAC and L2 fields, outer, transmit (`ste_eth_l2_dst`).
    pub const ETHL2_DST_O: u64 = 0x06;
    /// Destination MAC and L2 fields, inner (`ste_eth_l2_dst`).
    pub const ETHL2_DST_I: u64 = 0x07;
    /// Source MAC and L2 fields, outer, transmit (`ste_eth_l2_src`).
    pub const ETHL2_SRC_O: u64 = 0x08;
    /// Source MAC and L2 fields, inner (`ste_eth_l2_src`).
    pub const ETHL2_SRC_I: u64 = 0x09;
    /// Inner destination MAC with the tunnel's network id (VXLAN VNI) (`ste_eth_l2_tnl`).
    pub const ETHL2_TUNNELING_I: u64 = 0x0a;
    /// IPv6 destination address, outer, transmit (`ste_eth_l3_ipv6_dst`).
    pub const ETHL3_IPV6_DST_O: u64 = 0x0d;
    /// IPv6 destination address, inner (`ste_eth_l3_ipv6_dst`).
    pub const ETHL3_IPV6_DST_I: u64 = 0x0e;
    /// IPv6 source address, outer, transmit (`ste_eth_l3_ipv6_src`). The same value as
    /// [`DONT_CARE`]: an entry's mask, not this value, says whether it needs a key.
    pub const ETHL3_IPV6_SRC_O: u64 = 0x0f;
    /// IPv6 source address, inner (`ste_eth_l3_ipv6_src`).
    pub const ETHL3_IPV6_SRC_I: u64 = 0x10;
    /// IPv4 addresses, L4 ports, protocol, outer, transmit (`ste_eth_l3_ipv4_5_tuple`).
    pub const ETHL3_IPV4_5_TUPLE_O: u64 = 0x11;
    /// IPv4 5-tuple, inner (`ste_eth_l3_ipv4_5_tuple`).
    pub const ETHL3_IPV4_5_TUPLE_I: u64 = 0x12;
    /// IPv6 L3/L4 fields (protocol, ports, TCP flags, hop limit, flow label), outer, transmit
    /// (`ste_eth_l4`).
    pub const ETHL4_O: u64 = 0x13;
    /// IPv6 L3/L4 fields, inner (`ste_eth_l4`).
    pub const ETHL4_I: u64 = 0x14;
    /// First MPLS label, outer, transmit (`ste_mpls`).
    pub const MPLS_FIRST_O: u64 = 0x15;
    /// GRE header: flags, protocol, key (`ste_gre`).
    pub const GRE: u64 = 0x16;
    /// Metadata register A (`ste_general_purpose`).
    pub const GENERAL_PURPOSE: u64 = 0x18;
    /// The tunnel header after the outer UDP: VXLAN-GPE, GENEVE or GTP-U
    /// (`ste_flex_parser_tnl_vxlan_gpe`, `_geneve`, `_gtpu`).
    pub const FLEX_PARSER_TNL_HEADER: u64 = 0x19;
    /// Destination MAC and L2 fields, outer, receive (`ste_eth_l2_dst`).
    pub const ETHL2_DST_D: u64 = 0x1b;
    /// Source MAC and L2 fields, outer, receive (`ste_eth_l2_src`).
    pub const ETHL2_SRC_D: u64 = 0x1c;
    /// IPv6 destination address, outer, receive (`ste_eth_l3_ipv6_dst`).
    pub const ETHL3_IPV6_DST_D: u64 = 0x1e;
    /// IPv6 source address, outer, receive (`ste_eth_l3_ipv6_src`).
    pub const ETHL3_IPV6_SRC_D: u64 = 0x1f;
    /// IPv4 5-tuple, outer, receive (`ste_eth_l3_ipv4_5_tuple`).
    pub const ETHL3_IPV4_5_TUPLE_D: u64 = 0x20;
    /// IPv6 L3/L4 fields, outer, receive (`ste_eth_l4`).
    pub const ETHL4_D: u64 = 0x21;
    /// Flex parsers 0..3, 32 bits each (`ste_flex_parser_0`).
    pub const FLEX_PARSER_0: u64 = 0x22;
    /// Flex parsers 4..7 (`ste_flex_parser_1`).
    pub const FLEX_PARSER_1: u64 = 0x23;
    /// First MPLS label, inner (`ste_mpls`).
    pub const MPLS_FIRST_I: u64 = 0x24;
    /// First MPLS label, outer, receive (`ste_mpls`).
    pub const MPLS_FIRST_D: u64 = 0x25;
    /// IPv4 header fields (IHL, TTL), outer, transmit (`ste_eth_l3_ipv4_misc`).
    pub const ETHL3_IPV4_MISC_O: u64 = 0x29;
    /// IPv4 header fields, inner (`ste_eth_l3_ipv4_misc`).
    pub const ETHL3_IPV4_MISC_I: u64 = 0x2a;
    /// IPv4 header fields, outer, receive (`ste_eth_l3_ipv4_misc`).
    pub const ETHL3_IPV4_MISC_D: u64 = 0x2b;
    /// TCP sequence and acknowledgement numbers, outer, transmit (`ste_eth_l4_misc`).
    pub const ETHL4_MISC_O: u64 = 0x2c;
    /// TCP sequence and acknowledgement numbers, inner (`ste_eth_l4_misc`).
    pub const ETHL4_MISC_I: u64 = 0x2d;
    /// TCP sequence and acknowledgement numbers, outer, receive (`ste_eth_l4_misc`).
    pub const ETHL4_MISC_D: u64 = 0x2e;
    /// Steering registers reg_c_0..3 (`ste_register_0`).
    pub const STEERING_REGISTERS_0: u64 = 0x2f;
    /// Steering registers reg_c_4..7 (`ste_register_1`).
    pub const STEERING_REGISTERS_1: u64 = 0x30;
    /// The tunnel header's first two dwords (`ste_tunnel_header`).
    pub const TUNNEL_HEADER: u64 = 0x34;
    /// Both MACs, L3 type and first VLAN, outer, transmit (`ste_eth_l2_src_dst`).
    pub const ETHL2_SRC_DST_O: u64 = 0x36;
    /// Both MACs, inner (`ste_eth_l2_src_dst`).
    pub const ETHL2_SRC_DST_I: u64 = 0x37;
    /// Both MACs, outer, receive (`ste_eth_l2_src_dst`).
    pub const ETHL2_SRC_DST_D: u64 = 0x38;
    /// No key: table anchors, action-only entries, always-hit and always-miss entries (all with
    /// a zero mask). The same value as [`ETHL3_IPV6_SRC_O`].
    pub const DONT_CARE: u64 = 0x0f;
}

/// `tunneling_action` of a receive (or rewrite) entry.
pub mod tunneling_action {
    /// None.
    pub const NONE: u64 = 0;
    /// Named by the software, never written.
    pub const ENABLE: u64 = 1;
    /// Remove the outer headers and the tunnel header of an L2 tunnel (VXLAN, ...);
    /// `fail_on_error` is set with it.
    pub const DECAP: u64 = 2;
    /// Remove an L3 tunnel and rebuild the L2 header with the rewrite list of the same
    /// (MODIFY_PKT) entry; `action_description` 1 says the rebuilt header has a VLAN.
    pub const L3_DECAP: u64 = 3;
    /// Remove the first VLAN tag.
    pub const POP_VLAN: u64 = 4;
}

/// `action_description` of an L3_DECAP entry ([`tunneling_action::L3_DECAP`]).
pub mod l3_decap_description {
    /// The rebuilt L2 header has no VLAN.
    pub const NO_VLAN: u64 = 0;
    /// The rebuilt L2 header carries a VLAN.
    pub const VLAN: u64 = 1;
}

/// `action_type` of a transmit entry (`ste_sx_transmit`).
pub mod tx_action_type {
    /// None.
    pub const NONE: u64 = 0;
    /// Insert the VLAN header of `encap_pointer_vlan_data` (TPID in bits 31..16, TCI in 15..0).
    pub const PUSH_VLAN: u64 = 1;
    /// Replace the L2 header by an L3 tunnel header: reformat id in `encap_pointer_vlan_data`,
    /// header size in 2-byte words in `action_description`.
    pub const ENCAP_L3: u64 = 3;
    /// Prepend an L2 tunnel header (reformat id and size as for [`ENCAP_L3`]).
    pub const ENCAP: u64 = 4;
}

/// `l3_type` of the L2 tag layouts.
pub mod l3_type {
    /// IPv4.
    pub const IPV4: u64 = 1;
    /// IPv6.
    pub const IPV6: u64 = 2;
}

/// `first_vlan_qualifier` / `second_vlan_qualifier` of the L2 tag layouts.
pub mod vlan_qualifier {
    /// No VLAN tag.
    pub const NONE: u64 = 0;
    /// An S-VLAN tag (TPID 0x88a8).
    pub const SVLAN: u64 = 1;
    /// A C-VLAN tag (TPID 0x8100).
    pub const CVLAN: u64 = 2;
}

/// `opcode` of an 8-byte rewrite action (`dr_action_hw_set`, `dr_action_hw_copy`) in the list
/// a MODIFY_PKT entry points to.
pub mod modify_op {
    /// An all-zero entry: padding the software leaves between two actions on the same field
    /// (the hardware takes actions in pairs). rdma-core does not name it; that the hardware
    /// skips it is inferred from the writer.
    pub const NOP: u64 = 0x0;
    /// Copy bits of one field into another (`dr_action_hw_copy`).
    pub const COPY: u64 = 0x1;
    /// Set bits of a field (`dr_action_hw_set`; length 0 means 32).
    pub const SET: u64 = 0x2;
    /// Add to a field, modulo its width (`dr_action_hw_set` layout).
    pub const ADD: u64 = 0x3;
}

/// Hardware field codes of the rewrite actions (`destination_field_code`,
/// `source_field_code`): a field is up to 64 bits, bit 0 its least significant; the shift and
/// length select bits of it.
pub mod modify_field {
    /// Destination MAC: bits 47..0.
    pub const L2_0: u64 = 0x00;
    /// Source MAC: bits 47..0.
    pub const L2_1: u64 = 0x01;
    /// EtherType in bits 47..32, first VLAN TCI in bits 15..0.
    pub const L2_2: u64 = 0x02;
    /// IPv4 destination (63..32) and source (31..0); IPv6 destination bits 127..64.
    pub const L3_0: u64 = 0x03;
    /// DSCP (5..0), ECN (7..6), TTL or hop limit (15..8).
    pub const L3_1: u64 = 0x04;
    /// IPv6 destination bits 63..0.
    pub const L3_2: u64 = 0x05;
    /// IPv6 source bits 127..64.
    pub const L3_3: u64 = 0x06;
    /// IPv6 source bits 63..0.
    pub const L3_4: u64 = 0x07;
    /// L4 source port (15..0), destination port (31..16), TCP flags (56..48).
    pub const L4_0: u64 = 0x08;
    /// TCP sequence number (63..32) and acknowledgement number (31..0).
    pub const L4_1: u64 = 0x09;
    /// MPLS (not mapped by v0's software).
    pub const MPLS: u64 = 0x0a;
    /// Tunnel L2, first part (not mapped).
    pub const L2_TNL_0: u64 = 0x0b;
    /// reg_c_0 (63..32) and reg_c_1 (31..0).
    pub const REG_0: u64 = 0x0c;
    /// reg_c_2 and reg_c_3.
    pub const REG_1: u64 = 0x0d;
    /// reg_c_4 and reg_c_5.
    pub const REG_2: u64 = 0x0e;
    /// reg_c_6 and reg_c_7 (not mapped).
    pub const REG_3: u64 = 0x0f;
    /// More L4 (not mapped).
    pub const L4_2: u64 = 0x10;
    /// Flex parser field 0 (not mapped).
    pub const FLEX_0: u64 = 0x11;
    /// Flex parser field 1 (not mapped).
    pub const FLEX_1: u64 = 0x12;
    /// Flex parser field 2 (not mapped).
    pub const FLEX_2: u64 = 0x13;
    /// Flex parser field 3 (not mapped).
    pub const FLEX_3: u64 = 0x14;
    /// Tunnel L2, second part (not mapped).
    pub const L2_TNL_1: u64 = 0x15;
    /// Metadata register A (31..0, transmit) and register B (63..32, receive).
    pub const METADATA: u64 = 0x16;
}
