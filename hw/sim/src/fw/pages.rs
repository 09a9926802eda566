//! Firmware pages: QUERY_PAGES and MANAGE_PAGES.
//!
//! The device asks for `boot_pages` before it can start and `init_pages` more before INIT_HCA
//! (profile values), and for more at run time with PAGE_REQUEST events ([`super::page_req`]).
//! A give is refused (BAD_PARAM PAGES_NOT_REQUESTED) when it brings more pages than asked for —
//! the boot + init demand not met before INIT_HCA, the pages PAGE_REQUEST asked for after it,
//! none after TEARDOWN_HCA. A given page must be a nonzero, 4 KiB-aligned IOVA whose whole
//! 4 KiB lies in one live DMA mapping, and not already held. While initialized the device keeps
//! the pages it uses (boot + init, and the ICM of its objects) and those a held command waits
//! for, and returns only the others; otherwise it returns every page it holds. QUERY_PAGES
//! regular (op_mod 3) reports the run-time request outstanding: pages asked for and not given
//! (positive), else pages offered back and not taken (negative).

use mlx5_ifc::consts::{manage_pages, query_pages, ADAPTER_PAGE_SIZE};
use mlx5_ifc::prm::cmdif::CmdPas;
use mlx5_ifc::prm::hca::{ManagePagesIn, ManagePagesOut, QueryPagesIn, QueryPagesOut};
use mlx5_ifc::{Be64, CmdStatus, Layout};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Req};
use super::page_req;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::model::Model;
use crate::syndrome as syn;

fn check_function(function_id: u64, ecpf: u64) -> CmdResult {
    if function_id != 0 || ecpf != 0 {
        return Err(bad_param(syn::BAD_FUNCTION_ID));
    }
    Ok(())
}

pub(crate) fn query_pages(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<QueryPagesIn>(req)?;
    check_function(
        i.get(QueryPagesIn::FUNCTION_ID),
        i.get(QueryPagesIn::EMBEDDED_CPU_FUNCTION),
    )?;
    let held = model.pages.held() as u64;
    let boot = u64::from(env.profile.boot_pages());
    let num = match req.op_mod {
        query_pages::BOOT => boot.saturating_sub(held),
        query_pages::INIT => (boot + u64::from(env.profile.init_pages())).saturating_sub(held),
        query_pages::REGULAR => {
            let req = &model.pages.req;
            if req.asked > 0 {
                req.asked
            } else {
                // Negative: pages offered back (two's complement in the 32-bit field).
                u64::from((req.offered.min(i32::MAX as u64) as i32).wrapping_neg() as u32)
            }
        }
        _ => return Err(bad_param(syn::BAD_OP_MOD)),
    };
    let num = if req.op_mod == query_pages::REGULAR {
        num
    } else {
        num.min(i32::MAX as u64)
    };
    encoded(output::<QueryPagesOut>(out)?.set(QueryPagesOut::NUM_PAGES, num))?;
    Ok(())
}

pub(crate) fn manage_pages(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<ManagePagesIn>(req)?;
    check_function(
        i.get(ManagePagesIn::FUNCTION_ID),
        i.get(ManagePagesIn::EMBEDDED_CPU_FUNCTION),
    )?;
    let n = i.get(ManagePagesIn::INPUT_NUM_ENTRIES);
    match req.op_mod {
        manage_pages::ALLOC_FAIL => {
            page_req::alloc_fail(model);
            Ok(())
        }
        manage_pages::GIVE => give(model, env, i.bytes(ManagePagesIn::PAS), n, req.input.len()),
        manage_pages::TAKE => take(model, env, n, req.outlen, out),
        _ => Err(bad_param(syn::BAD_OP_MOD)),
    }
}

fn give(model: &mut Model, env: &mut Env<'_>, pas: &[u8], n: u64, inlen: usize) -> CmdResult {
    let needed = (n as usize)
        .checked_mul(CmdPas::BYTES)
        .and_then(|b| b.checked_add(ManagePagesIn::BYTES));
    if needed.is_none_or(|needed| inlen < needed) {
        return Err(fail(CmdStatus::BadInputLen, syn::INLEN_PAS));
    }
    if n > page_req::allowance(model, env.profile) {
        return Err(bad_param(syn::PAGES_NOT_REQUESTED));
    }
    let mut new = std::collections::BTreeSet::new();
    for (k, entry) in pas.chunks_exact(CmdPas::BYTES).take(n as usize).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(entry);
        let addr = Be64::from_bytes(b).get();
        if addr == 0 {
            return Err(bad_param(syn::PAS_ZERO));
        }
        if addr % ADAPTER_PAGE_SIZE as u64 != 0 {
            return Err(bad_param(syn::PAS_UNALIGNED));
        }
        if !env.iommu.is_mapped(addr, ADAPTER_PAGE_SIZE) {
            env.dma_faults.push(DmaFault {
                iova: addr,
                len: ADAPTER_PAGE_SIZE,
                kind: DmaFaultKind::PageNotMapped,
                what: format!("MANAGE_PAGES give: PAS entry {k} is not a mapped 4 KiB page"),
            });
            return Err(bad_param(syn::PAS_UNMAPPED));
        }
        if model.pages.held.contains(&addr) || !new.insert(addr) {
            return Err(bad_param(syn::PAS_DUPLICATE));
        }
    }
    let got = new.len() as u64;
    // One insertion each (`append` would rebuild the whole set for every grant).
    model.pages.held.extend(new);
    let req = &mut model.pages.req;
    req.asked = req.asked.saturating_sub(got);
    req.stats.pages_given += got;
    Ok(())
}

fn take(
    model: &mut Model,
    env: &mut Env<'_>,
    wanted: u64,
    outlen: usize,
    out: &mut [u8],
) -> CmdResult {
    let returnable = page_req::returnable(model, env.profile);
    let fits = outlen.saturating_sub(ManagePagesOut::BYTES) / CmdPas::BYTES;
    let n = (wanted.min(returnable).min(usize::MAX as u64) as usize).min(fits);
    let mut o = output::<ManagePagesOut>(out)?;
    encoded(o.set(ManagePagesOut::OUTPUT_NUM_ENTRIES, n as u64))?;
    let pas = o.bytes_mut(ManagePagesOut::PAS);
    for slot in pas.chunks_exact_mut(CmdPas::BYTES).take(n) {
        let Some(addr) = model.pages.held.pop_last() else {
            break;
        };
        slot.copy_from_slice(&Be64::new(addr).to_bytes());
    }
    let req = &mut model.pages.req;
    req.offered = req.offered.saturating_sub(n as u64);
    req.stats.pages_taken += n as u64;
    Ok(())
}
