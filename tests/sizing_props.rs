//! Properties of QP sizing over random devices and requests: granted ≥ requested, the granted
//! layout fits the hardware, and every error names a field whose request really exceeds what fits.

use mlx5::qp::{CapField, QpCap, QpType, SendOps, SizingError};
use mlx5::raw::{size_qp, sq_overhead, QpLimits, SizeMode};
use proptest::prelude::*;

fn limits() -> impl Strategy<Value = QpLimits> {
    (4u32..=32, 2u32..=6, 4u8..=16).prop_map(|(sq, rq, log)| QpLimits {
        max_wqe_sz_sq: sq * 64,
        max_wqe_sz_rq: 16 << rq,
        log_max_qp_sz: log,
    })
}

fn qp_type() -> impl Strategy<Value = QpType> {
    prop_oneof![Just(QpType::Rc), Just(QpType::Uc), Just(QpType::Ud)]
}

fn ops_for(t: QpType) -> impl Strategy<Value = SendOps> {
    let valid = SendOps::valid_for(t).bits();
    prop_oneof![
        Just(SendOps::default_for(t)),
        (1u16..0x400).prop_map(move |b| {
            let named = SendOps::NAMED
                .iter()
                .filter(|(_, o)| b & o.bits() & valid != 0)
                .fold(SendOps::empty(), |a, (_, o)| a.union(*o));
            if named.is_empty() {
                SendOps::SEND
            } else {
                named
            }
        })
    ]
}

/// A value of one request field: mostly near the limits, but anywhere in `u32` too, so the
/// properties hold over the whole input space.
fn value(typical: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => 0..typical,
        1 => Just(0u32),
        1 => any::<u32>(),
        1 => (u32::MAX - 64)..=u32::MAX,
    ]
}

fn request() -> impl Strategy<Value = QpCap> {
    (
        value(40_000),
        value(40_000),
        value(80),
        value(80),
        value(1_200),
    )
        .prop_map(|(s, r, ss, rs, i)| QpCap {
            max_send_wr: s,
            max_recv_wr: r,
            max_send_sge: ss,
            max_recv_sge: rs,
            max_inline_data: i,
        })
}

fn get(c: &QpCap, f: CapField) -> u32 {
    match f {
        CapField::MaxSendWr => c.max_send_wr,
        CapField::MaxRecvWr => c.max_recv_wr,
        CapField::MaxSendSge => c.max_send_sge,
        CapField::MaxRecvSge => c.max_recv_sge,
        CapField::MaxInlineData => c.max_inline_data,
    }
}

fn with(c: &QpCap, f: CapField, v: u32) -> QpCap {
    let mut c = *c;
    match f {
        CapField::MaxSendWr => c.max_send_wr = v,
        CapField::MaxRecvWr => c.max_recv_wr = v,
        CapField::MaxSendSge => c.max_send_sge = v,
        CapField::MaxRecvSge => c.max_recv_sge = v,
        CapField::MaxInlineData => c.max_inline_data = v,
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn granted_covers_the_request_and_fits_the_hardware(
        l in limits(), (t, ops) in qp_type().prop_flat_map(|t| (Just(t), ops_for(t))), srq in any::<bool>(), req in request()
    ) {
        let Ok(s) = size_qp(&l, t, ops, srq, &req, SizeMode::Exact) else { return Ok(()) };
        let (c, lay) = (s.cap, s.layout);
        let ov = sq_overhead(t, ops);
        prop_assert_eq!(lay.sq_overhead, ov);
        // Granted ≥ requested, for every field of every accepted request — except the receive
        // fields of a QP on an SRQ, which the verbs contract ignores (granted 0).
        for f in [CapField::MaxSendWr, CapField::MaxSendSge, CapField::MaxInlineData] {
            prop_assert!(get(&c, f) >= get(&req, f), "{f:?}: {} < {}", get(&c, f), get(&req, f));
        }
        if !srq {
            for f in [CapField::MaxRecvWr, CapField::MaxRecvSge] {
                prop_assert!(get(&c, f) >= get(&req, f), "{f:?}: {} < {}", get(&c, f), get(&req, f));
            }
        }
        if req.max_send_wr > 0 {
            prop_assert!(lay.sq_wqe_bytes % 64 == 0 && lay.sq_wqe_bytes <= l.max_wqe_sz_sq);
            prop_assert!(lay.sq_wqebb_cnt.is_power_of_two() && lay.sq_wqebb_cnt <= 1 << l.log_max_qp_sz);
            prop_assert!(u64::from(c.max_send_wr) * u64::from(lay.sq_wqe_bytes) <= lay.sq_bytes());
            prop_assert!(ov + 16 * c.max_send_sge <= lay.sq_wqe_bytes);
            // Inline data granted fits the WQE with its 4-byte header (none granted, none to fit:
            // docs/sizing.md, the wrapped-negative deviation).
            prop_assert!(c.max_inline_data == 0 || ov + (4 + c.max_inline_data).div_ceil(16) * 16 <= lay.sq_wqe_bytes);
        } else {
            prop_assert_eq!(lay.sq_wqebb_cnt, 0);
        }
        if !srq && req.max_recv_wr > 0 {
            prop_assert!(c.max_recv_wr >= req.max_recv_wr && c.max_recv_sge >= req.max_recv_sge);
            prop_assert!(lay.rq_stride_bytes.is_power_of_two() && lay.rq_stride_bytes <= l.max_wqe_sz_rq);
            prop_assert!(lay.rq_wqe_cnt.is_power_of_two() && lay.rq_wqe_cnt <= 1 << l.log_max_qp_sz);
            prop_assert!(16 * c.max_recv_sge <= lay.rq_stride_bytes);
        } else if srq {
            prop_assert_eq!((c.max_recv_wr, c.max_recv_sge, lay.rq_wqe_cnt), (0, 0, 0));
        } else {
            prop_assert_eq!((c.max_recv_wr, c.max_recv_sge, lay.rq_wqe_cnt), (0, req.max_recv_sge, 0));
        }
    }

    #[test]
    fn errors_name_a_field_that_really_exceeds(
        l in limits(), (t, ops) in qp_type().prop_flat_map(|t| (Just(t), ops_for(t))), srq in any::<bool>(), req in request()
    ) {
        let Err(SizingError::TooLarge { field, requested, max, .. }) = size_qp(&l, t, ops, srq, &req, SizeMode::Exact) else {
            return Ok(());
        };
        prop_assert_eq!(requested, get(&req, field));
        prop_assert!(requested > max, "{field:?}: {requested} <= {max}");
        // At `max` this field no longer fails (another field may); one more than max fails on it.
        let at_max = size_qp(&l, t, ops, srq, &with(&req, field, max), SizeMode::Exact);
        prop_assert!(at_max.as_ref().err().and_then(|e| e.field()) != Some(field) || max == 0, "{field:?} at {max}: {at_max:?}");
        let over = size_qp(&l, t, ops, srq, &with(&req, field, max + 1), SizeMode::Exact);
        prop_assert!(over.is_err());
        // Clamp never errs on the per-WQE fields and never grants above the request.
        if let Ok(s) = size_qp(&l, t, ops, srq, &req, SizeMode::Clamp) {
            if req.max_send_wr > 0 {
                prop_assert!(s.cap.max_send_sge <= req.max_send_sge);
            }
        }
    }
}
