//! The XOR the command interface signs with: an entry or mailbox block is signed when the bytes
//! it covers XOR to 0xff (checked only while CUR `cmdif_checksum` is ENABLED).

/// The XOR of `bytes`.
pub(super) fn xor(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0, |a, b| a ^ b)
}
