//! 24-bit packet sequence number arithmetic.

/// 24-bit PSN arithmetic: `a - b` as a signed distance.
pub(crate) fn psn_diff(a: u32, b: u32) -> i32 {
    let d = a.wrapping_sub(b) & 0xff_ffff;
    if d >= 1 << 23 {
        d as i32 - (1 << 24)
    } else {
        d as i32
    }
}

/// `psn + n` in 24 bits.
pub(crate) fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & 0xff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_arithmetic_wraps_at_24_bits() {
        assert_eq!(psn_diff(5, 3), 2);
        assert_eq!(psn_diff(3, 5), -2);
        assert_eq!(psn_diff(0, 0xff_ffff), 1);
        assert_eq!(psn_diff(0xff_ffff, 0), -1);
        assert_eq!(psn_add(0xff_ffff, 2), 1);
    }
}
