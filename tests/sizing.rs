//! QP sizing against the worked examples of the reference (mlx5-datapath-sizing.md §5.5), each
//! row computed by executing the mlx5 provider's own sizing logic, plus the seed's examples,
//! the limit answers and the error messages.

use mlx5::qp::{CapField, Limit, QpCap, QpType, SendOps, SizingError};
use mlx5::raw::{max_qp_cap, size_qp, QpLimits, SizeMode};

const CX5: QpLimits = QpLimits {
    max_wqe_sz_sq: 1024,
    max_wqe_sz_rq: 512,
    log_max_qp_sz: 15,
};
const SQ512: QpLimits = QpLimits {
    max_wqe_sz_sq: 512,
    ..CX5
};
const TIGHT: QpLimits = QpLimits {
    log_max_qp_sz: 10,
    ..CX5
};

fn cap(s_wr: u32, r_wr: u32, s_sge: u32, r_sge: u32, inl: u32) -> QpCap {
    QpCap {
        max_send_wr: s_wr,
        max_recv_wr: r_wr,
        max_send_sge: s_sge,
        max_recv_sge: r_sge,
        max_inline_data: inl,
    }
}

/// Granted caps and (send WQE bytes, SQ WQEBBs, RQ stride, RQ count).
type Granted = (QpCap, (u32, u32, u32, u32));

struct Row {
    n: u32,
    l: QpLimits,
    t: QpType,
    srq: bool,
    ops: Option<SendOps>,
    req: QpCap,
    /// granted caps and (wqe bytes, sq BBs, rq stride, rq count); None = refused with this field
    out: Result<Granted, CapField>,
}

fn rows() -> Vec<Row> {
    use QpType::*;
    let r = |n, l, t, srq, req, out| Row {
        n,
        l,
        t,
        srq,
        ops: None,
        req,
        out,
    };
    let send_only = SendOps::SEND;
    vec![
        r(
            1,
            CX5,
            Rc,
            false,
            cap(2, 2, 1, 1, 0),
            Ok((cap(2, 4, 1, 1, 60), (256, 8, 16, 4))),
        ),
        r(
            2,
            CX5,
            Rc,
            true,
            cap(2, 2, 1, 1, 0),
            Ok((cap(2, 0, 1, 0, 60), (256, 8, 0, 0))),
        ),
        r(
            3,
            CX5,
            Rc,
            false,
            cap(2, 2, 1, 1, 512),
            Ok((cap(2, 4, 1, 1, 572), (768, 32, 16, 4))),
        ),
        r(
            4,
            CX5,
            Ud,
            false,
            cap(2, 2, 1, 1, 0),
            Ok((cap(2, 4, 1, 1, 60), (128, 4, 16, 4))),
        ),
        // Row 5: the provider returns 2^32 - 4 (wrapped -4); we grant 0 (docs/sizing.md).
        r(
            5,
            CX5,
            Rc,
            false,
            cap(1, 1, 0, 1, 0),
            Ok((cap(1, 4, 0, 1, 0), (192, 4, 16, 4))),
        ),
        r(
            6,
            CX5,
            Rc,
            false,
            cap(8192, 1, 1, 1, 0),
            Ok((cap(8192, 4, 1, 1, 60), (256, 32768, 16, 4))),
        ),
        r(
            7,
            CX5,
            Rc,
            false,
            cap(8193, 1, 1, 1, 0),
            Err(CapField::MaxSendWr),
        ),
        r(
            8,
            CX5,
            Ud,
            false,
            cap(16384, 1, 1, 1, 0),
            Ok((cap(16384, 4, 1, 1, 60), (128, 32768, 16, 4))),
        ),
        r(
            9,
            CX5,
            Ud,
            false,
            cap(16385, 1, 1, 1, 0),
            Err(CapField::MaxSendWr),
        ),
        r(
            10,
            CX5,
            Rc,
            false,
            cap(64, 1, 30, 1, 0),
            Ok((cap(93, 4, 30, 1, 508), (704, 1024, 16, 4))),
        ),
        r(
            11,
            CX5,
            Rc,
            false,
            cap(64, 1, 52, 1, 0),
            Ok((cap(64, 4, 52, 1, 828), (1024, 1024, 16, 4))),
        ),
        r(
            12,
            CX5,
            Rc,
            false,
            cap(64, 1, 53, 1, 0),
            Err(CapField::MaxSendSge),
        ),
        r(
            13,
            CX5,
            Ud,
            false,
            cap(64, 1, 60, 1, 0),
            Ok((cap(64, 4, 60, 1, 956), (1024, 1024, 16, 4))),
        ),
        r(
            14,
            CX5,
            Rc,
            false,
            cap(64, 1, 1, 1, 828),
            Ok((cap(64, 4, 1, 1, 828), (1024, 1024, 16, 4))),
        ),
        r(
            15,
            CX5,
            Rc,
            false,
            cap(64, 1, 1, 1, 829),
            Err(CapField::MaxInlineData),
        ),
        r(
            16,
            CX5,
            Ud,
            false,
            cap(64, 1, 1, 1, 956),
            Ok((cap(64, 4, 1, 1, 956), (1024, 1024, 16, 4))),
        ),
        Row {
            ops: Some(send_only),
            ..r(
                17,
                CX5,
                Rc,
                false,
                cap(64, 1, 1, 1, 1004),
                Ok((cap(64, 4, 1, 1, 1004), (1024, 1024, 16, 4))),
            )
        },
        Row {
            ops: Some(send_only),
            ..r(
                18,
                CX5,
                Rc,
                false,
                cap(64, 1, 1, 1, 1005),
                Err(CapField::MaxInlineData),
            )
        },
        r(
            19,
            CX5,
            Rc,
            false,
            cap(1, 32768, 1, 1, 0),
            Ok((cap(1, 32768, 1, 1, 60), (256, 4, 16, 32768))),
        ),
        r(
            20,
            CX5,
            Rc,
            false,
            cap(1, 16, 1, 32, 0),
            Ok((cap(1, 16, 1, 32, 60), (256, 4, 512, 16))),
        ),
        r(
            21,
            CX5,
            Rc,
            false,
            cap(1, 16, 1, 33, 0),
            Err(CapField::MaxRecvSge),
        ),
        r(
            22,
            CX5,
            Rc,
            false,
            cap(1, 100, 1, 3, 0),
            Ok((cap(1, 128, 1, 4, 60), (256, 4, 64, 128))),
        ),
        r(
            23,
            CX5,
            Rc,
            false,
            cap(0, 8, 4, 1, 100),
            Ok((cap(0, 8, 4, 1, 100), (0, 0, 16, 8))),
        ),
        r(
            24,
            CX5,
            Ud,
            false,
            cap(16, 0, 1, 4, 0),
            // The provider reports max_recv_sge 0 without an RQ; we grant the request
            // (granted ≥ requested, docs/sizing.md "Deliberate deviations").
            Ok((cap(16, 0, 1, 4, 60), (128, 32, 0, 0))),
        ),
        // Row 25: the provider refuses max_recv_wr 40000 even with an SRQ; the seed says the
        // receive attributes are ignored, so we grant 0 (docs/sizing.md).
        r(
            25,
            CX5,
            Rc,
            true,
            cap(16, 40000, 1, 1, 0),
            Ok((cap(16, 0, 1, 0, 60), (256, 64, 0, 0))),
        ),
        r(
            27,
            SQ512,
            Rc,
            false,
            cap(16, 1, 20, 1, 0),
            Ok((cap(16, 4, 20, 1, 316), (512, 128, 16, 4))),
        ),
        r(
            28,
            SQ512,
            Rc,
            false,
            cap(16, 1, 30, 1, 0),
            Err(CapField::MaxSendSge),
        ),
        r(
            29,
            TIGHT,
            Rc,
            false,
            cap(100, 100, 1, 1, 0),
            Ok((cap(128, 128, 1, 1, 60), (256, 512, 16, 128))),
        ),
        r(
            30,
            TIGHT,
            Rc,
            false,
            cap(300, 1, 1, 1, 0),
            Err(CapField::MaxSendWr),
        ),
    ]
}

#[test]
fn worked_examples_of_the_reference() {
    for row in rows() {
        let ops = row.ops.unwrap_or(SendOps::default_for(row.t));
        let got = size_qp(&row.l, row.t, ops, row.srq, &row.req, SizeMode::Exact);
        match (got, row.out) {
            (Ok(s), Ok((cap, (wqe, bbs, stride, cnt)))) => {
                assert_eq!(s.cap, cap, "row {}: caps", row.n);
                let l = s.layout;
                assert_eq!(
                    (
                        l.sq_wqe_bytes,
                        l.sq_wqebb_cnt,
                        l.rq_stride_bytes,
                        l.rq_wqe_cnt
                    ),
                    (wqe, bbs, stride, cnt),
                    "row {}",
                    row.n
                );
            }
            (Err(e), Err(field)) => assert_eq!(e.field(), Some(field), "row {}: {e}", row.n),
            (got, want) => panic!("row {}: got {got:?}, want {want:?}", row.n),
        }
    }
}

#[test]
fn the_seeds_examples() {
    let ops = SendOps::default_for(QpType::Rc);
    // Examples 1 and 2 (one CQ or two: sizing is the same), 3 (SRQ: receive attributes left 0),
    // 4 (inline 512).
    let s = size_qp(
        &CX5,
        QpType::Rc,
        ops,
        false,
        &cap(2, 2, 1, 1, 0),
        SizeMode::Exact,
    )
    .unwrap();
    assert_eq!(s.cap, cap(2, 4, 1, 1, 60));
    let s = size_qp(
        &CX5,
        QpType::Rc,
        ops,
        true,
        &cap(2, 0, 1, 0, 0),
        SizeMode::Exact,
    )
    .unwrap();
    assert_eq!(s.cap, cap(2, 0, 1, 0, 60));
    let s = size_qp(
        &CX5,
        QpType::Rc,
        ops,
        false,
        &cap(2, 2, 1, 1, 512),
        SizeMode::Exact,
    )
    .unwrap();
    assert_eq!(s.cap, cap(2, 4, 1, 1, 572));
}

#[test]
fn errors_name_the_field_the_max_and_the_limit() {
    let ops = SendOps::default_for(QpType::Rc);
    let e = size_qp(
        &CX5,
        QpType::Rc,
        ops,
        false,
        &cap(64, 1, 1, 1, 1005),
        SizeMode::Exact,
    )
    .unwrap_err();
    assert_eq!(
        e,
        SizingError::TooLarge {
            qp_type: QpType::Rc,
            field: CapField::MaxInlineData,
            requested: 1005,
            max: 828,
            limit: Limit::MaxWqeSzSq,
            limit_value: 1024,
            overhead: 192
        }
    );
    assert_eq!(
        e.to_string(),
        "max_inline_data 1005 exceeds 828: a 1024-byte send WQE (max_wqe_sz_sq) minus 192 bytes of RC overhead and the 4-byte inline header"
    );
    let e = size_qp(
        &CX5,
        QpType::Rc,
        ops,
        false,
        &cap(8193, 1, 1, 1, 0),
        SizeMode::Exact,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            SizingError::TooLarge {
                field: CapField::MaxSendWr,
                max: 8192,
                limit: Limit::LogMaxQpSz,
                ..
            }
        ),
        "{e}"
    );
    let e = size_qp(
        &CX5,
        QpType::Rc,
        ops,
        false,
        &cap(64, 1, 53, 1, 0),
        SizeMode::Exact,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            SizingError::TooLarge {
                field: CapField::MaxSendSge,
                max: 52,
                ..
            }
        ),
        "{e}"
    );
    let e = size_qp(
        &CX5,
        QpType::Rc,
        ops,
        false,
        &cap(1, 16, 1, 33, 0),
        SizeMode::Exact,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            SizingError::TooLarge {
                field: CapField::MaxRecvSge,
                max: 32,
                limit: Limit::MaxWqeSzRq,
                ..
            }
        ),
        "{e}"
    );
    let e = size_qp(
        &CX5,
        QpType::Ud,
        SendOps::WRITE,
        false,
        &cap(1, 1, 1, 1, 0),
        SizeMode::Exact,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "send ops write cannot be posted on a UD QP");
}

#[test]
fn clamp_grants_the_largest_that_fits() {
    let ops = SendOps::default_for(QpType::Rc);
    let s = size_qp(
        &CX5,
        QpType::Rc,
        ops,
        false,
        &cap(100_000, 100_000, 100, 100, 5000),
        SizeMode::Clamp,
    )
    .unwrap();
    assert_eq!(s.cap.max_send_sge, 52);
    assert_eq!(s.cap.max_inline_data, 828);
    assert_eq!(
        s.cap.max_send_wr, 2048,
        "a 1024-byte WQE: 32768 WQEBBs / 16"
    );
    assert_eq!(
        s.cap.max_recv_wr, 32768,
        "the RQ limit counts WQEs, whatever their size"
    );
    assert_eq!(s.cap.max_recv_sge, 32);
    // Nothing to clamp: the same as exact.
    let r = cap(2, 2, 1, 1, 0);
    assert_eq!(
        size_qp(&CX5, QpType::Rc, ops, false, &r, SizeMode::Clamp),
        size_qp(&CX5, QpType::Rc, ops, false, &r, SizeMode::Exact)
    );
}

#[test]
fn max_qp_cap_answers_the_faq() {
    let rc = max_qp_cap(&CX5, QpType::Rc, SendOps::default_for(QpType::Rc));
    assert_eq!(rc, cap(10922, 32768, 52, 32, 828));
    let ud = max_qp_cap(&CX5, QpType::Ud, SendOps::default_for(QpType::Ud));
    assert_eq!(ud, cap(32768 * 64 / 64, 32768, 60, 32, 956));
    let send_only = max_qp_cap(&CX5, QpType::Rc, SendOps::SEND);
    assert_eq!(send_only.max_inline_data, 1004);
    // Every answer is creatable, and one more is not.
    for (t, ops, m) in [
        (QpType::Rc, SendOps::default_for(QpType::Rc), rc),
        (QpType::Ud, SendOps::default_for(QpType::Ud), ud),
    ] {
        let base = cap(1, 1, 0, 0, 0);
        for (f, v) in [
            (CapField::MaxSendWr, m.max_send_wr),
            (CapField::MaxRecvWr, m.max_recv_wr),
            (CapField::MaxSendSge, m.max_send_sge),
            (CapField::MaxRecvSge, m.max_recv_sge),
            (CapField::MaxInlineData, m.max_inline_data),
        ] {
            let mut at = base;
            let mut over = base;
            match f {
                CapField::MaxSendWr => (at.max_send_wr, over.max_send_wr) = (v, v + 1),
                CapField::MaxRecvWr => (at.max_recv_wr, over.max_recv_wr) = (v, v + 1),
                CapField::MaxSendSge => (at.max_send_sge, over.max_send_sge) = (v, v + 1),
                CapField::MaxRecvSge => (at.max_recv_sge, over.max_recv_sge) = (v, v + 1),
                CapField::MaxInlineData => (at.max_inline_data, over.max_inline_data) = (v, v + 1),
            }
            assert!(
                size_qp(&CX5, t, ops, false, &at, SizeMode::Exact).is_ok(),
                "{t:?} {f:?} {v}"
            );
            let e = size_qp(&CX5, t, ops, false, &over, SizeMode::Exact).unwrap_err();
            assert_eq!(e.field(), Some(f), "{t:?} {f:?} {}", v + 1);
        }
    }
}

#[test]
fn srq_sizing_of_the_reference() {
    use mlx5::srq::{size_srq, SrqAttr};
    let a = |max_wr, max_sge| SrqAttr {
        max_wr,
        max_sge,
        srq_limit: 0,
    };
    let s = size_srq(15, 512, &a(100, 1)).unwrap();
    assert_eq!(
        (s.attr.max_wr, s.attr.max_sge, s.wqe_cnt, s.stride),
        (127, 1, 256, 32)
    );
    let s = size_srq(15, 512, &a(16384, 2)).unwrap();
    assert_eq!(
        (s.attr.max_wr, s.attr.max_sge, s.wqe_cnt, s.stride),
        (32767, 3, 32768, 64),
        "no wait queue"
    );
    let e = size_srq(15, 512, &a(32768, 1)).unwrap_err();
    assert!(
        matches!(
            e,
            mlx5::Error::InvalidArgument {
                field: "max_wr",
                max: 32767,
                ..
            }
        ),
        "{e}"
    );
    let s = size_srq(15, 512, &a(1, 31)).unwrap();
    assert_eq!((s.attr.max_sge, s.stride), (31, 512));
    let e = size_srq(15, 512, &a(1, 32)).unwrap_err();
    assert!(
        matches!(
            e,
            mlx5::Error::InvalidArgument {
                field: "max_sge",
                max: 31,
                ..
            }
        ),
        "{e}"
    );
}
