//! Bit-exact layouts: fields at their PRM bit offset and width, and views over byte images.
//!
//! A layout ([`Layout`]) is a PRM structure (`mlx5_ifc` name) described as data: its size and the
//! bit offset and width of every named field, MSB-first over the big-endian byte image (bit 0 is
//! the most significant bit of byte 0; a field at offset `o` of width `w` lives in dword `o / 32`).
//! Fields are typed by the layout they belong to, so a field of one structure cannot be applied to
//! another. A field's bytes (at most nine) are read as one big-endian `u128` window, and the bit
//! access within it is the `bitfield` crate's bit range over that integer (shifts and masks, not
//! a loop over bits: every command and every simulated BAR read goes through here). A field
//! inside one aligned dword — nearly every PRM field — and a dword-aligned 64-bit field take a
//! shorter path to the same result: one big-endian `u32` (or `u64`), a shift and a mask (a test
//! checks the two agree at every offset and width).
//!
//! [`View`] and [`ViewMut`] check the buffer length once, at construction; every accessor is then
//! in bounds by construction (the conformance tests prove that every field lies inside its
//! layout). Setters refuse a value that does not fit the field instead of truncating it.

use core::fmt;
use core::marker::PhantomData;

use bitfield::{BitRange, BitRangeMut};

/// The bytes holding bits `bit .. bit + width` (MSB-first) and the field's LSB0 bit range
/// (`msb`, `lsb`) within those bytes read as one big-endian integer. `width` is 1..=64, so the
/// window is at most nine bytes.
fn window(bit: usize, width: usize) -> (core::ops::RangeInclusive<usize>, usize, usize) {
    let (first, last) = (bit / 8, (bit + width - 1) / 8);
    let lsb = 8 * (last - first + 1) - bit % 8 - width;
    (first..=last, lsb + width - 1, lsb)
}

fn load_be(bytes: &[u8]) -> u128 {
    bytes
        .iter()
        .fold(0u128, |acc, &b| (acc << 8) | u128::from(b))
}

fn store_be(bytes: &mut [u8], mut v: u128) {
    for b in bytes.iter_mut().rev() {
        *b = v as u8;
        v >>= 8;
    }
}

/// What kind of member a field is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer of at most 64 bits.
    Value,
    /// A byte-aligned byte array (addresses, GIDs, strings, flexible arrays).
    Bytes,
    /// An embedded structure with its own layout.
    Nested,
}

/// A field as data: name, bit offset and bit width, as the PRM / `mlx5_ifc.h` define it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldInfo {
    /// The `mlx5_ifc` field name.
    pub name: &'static str,
    /// Bit offset from the start of the structure, MSB-first.
    pub bit: u32,
    /// Width in bits (0 for a flexible array at the tail).
    pub width: u32,
    /// Value, byte array or nested structure.
    pub kind: FieldKind,
}

impl FieldInfo {
    /// Offset of the first byte of the field.
    pub const fn byte_offset(&self) -> usize {
        (self.bit / 8) as usize
    }
}

/// A PRM structure.
pub trait Layout {
    /// The `mlx5_ifc` name of the structure (without the `mlx5_ifc_` prefix and `_bits` suffix).
    const NAME: &'static str;
    /// Size of the structure in bytes (the fixed part, without flexible tails).
    const BYTES: usize;
    /// Every named field this crate defines for it.
    const FIELDS: &'static [FieldInfo];

    /// Looks a field up by its `mlx5_ifc` name.
    fn field(name: &str) -> Option<&'static FieldInfo> {
        Self::FIELDS.iter().find(|f| f.name == name)
    }
}

/// An integer field (at most 64 bits) of layout `L`.
pub struct Field<L> {
    /// Name, offset and width.
    pub info: FieldInfo,
    _l: PhantomData<fn() -> L>,
}

/// A byte-aligned byte-array field of layout `L` (width 0 = flexible tail).
pub struct Bytes<L> {
    /// Name, offset and width.
    pub info: FieldInfo,
    _l: PhantomData<fn() -> L>,
}

/// A structure of layout `M` embedded in layout `L`.
pub struct Nested<L, M> {
    /// Name, offset and width.
    pub info: FieldInfo,
    _l: PhantomData<fn() -> (L, M)>,
}

macro_rules! copy_impls {
    ($t:ident < $($p:ident),* >) => {
        impl<$($p),*> Clone for $t<$($p),*> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<$($p),*> Copy for $t<$($p),*> {}
        impl<$($p),*> fmt::Debug for $t<$($p),*> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.info.fmt(f)
            }
        }
    };
}
copy_impls!(Field<L>);
copy_impls!(Bytes<L>);
copy_impls!(Nested<L, M>);

impl<L> Field<L> {
    /// Defines a field. Used by the generated layouts.
    pub const fn new(name: &'static str, bit: u32, width: u32) -> Self {
        Self {
            info: FieldInfo {
                name,
                bit,
                width,
                kind: FieldKind::Value,
            },
            _l: PhantomData,
        }
    }
    /// The largest value the field holds.
    pub const fn max(&self) -> u64 {
        if self.info.width >= 64 {
            u64::MAX
        } else {
            (1u64 << self.info.width) - 1
        }
    }
}

impl<L> Bytes<L> {
    /// Defines a byte-array field. Used by the generated layouts.
    pub const fn new(name: &'static str, bit: u32, width: u32) -> Self {
        Self {
            info: FieldInfo {
                name,
                bit,
                width,
                kind: FieldKind::Bytes,
            },
            _l: PhantomData,
        }
    }
    /// Offset of the first byte.
    pub const fn offset(&self) -> usize {
        self.info.byte_offset()
    }
}

impl<L, M> Nested<L, M> {
    /// Defines an embedded structure. Used by the generated layouts.
    pub const fn new(name: &'static str, bit: u32, width: u32) -> Self {
        Self {
            info: FieldInfo {
                name,
                bit,
                width,
                kind: FieldKind::Nested,
            },
            _l: PhantomData,
        }
    }
    /// Offset of the first byte.
    pub const fn offset(&self) -> usize {
        self.info.byte_offset()
    }
}

/// Declares a hand-written layout: a unit struct, one typed constant per field, and its
/// [`Layout`] impl listing every field (for the layouts that are not generated from the
/// `mlx5_ifc` facts: CQEs and WQE segments, checked against `mlx5dv.h` instead).
macro_rules! declare_layout {
    (
        $(#[$m:meta])*
        $ty:ident = $name:literal, $bytes:expr;
        $( $(#[$fm:meta])* $c:ident: $kind:ident($fname:literal, $bit:expr, $width:expr); )*
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy)]
        pub struct $ty;

        impl $ty {
            $( $(#[$fm])* pub const $c: $crate::layout::$kind<Self> =
                $crate::layout::$kind::new($fname, $bit, $width); )*
        }

        impl $crate::layout::Layout for $ty {
            const NAME: &'static str = $name;
            const BYTES: usize = $bytes;
            const FIELDS: &'static [$crate::layout::FieldInfo] = &[$(Self::$c.info),*];
        }
    };
}
pub(crate) use declare_layout;

/// Why a layout access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutError {
    /// The buffer is shorter than the structure.
    Short {
        /// The structure.
        layout: &'static str,
        /// Bytes it needs.
        needed: usize,
        /// Bytes the buffer has.
        got: usize,
    },
    /// A value does not fit its field; nothing was written.
    Overflow {
        /// The structure.
        layout: &'static str,
        /// The field.
        field: &'static str,
        /// Its width in bits.
        width: u32,
        /// The value that was refused.
        value: u64,
    },
    /// A byte array was given with the wrong length; nothing was written.
    Length {
        /// The structure.
        layout: &'static str,
        /// The field.
        field: &'static str,
        /// The field's length in bytes.
        expected: usize,
        /// The length given.
        got: usize,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Short {
                layout,
                needed,
                got,
            } => {
                write!(
                    f,
                    "{layout}: buffer of {got} bytes is shorter than the {needed}-byte structure"
                )
            }
            Self::Overflow {
                layout,
                field,
                width,
                value,
            } => {
                write!(
                    f,
                    "{layout}.{field}: value {value:#x} does not fit in {width} bits"
                )
            }
            Self::Length {
                layout,
                field,
                expected,
                got,
            } => {
                write!(
                    f,
                    "{layout}.{field}: {got} bytes given for a {expected}-byte field"
                )
            }
        }
    }
}

fn check_len<L: Layout>(len: usize) -> Result<(), LayoutError> {
    if len < L::BYTES {
        Err(LayoutError::Short {
            layout: L::NAME,
            needed: L::BYTES,
            got: len,
        })
    } else {
        Ok(())
    }
}

/// The big-endian dword or qword at byte `at`, if the image holds it.
fn word<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at + N)?.try_into().ok()
}

/// Where a field lies within one aligned dword (as every PRM field narrower than 32 bits does):
/// `(byte offset of the dword, right shift, mask)`.
#[inline]
fn in_dword(info: &FieldInfo) -> Option<(usize, u32, u32)> {
    let (bit, width) = (info.bit, info.width);
    (width > 0 && bit % 32 + width <= 32).then(|| {
        let shift = 32 - bit % 32 - width;
        let mask = if width == 32 {
            u32::MAX
        } else {
            (1 << width) - 1
        };
        ((bit / 32 * 4) as usize, shift, mask)
    })
}

#[inline]
fn read_bits(buf: &[u8], info: &FieldInfo) -> u64 {
    if info.width == 0 {
        return 0;
    }
    // Fast paths, the same result as the general one: a field within one dword, a dword-aligned
    // 64-bit field.
    if let Some((at, shift, mask)) = in_dword(info) {
        if let Some(d) = word::<4>(buf, at) {
            return u64::from((u32::from_be_bytes(d) >> shift) & mask);
        }
    } else if info.width == 64 && info.bit.is_multiple_of(32) {
        if let Some(q) = word::<8>(buf, info.byte_offset()) {
            return u64::from_be_bytes(q);
        }
    }
    read_general(buf, info)
}

/// [`read_bits`] through the general window (any offset, any width up to 64).
#[inline(never)]
fn read_general(buf: &[u8], info: &FieldInfo) -> u64 {
    let (range, msb, lsb) = window(info.bit as usize, info.width as usize);
    // In bounds by construction (views check the length); a short image reads as 0.
    buf.get(range)
        .map_or(0, |b| BitRange::<u64>::bit_range(&load_be(b), msb, lsb))
}

fn byte_range(info: &FieldInfo, len: usize) -> core::ops::Range<usize> {
    let start = info.byte_offset();
    let end = if info.width == 0 {
        len
    } else {
        start + (info.width as usize).div_ceil(8)
    };
    start.min(len)..end.min(len)
}

/// A read-only view of a byte image as layout `L`.
pub struct View<'a, L> {
    buf: &'a [u8],
    _l: PhantomData<fn() -> L>,
}

impl<L> Clone for View<'_, L> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<L> Copy for View<'_, L> {}
impl<L: Layout> fmt::Debug for View<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct(L::NAME);
        for info in L::FIELDS.iter().filter(|i| i.kind == FieldKind::Value) {
            s.field(info.name, &read_bits(self.buf, info));
        }
        s.finish()
    }
}

impl<'a, L: Layout> View<'a, L> {
    /// Views `buf` as `L`; `buf` may be longer (flexible tails, mailbox data).
    pub fn new(buf: &'a [u8]) -> Result<Self, LayoutError> {
        check_len::<L>(buf.len())?;
        Ok(Self {
            buf,
            _l: PhantomData,
        })
    }
    /// The value of an integer field.
    #[inline]
    pub fn get(&self, f: Field<L>) -> u64 {
        read_bits(self.buf, &f.info)
    }
    /// The value of an integer field of at most 32 bits (wider fields are truncated to their low
    /// 32 bits; use [`View::get`] for them).
    #[inline]
    pub fn get32(&self, f: Field<L>) -> u32 {
        self.get(f) as u32
    }
    /// The bytes of a byte-array field (a flexible tail runs to the end of the buffer).
    pub fn bytes(&self, f: Bytes<L>) -> &'a [u8] {
        let r = byte_range(&f.info, self.buf.len());
        self.buf.get(r).unwrap_or(&[])
    }
    /// The embedded structure `M`.
    pub fn nested<M: Layout>(&self, n: Nested<L, M>) -> View<'a, M> {
        let r = byte_range(&n.info, self.buf.len());
        View {
            buf: self.buf.get(r.start..).unwrap_or(&[]),
            _l: PhantomData,
        }
    }
    /// The whole underlying buffer.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }
    /// The value of any field of this layout by its `mlx5_ifc` name (for tools and profiles).
    pub fn get_by_name(&self, name: &str) -> Option<u64> {
        L::field(name)
            .filter(|i| i.kind == FieldKind::Value)
            .map(|i| read_bits(self.buf, i))
    }
}

/// A writable view of a byte image as layout `L`.
pub struct ViewMut<'a, L> {
    buf: &'a mut [u8],
    _l: PhantomData<fn() -> L>,
}

impl<L: Layout> fmt::Debug for ViewMut<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_view().fmt(f)
    }
}

impl<'a, L: Layout> ViewMut<'a, L> {
    /// Views `buf` as `L`; `buf` may be longer (flexible tails, mailbox data).
    pub fn new(buf: &'a mut [u8]) -> Result<Self, LayoutError> {
        check_len::<L>(buf.len())?;
        Ok(Self {
            buf,
            _l: PhantomData,
        })
    }
    /// A read-only view of the same bytes.
    pub fn as_view(&self) -> View<'_, L> {
        View {
            buf: self.buf,
            _l: PhantomData,
        }
    }
    /// The value of an integer field.
    #[inline]
    pub fn get(&self, f: Field<L>) -> u64 {
        read_bits(self.buf, &f.info)
    }
    /// Sets an integer field; a value wider than the field is refused, never truncated.
    #[inline]
    pub fn set(&mut self, f: Field<L>, value: u64) -> Result<&mut Self, LayoutError> {
        set_bits(self.buf, L::NAME, &f.info, value)?;
        Ok(self)
    }
    /// Copies `src` into a byte-array field; `src` must be exactly the field's length (for a
    /// flexible tail: at most the space left in the buffer).
    pub fn set_bytes(&mut self, f: Bytes<L>, src: &[u8]) -> Result<&mut Self, LayoutError> {
        let r = byte_range(&f.info, self.buf.len());
        let expected = r.len();
        let fits = if f.info.width == 0 {
            src.len() <= expected
        } else {
            src.len() == expected
        };
        if !fits {
            return Err(LayoutError::Length {
                layout: L::NAME,
                field: f.info.name,
                expected,
                got: src.len(),
            });
        }
        if let Some(dst) = self.buf.get_mut(r.start..r.start + src.len()) {
            dst.copy_from_slice(src);
        }
        Ok(self)
    }
    /// The bytes of a byte-array field, writable.
    pub fn bytes_mut(&mut self, f: Bytes<L>) -> &mut [u8] {
        let r = byte_range(&f.info, self.buf.len());
        self.buf.get_mut(r).unwrap_or(&mut [])
    }
    /// The embedded structure `M`, writable.
    pub fn nested_mut<M: Layout>(&mut self, n: Nested<L, M>) -> ViewMut<'_, M> {
        let r = byte_range(&n.info, self.buf.len());
        ViewMut {
            buf: self.buf.get_mut(r.start..).unwrap_or(&mut []),
            _l: PhantomData,
        }
    }
    /// Sets any integer field of this layout by its `mlx5_ifc` name (for tools and profiles).
    /// `Ok(false)` means the layout has no such integer field.
    pub fn set_by_name(&mut self, name: &str, value: u64) -> Result<bool, LayoutError> {
        match L::field(name).filter(|i| i.kind == FieldKind::Value) {
            Some(info) => set_bits(self.buf, L::NAME, info, value).map(|()| true),
            None => Ok(false),
        }
    }
    /// The whole underlying buffer.
    pub fn as_bytes(&mut self) -> &mut [u8] {
        self.buf
    }
}

#[inline]
fn set_bits(
    buf: &mut [u8],
    layout: &'static str,
    info: &FieldInfo,
    value: u64,
) -> Result<(), LayoutError> {
    let width = info.width;
    if width == 0 || (width < 64 && value >> width != 0) {
        return Err(LayoutError::Overflow {
            layout,
            field: info.name,
            width,
            value,
        });
    }
    // Fast path, the same result as the general one: a field within one dword.
    if let Some((at, shift, mask)) = in_dword(info) {
        if let Some(b) = buf.get_mut(at..at + 4) {
            let old = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            let new = (old & !(mask << shift)) | ((value as u32) << shift);
            b.copy_from_slice(&new.to_be_bytes());
            return Ok(());
        }
    }
    set_general(buf, info, value);
    Ok(())
}

/// [`set_bits`] through the general window (any offset, any width up to 64).
#[inline(never)]
fn set_general(buf: &mut [u8], info: &FieldInfo, value: u64) {
    let (range, msb, lsb) = window(info.bit as usize, info.width as usize);
    // In bounds by construction (views check the length); a short image is left alone.
    if let Some(b) = buf.get_mut(range) {
        let mut w = load_be(b);
        BitRangeMut::<u64>::set_bit_range(&mut w, msb, lsb, value);
        store_be(b, w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T;
    impl T {
        const A: Field<T> = Field::new("a", 0x4, 4);
        const B: Field<T> = Field::new("b", 0x8, 24);
        const C: Field<T> = Field::new("c", 0x20, 64);
    }
    impl Layout for T {
        const NAME: &'static str = "t";
        const BYTES: usize = 12;
        const FIELDS: &'static [FieldInfo] = &[T::A.info, T::B.info, T::C.info];
    }

    /// The fast paths give what the general window gives: every offset within three dwords,
    /// every width, over a patterned image and at its short end.
    #[test]
    fn fast_paths_agree_with_the_general_window() {
        let img: [u8; 20] = core::array::from_fn(|i| (i as u8).wrapping_mul(0x9d) ^ 0x5a);
        for bit in 0..96u32 {
            for width in 1..=64u32 {
                let info = FieldInfo {
                    name: "f",
                    bit,
                    width,
                    kind: FieldKind::Value,
                };
                for len in [20usize, 12, (bit as usize + width as usize).div_ceil(8)] {
                    let buf = &img[..len.min(20)];
                    assert_eq!(
                        read_bits(buf, &info),
                        read_general(buf, &info),
                        "read bit {bit} width {width} len {len}"
                    );
                    let value = 0x0123_4567_89ab_cdefu64 & (u64::MAX >> (64 - width));
                    let (mut fast, mut slow) = ([0u8; 20], [0u8; 20]);
                    fast.copy_from_slice(&img);
                    slow.copy_from_slice(&img);
                    set_bits(&mut fast[..len.min(20)], "t", &info, value).unwrap();
                    set_general(&mut slow[..len.min(20)], &info, value);
                    assert_eq!(fast, slow, "set bit {bit} width {width} len {len}");
                }
            }
        }
    }

    #[test]
    fn msb0_over_big_endian_bytes() {
        let mut b = [0u8; 12];
        let mut v = ViewMut::<T>::new(&mut b).unwrap();
        v.set(T::A, 0xa).unwrap().set(T::B, 0x12_3456).unwrap();
        v.set(T::C, 0x0102_0304_0506_0708).unwrap();
        assert_eq!(b, [0x0a, 0x12, 0x34, 0x56, 1, 2, 3, 4, 5, 6, 7, 8]);
        let v = View::<T>::new(&b).unwrap();
        assert_eq!((v.get(T::A), v.get(T::B)), (0xa, 0x12_3456));
    }

    #[test]
    fn setters_refuse_instead_of_truncating() {
        let mut b = [0u8; 12];
        let mut v = ViewMut::<T>::new(&mut b).unwrap();
        let e = v.set(T::B, 0x1ff_ffff).unwrap_err();
        assert!(matches!(
            e,
            LayoutError::Overflow {
                field: "b",
                width: 24,
                ..
            }
        ));
        assert_eq!(b, [0; 12]);
        assert!(View::<T>::new(&b[..11]).is_err());
    }

    /// The definition, one bit at a time: bit `i` of a field at `bit` is image bit `bit + i`
    /// counted from the field's most significant end, bit 0 the MSB of byte 0.
    fn reference_get(buf: &[u8], bit: usize, width: usize) -> u64 {
        (bit..bit + width).fold(0, |v, b| {
            (v << 1) | u64::from(buf[b / 8] >> (7 - b % 8) & 1)
        })
    }

    #[test]
    fn every_offset_and_width_matches_the_bit_by_bit_definition() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut img = [0u8; 24];
        for bit in 0..64 {
            for width in 1..=64 {
                img.iter_mut().for_each(|b| *b = next() as u8);
                let before = img;
                let info = FieldInfo {
                    name: "f",
                    bit: bit as u32,
                    width: width as u32,
                    kind: FieldKind::Value,
                };
                assert_eq!(read_bits(&img, &info), reference_get(&img, bit, width));
                let v = next() >> (64 - width);
                set_bits(&mut img, "t", &info, v).unwrap();
                assert_eq!(
                    reference_get(&img, bit, width),
                    v,
                    "bit {bit} width {width}"
                );
                for b in (0..img.len() * 8).filter(|&b| b < bit || b >= bit + width) {
                    assert_eq!(
                        reference_get(&img, b, 1),
                        reference_get(&before, b, 1),
                        "bit {b} outside the field changed (bit {bit} width {width})"
                    );
                }
            }
        }
    }
}
