//! Firmware page accounting: QUERY_PAGES, MANAGE_PAGES give/take, refused pages, and the host
//! freeing memory the device holds.

mod common;

use common::{bare, cmd, status, Poster};
use mlx5_ifc::consts::{manage_pages, query_pages};
use mlx5_ifc::prm::hca::{EnableHcaIn, InitHcaIn, ManagePagesIn, TeardownHcaIn};
use mlx5_ifc::{Be64, CmdStatus, Opcode};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{DmaFaultKind, Mode, Profile};

const BAD_PARAM: u8 = CmdStatus::BadParam.raw();

fn enabled() -> Poster {
    let mut p = Poster::cx5(Mode::Sync);
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    p
}

#[test]
fn demand_follows_what_is_held() {
    let mut p = enabled();
    assert_eq!(
        (
            p.query_pages(query_pages::BOOT),
            p.query_pages(query_pages::INIT)
        ),
        (16, 80)
    );
    p.give(10);
    assert_eq!(
        (
            p.query_pages(query_pages::BOOT),
            p.query_pages(query_pages::INIT)
        ),
        (6, 70)
    );
    p.give(70);
    assert_eq!(
        (
            p.query_pages(query_pages::BOOT),
            p.query_pages(query_pages::INIT)
        ),
        (0, 0)
    );
    assert_eq!(p.query_pages(query_pages::REGULAR), 0);
    assert_eq!(p.dev.pages_held(), 80);
    let more = p.dev.dma_alloc(4096, 4096).unwrap();
    assert_eq!(
        p.give_addrs(&[more.iova]),
        (BAD_PARAM, syn::PAGES_NOT_REQUESTED),
        "a page beyond the boot + init demand"
    );
    p.dev.dma_free(more.iova).unwrap();
    let custom =
        common::quiet(Profile::from_json_str(r#"{"_boot_pages": 3, "_init_pages": 5}"#).unwrap());
    let mut q = Poster::sim(custom, Mode::Sync);
    q.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    assert_eq!(
        (
            q.query_pages(query_pages::BOOT),
            q.query_pages(query_pages::INIT)
        ),
        (3, 8)
    );
}

#[test]
fn bad_pages_are_refused_whole() {
    let mut p = enabled();
    p.give(2);
    let held = p.given[0].iova;
    let fresh = p.dev.dma_alloc(3 * 4096, 4096).unwrap();
    let half = p.dev.dma_alloc(2048, 4096).unwrap();
    let freed = p.dev.dma_alloc(4096, 4096).unwrap();
    p.dev.dma_free(freed.iova).unwrap();
    assert_eq!(p.give_addrs(&[fresh.iova, 0]), (BAD_PARAM, syn::PAS_ZERO));
    assert_eq!(
        p.give_addrs(&[fresh.iova + 8]),
        (BAD_PARAM, syn::PAS_UNALIGNED)
    );
    assert_eq!(
        p.give_addrs(&[fresh.iova, held]),
        (BAD_PARAM, syn::PAS_DUPLICATE)
    );
    assert_eq!(
        p.give_addrs(&[fresh.iova, fresh.iova]),
        (BAD_PARAM, syn::PAS_DUPLICATE)
    );
    assert!(p.dev.dma_faults().is_empty());
    assert_eq!(
        p.give_addrs(&[fresh.iova, freed.iova]),
        (BAD_PARAM, syn::PAS_UNMAPPED)
    );
    assert_eq!(
        p.give_addrs(&[half.iova]),
        (BAD_PARAM, syn::PAS_UNMAPPED),
        "a page must be mapped whole"
    );
    assert_eq!(
        p.give_addrs(&[fresh.iova + 3 * 4096]),
        (BAD_PARAM, syn::PAS_UNMAPPED),
        "guard page"
    );
    let faults = p.dev.dma_faults();
    assert_eq!(faults.len(), 3);
    assert!(faults
        .iter()
        .all(|f| f.kind == DmaFaultKind::PageNotMapped && f.len == 4096));
    assert_eq!(faults[0].iova, freed.iova);
    assert_eq!(p.dev.pages_held(), 2, "no refused command gave anything");
    // Entries not covered by input_length.
    let mut input = cmd::<ManagePagesIn>(Opcode::ManagePages, manage_pages::GIVE, |v| {
        v.set(ManagePagesIn::INPUT_NUM_ENTRIES, 4).unwrap();
    });
    input.extend_from_slice(&Be64::new(fresh.iova).to_bytes());
    assert_eq!(
        status(&p.exec(&input, 0x10)),
        (CmdStatus::BadInputLen.raw(), syn::INLEN_PAS)
    );
    // Pages inside one larger allocation are fine.
    assert_eq!(
        p.give_addrs(&[fresh.iova, fresh.iova + 4096, fresh.iova + 8192]),
        (0, 0)
    );
    assert_eq!(p.dev.pages_held(), 5);
    let back = p.take(10, 10);
    assert_eq!(back.len(), 5, "everything comes back before INIT_HCA");
    assert_eq!(p.dev.pages_held(), 0);
    for b in [fresh.iova, half.iova] {
        p.dev.dma_free(b).unwrap();
    }
    p.given.retain(|g| back.contains(&g.iova));
    assert_eq!(p.given.len(), 2);
}

#[test]
fn take_respects_what_the_device_keeps_and_the_output_room() {
    let mut p = enabled();
    p.give(80);
    p.ok(&bare::<InitHcaIn>(Opcode::InitHca, 0), 0x10);
    assert!(
        p.take(100, 100).is_empty(),
        "boot + init pages stay while initialized"
    );
    let extra = p.dev.dma_alloc(4096, 4096).unwrap();
    assert_eq!(
        p.give_addrs(&[extra.iova]),
        (BAD_PARAM, syn::PAGES_NOT_REQUESTED),
        "nothing was asked for at run time"
    );
    p.dev.dma_free(extra.iova).unwrap();
    p.dev.request_pages(10);
    assert_eq!(
        p.query_pages(query_pages::REGULAR),
        10,
        "asked for, not given"
    );
    p.give(10);
    assert_eq!(p.query_pages(query_pages::REGULAR), 0);
    assert_eq!(p.take(100, 3).len(), 3, "limited by output_length");
    assert_eq!(p.take(2, 100).len(), 2, "limited by input_num_entries");
    assert_eq!(p.take(100, 100).len(), 5, "the rest of the regular pages");
    assert_eq!(p.dev.pages_held(), 80);
    p.ok(&bare::<TeardownHcaIn>(Opcode::TeardownHca, 0), 0x10);
    let all = p.take(768, 768);
    assert_eq!(
        all.len(),
        80,
        "after TEARDOWN_HCA every page comes back, 12 output blocks"
    );
    assert_eq!(p.dev.pages_held(), 0);
    for g in &p.given {
        p.dev.dma_free(g.iova).unwrap();
    }
    p.given.clear();
    assert!(p.dev.dma_faults().is_empty());
}

#[test]
fn freeing_a_page_the_device_holds_is_recorded() {
    let mut p = enabled();
    p.give(3);
    let victim = p.given.remove(1);
    p.dev.dma_free(victim.iova).unwrap();
    let faults = p.dev.dma_faults();
    assert_eq!(faults.len(), 1);
    assert_eq!(
        (faults[0].iova, faults[0].kind),
        (victim.iova, DmaFaultKind::HostFreedDevicePage)
    );
    assert_eq!(faults[0].what, "host freed a page the device holds");
    assert_eq!(
        p.dev.pages_held(),
        3,
        "the device still believes it holds the page"
    );
    // A page given from inside a bigger block is caught too.
    let block = p.dev.dma_alloc(4 * 4096, 4096).unwrap();
    assert_eq!(p.give_addrs(&[block.iova + 2 * 4096]), (0, 0));
    p.dev.dma_free(block.iova).unwrap();
    assert_eq!(p.dev.dma_faults().len(), 2);
    assert_eq!(p.dev.dma_faults()[1].iova, block.iova + 2 * 4096);
}
