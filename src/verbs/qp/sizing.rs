//! Queue pair sizing: (device limits, QP type, send-op set, requested [`QpCap`]) → granted
//! `QpCap` and the work-queue layout, exactly as the mlx5 verbs provider sizes a user QP
//! (docs/sizing.md has the rules, the worked examples and our deliberate deviations).
//!
//! Pure, `no_std`, allocation-free. Every error names the field, what was asked, the largest
//! value that would have worked with the other fields as given, and the hardware limit that
//! decided it.

use core::fmt;

/// Bytes of a send WQE basic block (WQEBB).
pub(crate) const SEND_WQE_BB: u32 = 64;
/// Bytes of a data segment (one SGE) and the unit of WQE sizes.
pub(crate) const SEG: u32 = 16;
/// Bytes of the inline-data segment header.
pub(crate) const INLINE_HDR: u32 = 4;
/// The overflow guard of the provider: `max_send_wr * max_wqe_sz_sq` must stay below 2^31.
const WR_GUARD: u64 = 0x7fff_ffff;

/// Transport service of a QP. RD (reliable datagram) is not offered: no RDMA device or stack
/// implements it (see docs/sizing.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// The general services interface QP (QP1, PRM `st` QP1): a UD QP that is number 1 on the
    /// wire and carries management datagrams (the connection manager's). One per port; not
    /// among the types `ibv_create_qp` offers users ([`QpType::from_name`] does not parse it).
    Gsi,
}

impl QpType {
    /// Lower-case name (`rc`, `uc`, `ud`).
    pub const fn name(self) -> &'static str {
        match self {
            QpType::Rc => "rc",
            QpType::Uc => "uc",
            QpType::Ud => "ud",
            QpType::Gsi => "gsi",
        }
    }

    /// UD or GSI: each send names its destination; messages are one MTU at most.
    pub const fn is_datagram(self) -> bool {
        matches!(self, QpType::Ud | QpType::Gsi)
    }

    /// Parses `rc`, `uc` or `ud` (any case).
    pub fn from_name(s: &str) -> Option<Self> {
        [QpType::Rc, QpType::Uc, QpType::Ud]
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
    }

    /// Upper-case name for messages.
    const fn upper(self) -> &'static str {
        match self {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
            QpType::Gsi => "GSI",
        }
    }
}

/// A set of send opcodes a QP declares it will post (`ibv_create_qp_ex` send_ops_flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SendOps(u16);

impl SendOps {
    /// SEND.
    pub const SEND: Self = Self(1 << 0);
    /// SEND with immediate.
    pub const SEND_IMM: Self = Self(1 << 1);
    /// SEND with invalidate.
    pub const SEND_INV: Self = Self(1 << 2);
    /// RDMA WRITE.
    pub const WRITE: Self = Self(1 << 3);
    /// RDMA WRITE with immediate.
    pub const WRITE_IMM: Self = Self(1 << 4);
    /// RDMA READ.
    pub const READ: Self = Self(1 << 5);
    /// Atomic compare and swap.
    pub const ATOMIC_CS: Self = Self(1 << 6);
    /// Atomic fetch and add.
    pub const ATOMIC_FA: Self = Self(1 << 7);
    /// Local invalidate.
    pub const LOCAL_INV: Self = Self(1 << 8);
    /// Bind memory window.
    pub const BIND_MW: Self = Self(1 << 9);

    /// The ops with their names, in the order `mlx5ctl` accepts them.
    pub const NAMED: [(&'static str, SendOps); 10] = [
        ("send", Self::SEND),
        ("send_imm", Self::SEND_IMM),
        ("send_inv", Self::SEND_INV),
        ("write", Self::WRITE),
        ("write_imm", Self::WRITE_IMM),
        ("read", Self::READ),
        ("atomic_cs", Self::ATOMIC_CS),
        ("atomic_fa", Self::ATOMIC_FA),
        ("local_inv", Self::LOCAL_INV),
        ("bind_mw", Self::BIND_MW),
    ];

    /// No op.
    pub const fn empty() -> Self {
        Self(0)
    }

    /// What `ibv_create_qp` assumes for a type: every op for RC and UC, SEND and SEND_IMM for UD.
    pub const fn default_for(t: QpType) -> Self {
        match t {
            QpType::Rc | QpType::Uc => Self(0x3ff),
            QpType::Ud | QpType::Gsi => Self(Self::SEND.0 | Self::SEND_IMM.0),
        }
    }

    /// The ops the transport can carry at all.
    pub const fn valid_for(t: QpType) -> Self {
        match t {
            QpType::Rc => Self(0x3ff),
            // UC has no READ and no atomics in the transport, but the verbs default still sizes
            // for them; declaring them explicitly is refused.
            QpType::Uc => Self(0x3ff & !(Self::READ.0 | Self::ATOMIC_CS.0 | Self::ATOMIC_FA.0)),
            QpType::Ud | QpType::Gsi => Self(Self::SEND.0 | Self::SEND_IMM.0),
        }
    }

    /// Union.
    pub const fn union(self, o: Self) -> Self {
        Self(self.0 | o.0)
    }

    /// Whether every op of `o` is in `self`.
    pub const fn contains(self, o: Self) -> bool {
        self.0 & o.0 == o.0
    }

    /// Whether any op of `o` is in `self`.
    pub const fn intersects(self, o: Self) -> bool {
        self.0 & o.0 != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// The op named `name` (`send`, `write`, … as in [`SendOps::NAMED`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMED
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, o)| o)
    }
}

/// Queue sizes of a QP, asked for or granted (`struct ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QpCap {
    /// Outstanding send work requests.
    pub max_send_wr: u32,
    /// Outstanding receive work requests.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send work request.
    pub max_inline_data: u32,
}

/// The device limits sizing depends on (from `cmd_hca_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpLimits {
    /// `max_wqe_sz_sq`: largest send WQE in bytes.
    pub max_wqe_sz_sq: u32,
    /// `max_wqe_sz_rq`: largest receive WQE in bytes.
    pub max_wqe_sz_rq: u32,
    /// `log_max_qp_sz`: log2 of the most WQEs (SQ: WQEBBs) of a work queue.
    pub log_max_qp_sz: u8,
}

/// The work-queue layout a granted QP gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QpLayout {
    /// Send overhead in bytes (control and op segments) of the op set and type.
    pub sq_overhead: u32,
    /// Bytes of one send WQE (a multiple of 64).
    pub sq_wqe_bytes: u32,
    /// SQ size in 64-byte WQEBBs (a power of two; 0 without an SQ).
    pub sq_wqebb_cnt: u32,
    /// Bytes of one receive WQE (a power of two; 0 without an RQ).
    pub rq_stride_bytes: u32,
    /// Receive WQEs (a power of two; 0 without an RQ).
    pub rq_wqe_cnt: u32,
}

impl QpLayout {
    /// Bytes of the SQ ring.
    pub const fn sq_bytes(&self) -> u64 {
        self.sq_wqebb_cnt as u64 * SEND_WQE_BB as u64
    }
    /// Bytes of the RQ ring.
    pub const fn rq_bytes(&self) -> u64 {
        self.rq_wqe_cnt as u64 * self.rq_stride_bytes as u64
    }
}

/// The result of sizing: granted caps and the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SizedQp {
    /// What the QP can do (each value ≥ the request, or the clamped request).
    pub cap: QpCap,
    /// How its work queues are laid out.
    pub layout: QpLayout,
}

/// A field of [`QpCap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapField {
    /// `max_send_wr`.
    MaxSendWr,
    /// `max_recv_wr`.
    MaxRecvWr,
    /// `max_send_sge`.
    MaxSendSge,
    /// `max_recv_sge`.
    MaxRecvSge,
    /// `max_inline_data`.
    MaxInlineData,
}

impl CapField {
    /// The verbs name.
    pub const fn name(self) -> &'static str {
        match self {
            CapField::MaxSendWr => "max_send_wr",
            CapField::MaxRecvWr => "max_recv_wr",
            CapField::MaxSendSge => "max_send_sge",
            CapField::MaxRecvSge => "max_recv_sge",
            CapField::MaxInlineData => "max_inline_data",
        }
    }

    fn get(self, c: &QpCap) -> u32 {
        match self {
            CapField::MaxSendWr => c.max_send_wr,
            CapField::MaxRecvWr => c.max_recv_wr,
            CapField::MaxSendSge => c.max_send_sge,
            CapField::MaxRecvSge => c.max_recv_sge,
            CapField::MaxInlineData => c.max_inline_data,
        }
    }

    fn with(self, c: &QpCap, v: u32) -> QpCap {
        let mut c = *c;
        match self {
            CapField::MaxSendWr => c.max_send_wr = v,
            CapField::MaxRecvWr => c.max_recv_wr = v,
            CapField::MaxSendSge => c.max_send_sge = v,
            CapField::MaxRecvSge => c.max_recv_sge = v,
            CapField::MaxInlineData => c.max_inline_data = v,
        }
        c
    }
}

/// The device limit that refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// `max_wqe_sz_sq`.
    MaxWqeSzSq,
    /// `max_wqe_sz_rq`.
    MaxWqeSzRq,
    /// `log_max_qp_sz`.
    LogMaxQpSz,
    /// The provider's overflow guard `max_send_wr * max_wqe_sz_sq < 2^31`.
    WrOverflow,
}

impl Limit {
    /// The capability name.
    pub const fn name(self) -> &'static str {
        match self {
            Limit::MaxWqeSzSq => "max_wqe_sz_sq",
            Limit::MaxWqeSzRq => "max_wqe_sz_rq",
            Limit::LogMaxQpSz => "log_max_qp_sz",
            Limit::WrOverflow => "max_send_wr * max_wqe_sz_sq < 2^31",
        }
    }
}

/// Why a QP cannot be sized as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SizingError {
    /// A field asks for more than fits.
    TooLarge {
        /// The QP type.
        qp_type: QpType,
        /// The field.
        field: CapField,
        /// What was asked.
        requested: u32,
        /// The largest value that fits with the other fields as given (0 if none does).
        max: u32,
        /// The device limit that decided it.
        limit: Limit,
        /// The limit's value.
        limit_value: u32,
        /// The send overhead of the type and op set, in bytes.
        overhead: u32,
    },
    /// The declared op set has an op the transport cannot carry.
    OpNotSupported {
        /// The QP type.
        qp_type: QpType,
        /// The ops that are not valid for it.
        ops: SendOps,
    },
}

impl SizingError {
    /// The field that was refused, if any.
    pub fn field(&self) -> Option<CapField> {
        match *self {
            SizingError::TooLarge { field, .. } => Some(field),
            SizingError::OpNotSupported { .. } => None,
        }
    }
}

impl fmt::Display for SizingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let SizingError::TooLarge {
            qp_type,
            field,
            requested,
            max,
            limit,
            limit_value,
            overhead,
        } = *self
        else {
            let SizingError::OpNotSupported { qp_type, ops } = *self else {
                return Ok(());
            };
            write!(f, "send ops")?;
            for (n, o) in SendOps::NAMED {
                if ops.contains(o) {
                    write!(f, " {n}")?;
                }
            }
            return write!(f, " cannot be posted on a {} QP", qp_type.upper());
        };
        let t = qp_type.upper();
        write!(f, "{} {requested} exceeds {max}: ", field.name())?;
        match (field, limit) {
            (CapField::MaxInlineData, _) => write!(
                f,
                "a {limit_value}-byte send WQE ({}) minus {overhead} bytes of {t} overhead and the {INLINE_HDR}-byte inline header",
                limit.name()
            ),
            (CapField::MaxSendSge, _) => write!(
                f,
                "a {limit_value}-byte send WQE ({}) minus {overhead} bytes of {t} overhead holds {max} 16-byte SGEs",
                limit.name()
            ),
            (CapField::MaxRecvSge, _) => {
                write!(f, "a {limit_value}-byte receive WQE ({}) holds {max} 16-byte SGEs", limit.name())
            }
            (CapField::MaxSendWr, Limit::LogMaxQpSz) => write!(
                f,
                "the SQ holds at most {limit_value} 64-byte WQEBBs ({}) and each WQE of this QP takes {} bytes",
                limit.name(),
                if max == 0 { 0 } else { (limit_value as u64 * 64 / max as u64) as u32 }
            ),
            (_, Limit::LogMaxQpSz) => {
                write!(f, "a work queue holds at most {limit_value} WQEs ({})", limit.name())
            }
            (_, lim) => write!(f, "{} (max_wqe_sz_sq {limit_value})", lim.name()),
        }
    }
}

/// What to do when a request does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SizeMode {
    /// Refuse it with an error naming the field (the verbs behaviour).
    #[default]
    Exact,
    /// Lower each field that does not fit to the largest value that does.
    Clamp,
}

/// The send overhead of a type and op set (control segment plus the largest op segments).
pub const fn sq_overhead(t: QpType, ops: SendOps) -> u32 {
    let mut ov = 16;
    if ops.intersects(SendOps(
        SendOps::WRITE.0 | SendOps::WRITE_IMM.0 | SendOps::READ.0,
    )) {
        ov = 32;
    }
    if ops.intersects(SendOps(SendOps::ATOMIC_CS.0 | SendOps::ATOMIC_FA.0)) {
        ov = 48;
    }
    if ops.intersects(SendOps(SendOps::LOCAL_INV.0 | SendOps::BIND_MW.0)) {
        ov = 192;
    }
    match t {
        QpType::Ud | QpType::Gsi => ov + 48,
        QpType::Rc | QpType::Uc => ov,
    }
}

#[inline]
const fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

#[inline]
const fn roundup_pow2(n: u64) -> u64 {
    if n <= 1 {
        1
    } else {
        n.next_power_of_two()
    }
}

/// Where one sizing pass failed.
#[derive(Clone, Copy)]
struct Fail {
    field: CapField,
    limit: Limit,
}

impl CapField {
    const fn is_send(self) -> bool {
        matches!(
            self,
            CapField::MaxSendWr | CapField::MaxSendSge | CapField::MaxInlineData
        )
    }
}

/// One pass over the provider's rules, in its order (SQ, then RQ). `Err` names the first rule
/// that refused.
#[inline]
fn compute(l: &QpLimits, ov: u32, srq: bool, req: &QpCap) -> Result<SizedQp, Fail> {
    let mut cap = QpCap::default();
    let mut layout = QpLayout {
        sq_overhead: ov,
        ..QpLayout::default()
    };
    compute_sq(l, ov, req, &mut cap, &mut layout)?;
    compute_rq(l, srq, req, &mut cap, &mut layout)?;
    Ok(SizedQp { cap, layout })
}

#[inline]
fn compute_sq(
    l: &QpLimits,
    ov: u32,
    req: &QpCap,
    cap: &mut QpCap,
    layout: &mut QpLayout,
) -> Result<(), Fail> {
    let max_sq = u64::from(l.max_wqe_sz_sq);
    let max_wqes = 1u64 << l.log_max_qp_sz.min(31);
    let ov64 = u64::from(ov);

    if req.max_send_wr > 0 {
        let inl = if req.max_inline_data > 0 {
            ov64 + align(
                u64::from(INLINE_HDR) + u64::from(req.max_inline_data),
                u64::from(SEG),
            )
        } else {
            0
        };
        if max_sq < ov64 || u64::from(req.max_send_sge) > (max_sq - ov64) / u64::from(SEG) {
            return Err(Fail {
                field: CapField::MaxSendSge,
                limit: Limit::MaxWqeSzSq,
            });
        }
        let size = ov64 + u64::from(SEG) * u64::from(req.max_send_sge);
        let tot = size.max(inl);
        let blame = if inl > size {
            CapField::MaxInlineData
        } else {
            CapField::MaxSendSge
        };
        if tot > max_sq {
            return Err(Fail {
                field: blame,
                limit: Limit::MaxWqeSzSq,
            });
        }
        let wqe = align(tot, u64::from(SEND_WQE_BB));
        if wqe > max_sq {
            return Err(Fail {
                field: blame,
                limit: Limit::MaxWqeSzSq,
            });
        }
        if u64::from(req.max_send_wr) > WR_GUARD / max_sq.max(1) {
            return Err(Fail {
                field: CapField::MaxSendWr,
                limit: Limit::WrOverflow,
            });
        }
        let sq_bytes = roundup_pow2(u64::from(req.max_send_wr) * wqe);
        let bbs = sq_bytes / u64::from(SEND_WQE_BB);
        if bbs > max_wqes {
            return Err(Fail {
                field: CapField::MaxSendWr,
                limit: Limit::LogMaxQpSz,
            });
        }
        cap.max_send_wr = (sq_bytes / wqe) as u32;
        cap.max_send_sge = req.max_send_sge;
        // The provider computes `wqe - ov - 4`, which wraps to 2^32 - 4 for an RC QP with no SGE
        // and no inline data; we grant 0 instead (docs/sizing.md).
        cap.max_inline_data = (wqe.saturating_sub(ov64 + u64::from(INLINE_HDR))) as u32;
        layout.sq_wqe_bytes = wqe as u32;
        layout.sq_wqebb_cnt = bbs as u32;
    } else {
        // No send queue: nothing to size, and the request is granted as asked (granted ≥
        // requested; rdma-core's provider leaves `max_send_sge` and `max_inline_data` as given).
        cap.max_send_sge = req.max_send_sge;
        cap.max_inline_data = req.max_inline_data;
    }
    Ok(())
}

#[inline]
fn compute_rq(
    l: &QpLimits,
    srq: bool,
    req: &QpCap,
    cap: &mut QpCap,
    layout: &mut QpLayout,
) -> Result<(), Fail> {
    let max_rq = u64::from(l.max_wqe_sz_rq);
    let max_wqes = 1u64 << l.log_max_qp_sz.min(31);
    // With an SRQ the receive attributes are ignored — not checked — and granted 0 (the seed
    // document; the provider still checks max_recv_wr, see docs/sizing.md).
    if !srq && req.max_recv_wr > 0 {
        if u64::from(req.max_recv_wr) > max_wqes {
            return Err(Fail {
                field: CapField::MaxRecvWr,
                limit: Limit::LogMaxQpSz,
            });
        }
        let bytes = u64::from(SEG) * u64::from(req.max_recv_sge.max(1));
        if bytes > max_rq {
            return Err(Fail {
                field: CapField::MaxRecvSge,
                limit: Limit::MaxWqeSzRq,
            });
        }
        let stride = roundup_pow2(bytes);
        let rq_bytes = (roundup_pow2(u64::from(req.max_recv_wr)) * stride).max(64);
        let cnt = rq_bytes / stride;
        if cnt > max_wqes {
            return Err(Fail {
                field: CapField::MaxRecvWr,
                limit: Limit::LogMaxQpSz,
            });
        }
        cap.max_recv_wr = cnt as u32;
        cap.max_recv_sge = (stride / u64::from(SEG)) as u32;
        layout.rq_stride_bytes = stride as u32;
        layout.rq_wqe_cnt = cnt as u32;
    } else if !srq {
        // No receive queue: `max_recv_sge` is granted as asked (the provider reports 0 here; we
        // keep granted ≥ requested, docs/sizing.md).
        cap.max_recv_sge = req.max_recv_sge;
    }
    Ok(())
}

/// The largest value of `field` (≤ `hi`) with which its queue (SQ or RQ) sizes, the other fields
/// as in `req`; `None` if even 0 fails.
fn largest_fitting(
    l: &QpLimits,
    ov: u32,
    srq: bool,
    req: &QpCap,
    field: CapField,
    hi: u32,
) -> Option<u32> {
    let ok = |v: u32| {
        let r = field.with(req, v);
        let (mut c, mut lay) = (QpCap::default(), QpLayout::default());
        if field.is_send() {
            compute_sq(l, ov, &r, &mut c, &mut lay).is_ok()
        } else {
            compute_rq(l, srq, &r, &mut c, &mut lay).is_ok()
        }
    };
    if !ok(0) {
        return None;
    }
    let (mut lo, mut hi) = (0u32, hi);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

fn limit_value(l: &QpLimits, limit: Limit) -> u32 {
    match limit {
        Limit::MaxWqeSzSq | Limit::WrOverflow => l.max_wqe_sz_sq,
        Limit::MaxWqeSzRq => l.max_wqe_sz_rq,
        Limit::LogMaxQpSz => 1u32 << l.log_max_qp_sz.min(31),
    }
}

/// Sizes a QP: the granted caps (each ≥ the request in [`SizeMode::Exact`]) and its layout.
pub fn size_qp(
    l: &QpLimits,
    t: QpType,
    ops: SendOps,
    srq: bool,
    req: &QpCap,
    mode: SizeMode,
) -> Result<SizedQp, SizingError> {
    // The type's default set is always accepted (UC's default sizes for READ and atomics, as
    // verbs does); a declared set may only hold ops the transport carries.
    let bad = SendOps(ops.0 & !SendOps::valid_for(t).0);
    if !bad.is_empty() && ops != SendOps::default_for(t) {
        return Err(SizingError::OpNotSupported {
            qp_type: t,
            ops: bad,
        });
    }
    let ov = sq_overhead(t, ops);
    let mut req = *req;
    if mode == SizeMode::Clamp {
        // Per-WQE fields first, each to the most a WQE can hold on its own; the queue depths are
        // then clamped below with the WQE sizes as they came out.
        let base = QpCap {
            max_send_wr: 1,
            max_recv_wr: 1,
            ..QpCap::default()
        };
        for f in [
            CapField::MaxSendSge,
            CapField::MaxInlineData,
            CapField::MaxRecvSge,
        ] {
            if let Some(m) = largest_fitting(l, ov, srq, &base, f, u32::MAX) {
                req = f.with(&req, f.get(&req).min(m));
            }
        }
    }
    // Each pass either succeeds or lowers one field to a value that fits; five fields bound it.
    for _ in 0..6 {
        match compute(l, ov, srq, &req) {
            Ok(s) => return Ok(s),
            Err(fail) => {
                let requested = fail.field.get(&req);
                let max =
                    largest_fitting(l, ov, srq, &req, fail.field, requested.saturating_sub(1));
                // Clamping a queue depth to 0 would remove the queue: that is an error instead.
                if let (SizeMode::Clamp, Some(m @ 1..)) = (mode, max) {
                    req = fail.field.with(&req, m);
                    continue;
                }
                return Err(SizingError::TooLarge {
                    qp_type: t,
                    field: fail.field,
                    requested,
                    max: max.unwrap_or(0),
                    limit: fail.limit,
                    limit_value: limit_value(l, fail.limit),
                    overhead: ov,
                });
            }
        }
    }
    // Unreachable in practice: every pass either succeeds or lowers a field to a fitting value.
    compute(l, ov, srq, &req).map_err(|fail| SizingError::TooLarge {
        qp_type: t,
        field: fail.field,
        requested: fail.field.get(&req),
        max: 0,
        limit: fail.limit,
        limit_value: limit_value(l, fail.limit),
        overhead: ov,
    })
}

/// The largest value of each field a QP of this type and op set can be created with on this
/// device, each with the other fields at their minimum (1 WR each way, 0 SGEs, no inline).
/// What the verbs FAQ says "you can't know": no trial and error needed.
pub fn max_qp_cap(l: &QpLimits, t: QpType, ops: SendOps) -> QpCap {
    let ov = sq_overhead(t, ops);
    let base = QpCap {
        max_send_wr: 1,
        max_recv_wr: 1,
        ..QpCap::default()
    };
    let best = |f: CapField| largest_fitting(l, ov, false, &base, f, u32::MAX).unwrap_or(0);
    QpCap {
        max_send_wr: best(CapField::MaxSendWr),
        max_recv_wr: best(CapField::MaxRecvWr),
        max_send_sge: best(CapField::MaxSendSge),
        max_recv_sge: best(CapField::MaxRecvSge),
        max_inline_data: best(CapField::MaxInlineData),
    }
}
