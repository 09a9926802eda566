//! The Ethernet transport objects: transport domains, TIS (send), TIR (receive) and RQ tables
//! (RQT) — ALLOC/DEALLOC_TRANSPORT_DOMAIN, CREATE/MODIFY/DESTROY_TIS, CREATE/MODIFY/DESTROY_TIR,
//! CREATE/MODIFY/DESTROY_RQT.
//!
//! Checks, each with its own syndrome:
//!
//! * transport domains: fewer than `2^log_max_transport_domain` live (EXCEED_LIM
//!   NET_EXHAUSTED); DEALLOC of one a TIS or TIR uses: RES_BUSY TD_IN_USE.
//! * CREATE_TIS: `transport_domain` live (BAD_RES UNKNOWN_TD); `pd` 0 or a live PD; no TLS, no
//!   underlay QPN, LAG affinity 0 (BAD_PARAM TIS_FIELD). The TIS holds its domain.
//! * CREATE_RQT: `rqt_max_size` 1..=`2^log_max_rqt_size`, `rqt_actual_size` 1..=max, `list_q_type`
//!   0 (RQs) (BAD_PARAM RQT_SIZE); every listed RQ live (BAD_RES UNKNOWN_RQ). The RQT holds its RQs.
//!   MODIFY_RQT with `bitmask` bit 0 replaces the list, checked the same way.
//! * CREATE_TIR: `transport_domain` 0 (none) or live; `disp_type` 0 (direct: `inline_rqn` a live RQ) or 1
//!   (indirect: `indirect_table` a live RQT, `rx_hash_fn` 0 none, 1 XOR8 or 2 Toeplitz); no LRO
//!   and no TLS (BAD_PARAM TIR_DISP). The TIR holds its domain and its RQ or RQT. Its output
//!   carries the TIR's ICM address (`icm_address_*`: where software steering's STEs jump to
//!   deliver to it; `model/icm_map.rs`). MODIFY_TIR
//!   takes `bitmask` bits 2 (hash) and 4 (`self_lb_en`); 0 (packet merge, LRO) is refused.
//!
//! Every object keeps its context image; a destroy of one another object uses is RES_BUSY.

use mlx5_ifc::consts::{rx_hash_fn, tir_disp_type};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::tir::{
    AllocTransportDomainOut, CreateRqtIn, CreateRqtOut, CreateTirIn, CreateTirOut, CreateTisIn,
    CreateTisOut, DeallocTransportDomainIn, DestroyRqtIn, DestroyTirIn, DestroyTisIn, ModifyRqtIn,
    ModifyTirIn, ModifyTisIn, RqNum, Rqtc, Tirc, Tisc,
};
use mlx5_ifc::{CmdStatus, Layout, View, ViewMut};

use super::cmd::{bad_param, encoded, fail, input, output, view, CmdResult, Env, Failure, Req};
use super::queue;
use crate::model::objects::ObjectKind;
use crate::model::Model;
use crate::syndrome as syn;

/// Inserts a context object of `kind` holding `holds`, under the `log_max` capability limit.
fn insert(
    model: &mut Model,
    kind: ObjectKind,
    log_max: u64,
    ctx: Vec<u8>,
    holds: Vec<(ObjectKind, u32)>,
) -> Result<u32, Failure> {
    let mut q = queue::new_queue(ctx, Vec::new(), None);
    q.holds = holds;
    queue::insert_limited(model, kind, log_max, q, syn::NET_EXHAUSTED)
}

pub(crate) fn alloc_transport_domain(
    model: &mut Model,
    _: &mut Env<'_>,
    _: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let log_max = model.cur(CmdHcaCap::LOG_MAX_TRANSPORT_DOMAIN);
    let td = insert(
        model,
        ObjectKind::TransportDomain,
        log_max,
        Vec::new(),
        Vec::new(),
    )?;
    let mut o = output::<AllocTransportDomainOut>(out)?;
    encoded(o.set(AllocTransportDomainOut::TRANSPORT_DOMAIN, td.into()))?;
    Ok(())
}

pub(crate) fn dealloc_transport_domain(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let td =
        input::<DeallocTransportDomainIn>(req)?.get32(DeallocTransportDomainIn::TRANSPORT_DOMAIN);
    queue::destroy(
        model,
        ObjectKind::TransportDomain,
        td,
        syn::UNKNOWN_TD,
        syn::TD_IN_USE,
    )
}

/// Checks a TIS context; returns what it holds.
fn tis_holds(model: &Model, c: &View<'_, Tisc>) -> Result<Vec<(ObjectKind, u32)>, Failure> {
    let td = c.get32(Tisc::TRANSPORT_DOMAIN);
    queue::require(model, ObjectKind::TransportDomain, td, syn::UNKNOWN_TD)?;
    if c.get(Tisc::TLS_EN) != 0
        || c.get(Tisc::UNDERLAY_QPN) != 0
        || c.get(Tisc::LAG_TX_PORT_AFFINITY) != 0
        || c.get(Tisc::STRICT_LAG_TX_PORT_AFFINITY) != 0
    {
        return Err(bad_param(syn::TIS_FIELD));
    }
    let mut holds = vec![(ObjectKind::TransportDomain, td)];
    let pd = c.get32(Tisc::PD);
    if pd != 0 {
        queue::require(model, ObjectKind::Pd, pd, syn::UNKNOWN_PD)?;
        holds.push((ObjectKind::Pd, pd));
    }
    Ok(holds)
}

pub(crate) fn create_tis(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateTisIn>(req)?;
    let c = i.nested(CreateTisIn::CTX);
    let holds = tis_holds(model, &c)?;
    let log_max = model.cur(CmdHcaCap::LOG_MAX_TIS);
    let tisn = insert(model, ObjectKind::Tis, log_max, queue::image(&c)?, holds)?;
    encoded(output::<CreateTisOut>(out)?.set(CreateTisOut::TISN, tisn.into()))?;
    Ok(())
}

pub(crate) fn modify_tis(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModifyTisIn>(req)?;
    let tisn = i.get32(ModifyTisIn::TISN);
    queue::changeable(model, ObjectKind::Tis, tisn, syn::UNKNOWN_TIS)?;
    let c = i.nested(ModifyTisIn::CTX);
    // Bit 0: prio; LAG affinity (bits 1, 2) is refused.
    if queue::be_uint(i.bytes(ModifyTisIn::BITMASK)) & !0x1 != 0 {
        return Err(bad_param(syn::TIS_FIELD));
    }
    let holds = tis_holds(model, &c)?;
    if let Some(q) = model.objects.queue_mut(ObjectKind::Tis, tisn) {
        q.ctx = queue::image(&c)?;
    }
    queue::rehold(model, ObjectKind::Tis, tisn, holds);
    Ok(())
}

pub(crate) fn destroy_tis(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let tisn = input::<DestroyTisIn>(req)?.get32(DestroyTisIn::TISN);
    queue::destroy(
        model,
        ObjectKind::Tis,
        tisn,
        syn::UNKNOWN_TIS,
        syn::TIS_IN_USE,
    )
}

/// Checks an RQT context and its RQ list (`list`: the bytes from the first entry on); returns
/// the RQs it holds.
fn rqt_holds(
    model: &Model,
    c: &View<'_, Rqtc>,
    list: &[u8],
) -> Result<Vec<(ObjectKind, u32)>, Failure> {
    let max = c.get(Rqtc::RQT_MAX_SIZE);
    let actual = c.get(Rqtc::RQT_ACTUAL_SIZE);
    let cap = 1u64 << model.cur(CmdHcaCap::LOG_MAX_RQT_SIZE).min(24);
    if !(1..=cap).contains(&max) || !(1..=max).contains(&actual) || c.get(Rqtc::LIST_Q_TYPE) != 0 {
        return Err(bad_param(syn::RQT_SIZE));
    }
    let need = actual as usize * RqNum::BYTES;
    let list = list
        .get(..need)
        .ok_or(fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_LAYOUT))?;
    let mut holds = Vec::new();
    for e in list.chunks_exact(RqNum::BYTES) {
        let rqn = view::<RqNum>(e)?.get32(RqNum::RQ_NUM);
        queue::require(model, ObjectKind::Rq, rqn, syn::UNKNOWN_RQ)?;
        holds.push((ObjectKind::Rq, rqn));
    }
    Ok(holds)
}

/// The RQT context with its list: the input from the context to the end of the list.
fn rqt_image(ctx: &[u8], actual: u64) -> Vec<u8> {
    let n = (Rqtc::BYTES + actual as usize * RqNum::BYTES).min(ctx.len());
    ctx[..n].to_vec()
}

pub(crate) fn create_rqt(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateRqtIn>(req)?;
    let c = i.nested(CreateRqtIn::RQT_CONTEXT);
    let ctx = &req.input[CreateRqtIn::RQT_CONTEXT.info.bit as usize / 8..];
    let holds = rqt_holds(model, &c, &ctx[Rqtc::BYTES..])?;
    let image = rqt_image(ctx, c.get(Rqtc::RQT_ACTUAL_SIZE));
    let log_max = model.cur(CmdHcaCap::LOG_MAX_RQT);
    let rqtn = insert(model, ObjectKind::Rqt, log_max, image, holds)?;
    encoded(output::<CreateRqtOut>(out)?.set(CreateRqtOut::RQTN, rqtn.into()))?;
    Ok(())
}

pub(crate) fn modify_rqt(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModifyRqtIn>(req)?;
    let rqtn = i.get32(ModifyRqtIn::RQTN);
    queue::changeable(model, ObjectKind::Rqt, rqtn, syn::UNKNOWN_RQT)?;
    let old = queue::find(model, ObjectKind::Rqt, rqtn, syn::UNKNOWN_RQT)?;
    let max = View::<Rqtc>::new(&old.ctx).map_or(0, |v| v.get(Rqtc::RQT_MAX_SIZE));
    // Bit 0: the RQ list (with `rqt_actual_size`); nothing else is modifiable.
    if queue::be_uint(i.bytes(ModifyRqtIn::BITMASK)) != 1 {
        return Err(bad_param(syn::RQT_SIZE));
    }
    let ctx = &req.input[ModifyRqtIn::CTX.info.bit as usize / 8..];
    let mut image = ctx[..Rqtc::BYTES.min(ctx.len())].to_vec();
    // The maximum stays what the RQT was created with.
    encoded(
        ViewMut::<Rqtc>::new(&mut image).and_then(|mut v| v.set(Rqtc::RQT_MAX_SIZE, max).map(drop)),
    )?;
    let c = view::<Rqtc>(&image)?;
    let holds = rqt_holds(model, &c, &ctx[Rqtc::BYTES..])?;
    let actual = c.get(Rqtc::RQT_ACTUAL_SIZE) as usize;
    image.extend_from_slice(&ctx[Rqtc::BYTES..Rqtc::BYTES + actual * RqNum::BYTES]);
    if let Some(q) = model.objects.queue_mut(ObjectKind::Rqt, rqtn) {
        q.ctx = image;
    }
    queue::rehold(model, ObjectKind::Rqt, rqtn, holds);
    Ok(())
}

pub(crate) fn destroy_rqt(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let rqtn = input::<DestroyRqtIn>(req)?.get32(DestroyRqtIn::RQTN);
    queue::destroy(
        model,
        ObjectKind::Rqt,
        rqtn,
        syn::UNKNOWN_RQT,
        syn::RQT_IN_USE,
    )
}

/// Checks a TIR context; returns what it holds.
fn tir_holds(model: &Model, c: &View<'_, Tirc>) -> Result<Vec<(ObjectKind, u32)>, Failure> {
    // Transport domain 0 is none (domains are numbered from 1): rdma-core's DR tests make a
    // DevX TIR without one (test_mlx5_dr.py, `Mlx5DrTirResources`), and pass on real cards. A
    // TIR of no domain blocks no self-loopback.
    let td = c.get32(Tirc::TRANSPORT_DOMAIN);
    if td != 0 {
        queue::require(model, ObjectKind::TransportDomain, td, syn::UNKNOWN_TD)?;
    }
    if c.get(Tirc::PACKET_MERGE_MASK) != 0 || c.get(Tirc::TLS_EN) != 0 {
        return Err(bad_param(syn::TIR_DISP));
    }
    let mut holds: Vec<(ObjectKind, u32)> = (td != 0)
        .then_some((ObjectKind::TransportDomain, td))
        .into_iter()
        .collect();
    match c.get(Tirc::DISP_TYPE) {
        tir_disp_type::DIRECT => {
            let rqn = c.get32(Tirc::INLINE_RQN);
            queue::require(model, ObjectKind::Rq, rqn, syn::UNKNOWN_RQ)?;
            holds.push((ObjectKind::Rq, rqn));
        }
        tir_disp_type::INDIRECT => {
            let rqtn = c.get32(Tirc::INDIRECT_TABLE);
            queue::require(model, ObjectKind::Rqt, rqtn, syn::UNKNOWN_RQT)?;
            if c.get(Tirc::RX_HASH_FN) > rx_hash_fn::TOEPLITZ {
                return Err(bad_param(syn::TIR_DISP));
            }
            holds.push((ObjectKind::Rqt, rqtn));
        }
        _ => return Err(bad_param(syn::TIR_DISP)),
    }
    Ok(holds)
}

pub(crate) fn create_tir(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateTirIn>(req)?;
    let c = i.nested(CreateTirIn::CTX);
    let holds = tir_holds(model, &c)?;
    let log_max = model.cur(CmdHcaCap::LOG_MAX_TIR);
    let tirn = insert(model, ObjectKind::Tir, log_max, queue::image(&c)?, holds)?;
    let mut o = output::<CreateTirOut>(out)?;
    encoded(o.set(CreateTirOut::TIRN, tirn.into()))?;
    // Where software steering jumps to deliver to it (a raw packet QP's `tir_icm_addr`).
    let icm = crate::model::icm_map::tir_icm_address(tirn);
    encoded(o.set(CreateTirOut::ICM_ADDRESS_63_40, icm >> 40))?;
    encoded(o.set(CreateTirOut::ICM_ADDRESS_39_32, (icm >> 32) & 0xff))?;
    encoded(o.set(CreateTirOut::ICM_ADDRESS_31_0, icm & 0xffff_ffff))?;
    Ok(())
}

pub(crate) fn modify_tir(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModifyTirIn>(req)?;
    let tirn = i.get32(ModifyTirIn::TIRN);
    queue::changeable(model, ObjectKind::Tir, tirn, syn::UNKNOWN_TIR)?;
    let old = queue::find(model, ObjectKind::Tir, tirn, syn::UNKNOWN_TIR)?
        .ctx
        .clone();
    let bitmask = queue::be_uint(i.bytes(ModifyTirIn::BITMASK));
    // Bits (`modify_tir_bitmask`): 0 packet merge (LRO, refused), 2 hash, 4 self_lb_en.
    if bitmask & !0x14 != 0 {
        return Err(bad_param(syn::TIR_DISP));
    }
    let new = i.nested(ModifyTirIn::CTX);
    let mut image = old;
    {
        let mut v = encoded(ViewMut::<Tirc>::new(&mut image))?;
        if bitmask & 0x4 != 0 {
            encoded(v.set(Tirc::RX_HASH_FN, new.get(Tirc::RX_HASH_FN)))?;
            encoded(v.set(Tirc::RX_HASH_SYMMETRIC, new.get(Tirc::RX_HASH_SYMMETRIC)))?;
            encoded(v.set_bytes(
                Tirc::RX_HASH_TOEPLITZ_KEY,
                new.bytes(Tirc::RX_HASH_TOEPLITZ_KEY),
            ))?;
            for f in [
                Tirc::RX_HASH_FIELD_SELECTOR_OUTER,
                Tirc::RX_HASH_FIELD_SELECTOR_INNER,
            ] {
                v.nested_mut(f)
                    .as_bytes()
                    .copy_from_slice(new.nested(f).as_bytes());
            }
        }
        if bitmask & 0x10 != 0 {
            encoded(v.set(Tirc::SELF_LB_BLOCK, new.get(Tirc::SELF_LB_BLOCK)))?;
        }
    }
    let holds = tir_holds(model, &view::<Tirc>(&image)?)?;
    if let Some(q) = model.objects.queue_mut(ObjectKind::Tir, tirn) {
        q.ctx = image;
    }
    queue::rehold(model, ObjectKind::Tir, tirn, holds);
    Ok(())
}

pub(crate) fn destroy_tir(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let tirn = input::<DestroyTirIn>(req)?.get32(DestroyTirIn::TIRN);
    queue::destroy(
        model,
        ObjectKind::Tir,
        tirn,
        syn::UNKNOWN_TIR,
        syn::TIR_IN_USE,
    )
}
