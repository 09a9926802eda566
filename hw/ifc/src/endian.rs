//! Big-endian words as types.
//!
//! Everything the ConnectX device reads or writes is big-endian: init-segment registers, command
//! entries and mailboxes, contexts, doorbell records, UAR doorbells, EQEs, CQEs and WQEs. These
//! newtypes hold the device's byte image; [`Be32::get`] and [`Be32::new`] are the only ways a
//! value crosses between host order and device order, so field logic never sees swapped bits.

macro_rules! be_type {
    ($(#[$m:meta])* $name:ident, $int:ty, $n:expr) => {
        $(#[$m])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name([u8; $n]);

        impl $name {
            /// The device image of the host value `v`.
            #[inline]
            pub const fn new(v: $int) -> Self {
                Self(v.to_be_bytes())
            }
            /// The host value of this device image.
            #[inline]
            pub const fn get(self) -> $int {
                <$int>::from_be_bytes(self.0)
            }
            /// Wraps bytes exactly as they sit in device memory.
            #[inline]
            pub const fn from_bytes(b: [u8; $n]) -> Self {
                Self(b)
            }
            /// The bytes exactly as they sit in device memory.
            #[inline]
            pub const fn to_bytes(self) -> [u8; $n] {
                self.0
            }
            /// The image as a native-endian integer, i.e. the value a plain load of these bytes
            /// from memory yields on this host. This is what an MMIO store must write.
            #[inline]
            pub const fn to_ne_raw(self) -> $int {
                <$int>::from_ne_bytes(self.0)
            }
            /// Wraps the native-endian integer a plain load from device memory returned.
            #[inline]
            pub const fn from_ne_raw(raw: $int) -> Self {
                Self(raw.to_ne_bytes())
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}({:#x})", stringify!($name), self.get())
            }
        }
    };
}

be_type!(
    /// A big-endian 16-bit device word.
    Be16, u16, 2
);
be_type!(
    /// A big-endian 32-bit device word (a PRM "dword").
    Be32, u32, 4
);
be_type!(
    /// A big-endian 64-bit device word (doorbells, DMA addresses).
    Be64, u64, 8
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_image_is_big_endian() {
        assert_eq!(Be32::new(0x0102_0304).to_bytes(), [1, 2, 3, 4]);
        assert_eq!(
            Be64::new(0x0102_0304_0506_0708).to_bytes(),
            [1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(Be16::from_bytes([0xab, 0xcd]).get(), 0xabcd);
        let raw = Be32::new(0xdead_beef).to_ne_raw();
        assert_eq!(Be32::from_ne_raw(raw).get(), 0xdead_beef);
    }
}
