//! The differential checks the bench makes before timing anything, and its paired comparison.

use super::*;

/// Bytes of a WQE compared: its DS units, but for an inline SEND only up to the end of its
/// data (the inline segment's padding to 16 bytes is ours zeros, theirs whatever the ring held).
pub(super) fn compared(ds: usize, inline: Option<usize>) -> usize {
    match inline {
        Some(len) => (ds * 16).min(16 + 4 + len),
        None => ds * 16,
    }
}

/// The WQE at WQEBB `idx` on both sides, within its DS, must match; returns its DS.
pub(super) fn check_wqe(s: &Sides<'_>, what: &str, idx: u64, inline: Option<usize>) -> usize {
    let off = s.qp.layout().rq_bytes() + idx * 64;
    let ctrl = s.ours_ring(off, 16);
    let ds = usize::from(ctrl[7] & 0x3f);
    let n = compared(ds, inline);
    let ours = s.ours_ring(off, n);
    let theirs = s.theirs_bytes(Region::QpBuf, off, n);
    assert_eq!(
        hex(&ours),
        hex(&theirs),
        "{what}: WQE at WQEBB {idx} (DS {ds}) differs (ours, theirs)"
    );
    ds
}

pub(super) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Posts once on each side from empty rings, twice, and compares everything each wrote.
pub(super) fn check_send(s: &mut Sides<'_>, op: Op, wrs: &[SendWr<'_>], bf: bool) {
    let (what, slot, nbb, per) = op;
    let inline = match wrs[0].payload {
        Payload::Inline(d) => Some(d.len()),
        Payload::Sges(_) => None,
    };
    reset_both(s);
    NULL_MODE.store(true, Ordering::Relaxed);
    for round in 0..2u64 {
        s.qp.post_send(wrs).unwrap();
        s.theirs.post_send(slot, 1).unwrap();
        let mut last_ds = 0;
        for k in 0..per {
            last_ds = check_wqe(s, what, (round * per + k) * nbb, inline);
        }
        assert_eq!(
            s.ours_dbr(),
            s.theirs_bytes(Region::QpDbr, 0, 8),
            "{what}: doorbell record (ours, theirs)"
        );
        // The doorbell (or the BlueFlame copy) in the half of this round.
        let at = BF + (round % 2) * BF_HALF;
        let len = if bf { compared(last_ds, inline) } else { 8 };
        let ours = s.plat.uar_bytes(at, len);
        let theirs = s.theirs_bytes(Region::Uar, at, len);
        assert_eq!(hex(&ours), hex(&theirs), "{what}: UAR bytes at {at:#x}");
        let ctrl_at = s.qp.layout().rq_bytes() + (round * per + per - 1) * nbb * 64;
        assert_eq!(
            ours[..8],
            s.ours_ring(ctrl_at, 8)[..],
            "{what}: the doorbell carries the last WQE's first 8 bytes"
        );
        if bf {
            assert!(
                last_ds > 4,
                "{what}: the BlueFlame case needs more than one WQEBB"
            );
        }
    }
    NULL_MODE.store(false, Ordering::Relaxed);
    eprintln!("vs_rdma_core: {what}: same WQEs, doorbell record and UAR bytes");
}

pub(super) fn check_recv(s: &mut Sides<'_>, wr: &RecvWr<'_>) {
    reset_both(s);
    NULL_MODE.store(true, Ordering::Relaxed);
    let stride = s.qp.layout().rq_stride_bytes as usize;
    for i in 0..2u64 {
        s.qp.post_recv(std::slice::from_ref(wr)).unwrap();
        s.theirs.post_recv(1).unwrap();
        let off = i * stride as u64;
        assert_eq!(
            hex(&s.ours_ring(off, stride)),
            hex(&s.theirs_bytes(Region::QpBuf, off, stride)),
            "post_recv: RQ WQE {i}"
        );
        assert_eq!(
            s.ours_dbr(),
            s.theirs_bytes(Region::QpDbr, 0, 8),
            "post_recv: doorbell record"
        );
    }
    NULL_MODE.store(false, Ordering::Relaxed);
    eprintln!("vs_rdma_core: post_recv: same RQ WQEs and doorbell record");
}

/// Polls `POLLED` completions of SENDs on both sides and compares them and the CQ doorbell
/// records.
pub(super) fn check_poll(s: &mut Sides<'_>, batch: &[SendWr<'_>], wc: &mut [mlx5::Wc]) {
    reset_both(s);
    s.wqe_ours = 0;
    s.wqe_theirs = 0;
    NULL_MODE.store(true, Ordering::Relaxed);
    s.qp.post_send(batch).unwrap();
    s.theirs.post_send(LIST_POLL, 1).unwrap();
    s.complete_ours(POLLED);
    s.complete_theirs(POLLED);
    let mut got = 0;
    while got < POLLED as usize {
        let end = (got + 32).min(POLLED as usize);
        got += s.cq.poll(&mut wc[got..end]).unwrap();
    }
    assert_eq!(
        s.theirs.poll(POLLED, 32),
        Some(POLLED as usize),
        "theirs polled"
    );
    for (i, w) in wc.iter().enumerate().take(POLLED as usize) {
        let t = s.theirs.wc(i as u32);
        // Success is 0 in `ibv_wc_status`; the opcodes take `ibv_wc_opcode`'s values.
        let status = u32::from(w.status != mlx5::WcStatus::Success);
        let ours = (w.wr_id, status, w.opcode as u32, w.qp_num);
        assert_eq!(
            ours,
            (t.wr_id, t.status, t.opcode, t.qp_num),
            "poll: completion {i} (ours, theirs)"
        );
    }
    let dbr = s.cq.query().unwrap().dbr_addr;
    let mut ours = [0u8; 4];
    s.plat.sim.device().dma_read(dbr, &mut ours).unwrap();
    assert_eq!(
        ours[..],
        s.theirs_bytes(Region::CqDbr, 0, 4)[..],
        "poll: CQ doorbell record (consumer index)"
    );
    NULL_MODE.store(false, Ordering::Relaxed);
    eprintln!("vs_rdma_core: poll_cq: same {POLLED} completions and consumer index");
}

/// A paired comparison besides criterion's (`MLX5_VS_PAIRED=<rounds>`): per operation,
/// `rounds` times a window of ours then a window of theirs, each after the same reset, and the
/// median of the per-round ratios — both sides of a round see the same machine.
pub(super) fn paired(
    s: &mut Sides<'_>,
    rounds: usize,
    layout: &mlx5::qp::QpLayout,
    cfg: &Config,
    [one, inline]: [&SendWr<'_>; 2],
    batch: &[SendWr<'_>],
    recv: &RecvWr<'_>,
) {
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ops: [(&str, &[SendWr<'_>], Op); 3] = [
        ("send1", std::slice::from_ref(one), SEND1),
        ("send32", batch, SEND32),
        ("inline64_bf", std::slice::from_ref(inline), INLINE_BF),
    ];
    // `MLX5_VS_ONLY=<name>`: only that operation (for a profiler).
    let only = std::env::var("MLX5_VS_ONLY").ok();
    let wanted = |name: &str| only.as_deref().is_none_or(|o| o == name);
    for (name, wrs, (_, slot, nbb, per)) in ops {
        if !wanted(name) {
            continue;
        }
        let window =
            (u64::from(layout.sq_wqebb_cnt) / nbb).min(u64::from(cfg.sq_max_post) - 1) / per;
        let (mut o, mut t, mut r) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            reset_both(s);
            NULL_MODE.store(true, Ordering::Relaxed);
            let at = Instant::now();
            ours_sends(&mut s.qp, wrs, window);
            let ours = at.elapsed().as_nanos() as f64 / (window * per) as f64;
            NULL_MODE.store(false, Ordering::Relaxed);
            reset_both(s);
            let at = Instant::now();
            s.theirs.post_send(slot, window).unwrap();
            let theirs = at.elapsed().as_nanos() as f64 / (window * per) as f64;
            o.push(ours);
            t.push(theirs);
            r.push(ours / theirs);
        }
        println!(
            "paired {name:<12} ours {:7.2} ns/WR theirs {:7.2} ns/WR ratio {:.2}",
            med(o),
            med(t),
            med(r)
        );
    }
    if !wanted("recv1") {
        return;
    }
    let window = u64::from(layout.rq_wqe_cnt) - 1;
    let (mut o, mut t, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        reset_both(s);
        let at = Instant::now();
        ours_recvs(&mut s.qp, std::slice::from_ref(recv), window);
        let ours = at.elapsed().as_nanos() as f64 / window as f64;
        reset_both(s);
        let at = Instant::now();
        s.theirs.post_recv(window).unwrap();
        let theirs = at.elapsed().as_nanos() as f64 / window as f64;
        o.push(ours);
        t.push(theirs);
        r.push(ours / theirs);
    }
    println!(
        "paired {:<12} ours {:7.2} ns/WR theirs {:7.2} ns/WR ratio {:.2}",
        "recv1",
        med(o),
        med(t),
        med(r)
    );
}
