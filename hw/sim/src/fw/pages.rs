//! Firmware pages: QUERY_PAGES and MANAGE_PAGES.
//!
//! The device asks for `boot_pages` before it can start and `init_pages` more before INIT_HCA
//! (profile values). A given page must be a nonzero, 4 KiB-aligned IOVA whose whole 4 KiB lies
//! in one live DMA mapping, and not already held. While initialized the device keeps its boot +
//! init pages and returns only the ones above that; otherwise it returns every page it holds.

use std::collections::BTreeSet;

use mlx5_ifc::consts::{manage_pages, query_pages, ADAPTER_PAGE_SIZE};
use mlx5_ifc::prm::cmdif::CmdPas;
use mlx5_ifc::prm::hca::{ManagePagesIn, ManagePagesOut, QueryPagesIn, QueryPagesOut};
use mlx5_ifc::{Be64, CmdStatus, Layout};

use super::{bad_param, encoded, fail, input, output, CmdResult, Env, Firmware, HcaState, Req};
use crate::fault::{DmaFault, DmaFaultKind};
use crate::syndrome as syn;

/// The pages the device holds.
#[derive(Debug, Default)]
pub(crate) struct Pages {
    held: BTreeSet<u64>,
}

impl Pages {
    /// How many pages the device holds.
    pub(crate) fn held(&self) -> usize {
        self.held.len()
    }

    /// The held pages inside `[start, start + len)`.
    pub(crate) fn held_in(&self, start: u64, len: usize) -> Vec<u64> {
        let first = start.saturating_sub(ADAPTER_PAGE_SIZE as u64 - 1);
        let end = start.saturating_add(len as u64);
        self.held.range(first..end).copied().collect()
    }
}

fn check_function(function_id: u64, ecpf: u64) -> CmdResult {
    if function_id != 0 || ecpf != 0 {
        return Err(bad_param(syn::BAD_FUNCTION_ID));
    }
    Ok(())
}

pub(crate) fn query_pages(
    fw: &mut Firmware,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<QueryPagesIn>(req)?;
    check_function(
        i.get(QueryPagesIn::FUNCTION_ID),
        i.get(QueryPagesIn::EMBEDDED_CPU_FUNCTION),
    )?;
    let held = fw.pages.held() as u64;
    let boot = u64::from(env.profile.boot_pages());
    let num = match req.op_mod {
        query_pages::BOOT => boot.saturating_sub(held),
        query_pages::INIT => (boot + u64::from(env.profile.init_pages())).saturating_sub(held),
        query_pages::REGULAR => 0,
        _ => return Err(bad_param(syn::BAD_OP_MOD)),
    };
    let num = num.min(i32::MAX as u64);
    encoded(output::<QueryPagesOut>(out)?.set(QueryPagesOut::NUM_PAGES, num))?;
    Ok(())
}

pub(crate) fn manage_pages(
    fw: &mut Firmware,
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
        manage_pages::ALLOC_FAIL => Ok(()),
        manage_pages::GIVE => give(fw, env, i.bytes(ManagePagesIn::PAS), n, req.input.len()),
        manage_pages::TAKE => take(fw, env, n, req.outlen, out),
        _ => Err(bad_param(syn::BAD_OP_MOD)),
    }
}

fn give(fw: &mut Firmware, env: &mut Env<'_>, pas: &[u8], n: u64, inlen: usize) -> CmdResult {
    let needed = (n as usize)
        .checked_mul(CmdPas::BYTES)
        .and_then(|b| b.checked_add(ManagePagesIn::BYTES));
    if needed.is_none_or(|needed| inlen < needed) {
        return Err(fail(CmdStatus::BadInputLen, syn::INLEN_PAS));
    }
    let mut new = BTreeSet::new();
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
        if fw.pages.held.contains(&addr) || !new.insert(addr) {
            return Err(bad_param(syn::PAS_DUPLICATE));
        }
    }
    fw.pages.held.append(&mut new);
    Ok(())
}

fn take(
    fw: &mut Firmware,
    env: &mut Env<'_>,
    wanted: u64,
    outlen: usize,
    out: &mut [u8],
) -> CmdResult {
    let held = fw.pages.held();
    let kept = if fw.state == HcaState::Initialized {
        env.profile.boot_pages() as usize + env.profile.init_pages() as usize
    } else {
        0
    };
    let fits = outlen.saturating_sub(ManagePagesOut::BYTES) / CmdPas::BYTES;
    let n = (wanted.min(usize::MAX as u64) as usize)
        .min(held.saturating_sub(kept))
        .min(fits);
    let mut o = output::<ManagePagesOut>(out)?;
    encoded(o.set(ManagePagesOut::OUTPUT_NUM_ENTRIES, n as u64))?;
    let pas = o.bytes_mut(ManagePagesOut::PAS);
    for slot in pas.chunks_exact_mut(CmdPas::BYTES).take(n) {
        let Some(addr) = fw.pages.held.pop_last() else {
            break;
        };
        slot.copy_from_slice(&Be64::new(addr).to_bytes());
    }
    Ok(())
}
