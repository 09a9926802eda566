//! Memory keys as the model holds them ([`Mkey`]), the translation the data path uses and
//! remote invalidation. The commands that create, destroy and query them are [`crate::fw`]'s
//! `mkey`.
//!
//! Remote invalidation ([`super::translation::invalidate_remote`], a received SEND with invalidate naming the key in
//! its IETH): the key names a live mkey whose variant byte matches and that is not free
//! ([`KeyError::BadKey`]; the reserved lkey and the null mkey never qualify), of the QP's PD
//! ([`KeyError::Pd`]), created with `en_rinval` set ([`KeyError::Access`]). `en_rinval` is the
//! mkc bit Linux sets on exactly the keys meant to be invalidated by a peer — fast-registration
//! MRs (`MLX5_MKEY_REMOTE_INVAL` in the UMR's mkey segment, `set_reg_mkey_seg` in mlx5_ib's
//! wr.c) and type 2 memory windows (`mlx5_ib_alloc_mw`) — and never on a plain registered
//! region, which a peer may not invalidate (Linux's soft RoCE, too, invalidates only
//! fast-registration MRs: `rxe_invalidate_mr`). An invalidated mkey becomes free, as a local
//! invalidate leaves it (its context's `free` bit set, which QUERY_MKEY shows): every later
//! access through it fails until it is destroyed.
//!
//! Translation ([`super::translation::translate`]): a key names a live mkey whose variant byte matches, created not
//! free ([`KeyError::BadKey`]); its PD is the QP's ([`KeyError::Pd`]); it grants the access
//! asked for ([`KeyError::Access`]); `[va, va + len)` lies inside `[start_addr, start_addr +
//! len)` ([`KeyError::Bounds`]). An indirect (KLM) key — a memory window — maps its range
//! through its entries, in order, each onto a direct key of the same PD, which must grant the
//! local side of the access (local read for a read, local write for a write or an atomic); a
//! remote access through a type 2 window bound to a QP must arrive on that QP
//! ([`super::translation::translate_remote`]; [`KeyError::Access`]). The reserved lkey ([`RESD_LKEY`]) is a PA key of every PD with
//! local read and write access only; the null mkey fails every access.

/// The reserved lkey (QUERY_SPECIAL_CONTEXTS `resd_lkey`): a PA key of every PD.
pub const RESD_LKEY: u32 = 0x100;
/// The null mkey (QUERY_SPECIAL_CONTEXTS `null_mkey`): every access through it fails.
pub const NULL_MKEY: u32 = 0x200;

/// Access rights of an mkey (bits of [`Mkey::access`]).
pub(crate) mod access {
    pub(crate) const LOCAL_READ: u8 = 1;
    pub(crate) const LOCAL_WRITE: u8 = 2;
    pub(crate) const REMOTE_READ: u8 = 4;
    pub(crate) const REMOTE_WRITE: u8 = 8;
    pub(crate) const ATOMIC: u8 = 16;
}

/// What the device keeps about a memory key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mkey {
    /// The `mkc` image as created.
    pub(crate) ctx: Vec<u8>,
    pub(crate) variant: u8,
    pub(crate) pd: u32,
    pub(crate) start: u64,
    pub(crate) len: u64,
    /// `length64`: the whole address space.
    pub(crate) whole: bool,
    pub(crate) access: u8,
    /// MTT mode: page shift and entries — each a page address with its present bits
    /// ([`MTT_PRESENT`]) in bits 1:0; `None` in PA and KLM mode.
    pub(crate) mtt: Option<(u32, Vec<u64>)>,
    /// KLM mode (an indirect key, e.g. a memory window): its entries, in order; `None` in the
    /// other modes.
    pub(crate) klm: Option<Vec<Klm>>,
    /// KSM mode (an implicit ODP parent): its table; `None` in the other modes.
    pub(crate) ksm: Option<Ksm>,
    /// MEMIC mode: device memory from `start` (a BAR0 offset), zero-based.
    pub(crate) memic: bool,
    /// SW_ICM mode: SW ICM from `start` (an ICM address), zero-based.
    pub(crate) icm: bool,
    /// The QP a type 2 memory window is bound to (`qpn`; 0xffffff: none).
    pub(crate) qpn: u32,
    pub(crate) free: bool,
    /// `en_rinval`: a peer's SEND with invalidate may invalidate the key.
    pub(crate) rinval: bool,
}

impl Mkey {
    /// The translation entries it holds: MTT, KLM and KSM entries (against the device's
    /// [`super::objects::TRANSLATION_BUDGET`]).
    pub(crate) fn translations(&self) -> u64 {
        let mtt = self.mtt.as_ref().map_or(0, |(_, p)| p.len());
        let klm = self.klm.as_ref().map_or(0, Vec::len);
        let ksm = self.ksm.as_ref().map_or(0, |t| t.entries.len());
        (mtt + klm + ksm) as u64
    }
}

/// One KLM entry of an indirect key: `bytes` of the key's range map to `[addr, addr + bytes)`
/// through `key` (a direct key: PA or MTT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Klm {
    pub(crate) bytes: u32,
    pub(crate) key: u32,
    pub(crate) addr: u64,
}

impl Klm {
    /// Bytes of a KLM entry (`mlx5_wqe_umr_klm_seg`, `klm` of mlx5_ifc): byte count, key,
    /// address, all big-endian.
    pub(crate) const BYTES: usize = 16;

    /// The entry of bytes `b` (16 of them).
    pub(crate) fn parse(b: &[u8]) -> Option<Klm> {
        let w = |at: usize| -> Option<[u8; 4]> { b.get(at..at + 4)?.try_into().ok() };
        let a: [u8; 8] = b.get(8..16)?.try_into().ok()?;
        Some(Klm {
            bytes: u32::from_be_bytes(w(0)?),
            key: u32::from_be_bytes(w(4)?),
            addr: u64::from_be_bytes(a),
        })
    }
}

/// An MTT entry's present bits: readable, writable (on-demand paging; [`mlx5_ifc::consts::odp`]).
pub(crate) const MTT_PRESENT: u64 =
    mlx5_ifc::consts::odp::MTT_READ | mlx5_ifc::consts::odp::MTT_WRITE;
/// An MTT entry's flag bits (its low 12 bits; the page address above them).
pub(crate) const MTT_FLAGS: u64 = 0xfff;

/// The table of a KSM key: entity `n` — bytes `[start + n << shift, + 1 << shift)` of the key's
/// range — maps through `(key, address)`; an entry naming the null mkey is absent and not kept
/// (Linux's implicit ODP parent has 2^17 entries of 1 GiB, nearly all null).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ksm {
    /// log2 of the entity size (the key's `log_page_size`).
    pub(crate) shift: u32,
    /// The non-null entries: entity → (key, address).
    pub(crate) entries: std::collections::BTreeMap<u64, (u32, u64)>,
}

/// `qpn` of a key bound to no QP.
pub(crate) const NO_QPN: u32 = 0xff_ffff;

/// Why a key does not grant an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// No such mkey (or a wrong variant byte, or a free / null mkey).
    BadKey,
    /// The mkey belongs to another PD.
    Pd,
    /// The mkey does not grant the access.
    Access,
    /// The range is outside the mkey.
    Bounds,
    /// A page of the range is not present for the access (an MTT entry without its read or
    /// write bit while the device pages on demand, `pg`): a page fault.
    Absent,
}

/// The IOVA pieces of a translated range, in order: a few (a message within a few pages)
/// without an allocation, more on the heap.
pub(crate) type IovaPieces = crate::small::SmallList<(u64, usize), 4>;
