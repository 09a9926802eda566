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
//! len)` ([`KeyError::Bounds`]). The reserved lkey ([`RESD_LKEY`]) is a PA key of every PD with
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
    /// MTT mode: page shift and page addresses; `None` in PA mode.
    pub(crate) mtt: Option<(u32, Vec<u64>)>,
    pub(crate) free: bool,
    /// `en_rinval`: a peer's SEND with invalidate may invalidate the key.
    pub(crate) rinval: bool,
}

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
}

/// The IOVA pieces of a translated range, in order: a few (a message within a few pages)
/// without an allocation, more on the heap.
pub(crate) type IovaPieces = crate::small::SmallList<(u64, usize), 4>;
