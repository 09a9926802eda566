//! Header sizes and protocol numbers of the frames the fabric carries, shared by the RoCE
//! framing ([`super::frame`]), the ICRC ([`super::icrc`]) and the Ethernet parser
//! ([`super::packet`]).

/// Bytes of the Ethernet II header.
pub(crate) const ETH_BYTES: usize = 14;
/// Bytes of an IPv4 header without options.
pub(crate) const IPV4_BYTES: usize = 20;
/// Bytes of an IPv6 header (and of an InfiniBand GRH).
pub(crate) const IPV6_BYTES: usize = 40;
/// Bytes of a UDP header.
pub(crate) const UDP_BYTES: usize = 8;
/// Bytes of an InfiniBand base transport header.
pub(crate) const BTH_BYTES: usize = 12;
/// The RoCE v2 UDP destination port.
pub(crate) const ROCE_PORT: u16 = 4791;

/// EtherType IPv4.
pub(crate) const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType IPv6.
pub(crate) const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType RoCE v1 (InfiniBand GRH over Ethernet).
pub(crate) const ETHERTYPE_ROCE_V1: u16 = 0x8915;
