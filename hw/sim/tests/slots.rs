//! More than one command slot, and firmware page requests at run time: commands in several
//! slots rung together or apart; a command that needs pages held (its entry owned by the
//! device) until MANAGE_PAGES in another slot brings them; PAGE_REQUEST events asking for pages
//! and offering them back; MANAGE_PAGES op_mod 0; seeded random requests.

mod common;

use common::queues::*;
use common::{bare, cmd, status, NEVER_NS};
use mlx5_ifc::consts::{manage_pages, query_pages};
use mlx5_ifc::prm::cq::{CreateCqOut, DestroyCqIn};
use mlx5_ifc::prm::eq::CreateEqIn;
use mlx5_ifc::prm::hca::{ManagePagesIn, ManagePagesOut, QueryPagesIn, QueryPagesOut};
use mlx5_ifc::prm::uar_pd::{AllocPdIn, AllocPdOut, DeallocPdIn};
use mlx5_ifc::prm::vport::{QueryVportStateIn, QueryVportStateOut};
use mlx5_ifc::{event, Be64, CmdStatus, Layout, Opcode, View};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{Mode, PagePolicy, Profile, RandomPages};

/// `cx5` whose CQs, QPs, SRQs, RMPs and mkeys need `icm` pages each.
fn fx(mode: Mode, policy: PagePolicy) -> Fx {
    Fx::new(Profile::connectx5().with_page_policy(policy), mode, 1)
}

fn icm(pages: u32) -> PagePolicy {
    PagePolicy {
        icm_pages_per_object: pages,
        ..PagePolicy::default()
    }
}

/// An EQ subscribed to PAGE_REQUEST (its ring: the first arena page).
fn page_eq(fx: &mut Fx) -> u32 {
    let mut input = fx.eq_in(4, |_| {});
    // event_bitmask word 0 (big-endian) bit 0x0b: byte 7 - 0x0b / 8, bit 0x0b % 8.
    input[CreateEqIn::EVENT_BITMASK.offset() + 6] |= 1 << (event::PAGE_REQUEST % 8);
    let out = fx.p.ok(&input, 0x10);
    View::<mlx5_ifc::prm::eq::CreateEqOut>::new(&out)
        .unwrap()
        .get32(mlx5_ifc::prm::eq::CreateEqOut::EQ_NUMBER)
}

/// The PAGE_REQUEST events in the EQ ring so far: `(function_id, num_pages)`.
fn page_events(fx: &Fx) -> Vec<(u16, i32)> {
    let mut got = Vec::new();
    for k in 0..16u64 {
        let mut e = [0u8; 64];
        fx.p.dev.dma_read(fx.arena.iova + 64 * k, &mut e).unwrap();
        if e[1] != event::PAGE_REQUEST {
            continue;
        }
        let func = u16::from_be_bytes([e[0x22], e[0x23]]);
        let n = i32::from_be_bytes([e[0x24], e[0x25], e[0x26], e[0x27]]);
        got.push((func, n));
    }
    got
}

/// MANAGE_PAGES give of `n` fresh pages in `slot`: `(status, syndrome)`.
fn give_in(fx: &mut Fx, slot: u32, n: usize) -> (u8, u32) {
    let pages: Vec<_> = (0..n)
        .map(|_| fx.p.dev.dma_alloc(4096, 4096).unwrap())
        .collect();
    let mut input = cmd::<ManagePagesIn>(Opcode::ManagePages, manage_pages::GIVE, |v| {
        v.set(ManagePagesIn::INPUT_NUM_ENTRIES, n as u64).unwrap();
    });
    for p in &pages {
        input.extend_from_slice(&Be64::new(p.iova).to_bytes());
    }
    let got = status(&fx.p.exec_in(slot, &input, ManagePagesOut::BYTES));
    if got == (0, 0) {
        fx.p.given.extend(pages);
    } else {
        for p in pages {
            fx.p.dev.dma_free(p.iova).unwrap();
        }
    }
    got
}

/// QUERY_PAGES regular in `slot`.
fn regular(fx: &mut Fx, slot: u32) -> i32 {
    let out = fx.p.exec_in(
        slot,
        &bare::<QueryPagesIn>(Opcode::QueryPages, query_pages::REGULAR),
        QueryPagesOut::BYTES,
    );
    View::<QueryPagesOut>::new(&out)
        .unwrap()
        .get32(QueryPagesOut::NUM_PAGES) as i32
}

fn destroy_cq(fx: &mut Fx, cqn: u32) {
    let input = cmd::<DestroyCqIn>(Opcode::DestroyCq, 0, |v| {
        v.set(DestroyCqIn::CQN, cqn.into()).unwrap();
    });
    fx.p.ok(&input, 0x10);
}

#[test]
fn slots_rung_together_and_apart_each_execute() {
    let mut fx = Fx::cx5(Mode::Sync);
    let vport = bare::<QueryVportStateIn>(Opcode::QueryVportState, 0);
    let pd = bare::<AllocPdIn>(Opcode::AllocPd, 0);
    let a = fx.p.prepare(0, &pd, AllocPdOut::BYTES);
    let b = fx.p.prepare(1, &vport, QueryVportStateOut::BYTES);
    let c = fx.p.prepare(31, &pd, AllocPdOut::BYTES);
    fx.p.ring(1 | 1 << 1 | 1 << 31);
    for m in [&a, &b, &c] {
        assert_eq!(fx.p.wait(m), Some(0), "slot {}", m.slot);
        assert_eq!(status(&fx.p.output(m)), (0, 0), "slot {}", m.slot);
    }
    let pds: Vec<u32> = [&a, &c]
        .iter()
        .map(|m| {
            View::<AllocPdOut>::new(&fx.p.output(m))
                .unwrap()
                .get32(AllocPdOut::PD)
        })
        .collect();
    assert_ne!(pds[0], pds[1], "two commands, two PDs");
    for m in [a, b, c] {
        fx.p.release(m);
    }
    // Apart: slot 5 rung, then slot 2; a slot not rung stays the driver's.
    let d = fx.p.prepare(5, &vport, QueryVportStateOut::BYTES);
    let e = fx.p.prepare(2, &vport, QueryVportStateOut::BYTES);
    fx.p.ring(1 << 5);
    assert_eq!(fx.p.wait(&d), Some(0));
    assert_eq!(fx.p.wait_for(&e, NEVER_NS), None, "slot 2 not rung yet");
    fx.p.ring(1 << 2);
    assert_eq!(fx.p.wait(&e), Some(0));
    fx.p.release(d);
    fx.p.release(e);
    for pd in pds {
        let input = cmd::<DeallocPdIn>(Opcode::DeallocPd, 0, |v| {
            v.set(DeallocPdIn::PD, pd.into()).unwrap();
        });
        fx.p.ok(&input, 0x10);
    }
    fx.finish_clean();
}

fn held_until_pages_arrive(mode: Mode) {
    let mut fx = fx(mode, icm(3));
    let dev = fx.dev();
    let eqn = page_eq(&mut fx);
    let held0 = dev.pages_held();
    let input = fx.cq_in(eqn, 4, |_| {});
    let m = fx.p.prepare(0, &input, CreateCqOut::BYTES);
    fx.p.ring(1);
    assert_eq!(
        fx.p.wait_for(&m, NEVER_NS),
        None,
        "held: still the device's"
    );
    assert_eq!(page_events(&fx), [(0, 3)], "asks for the 3 pages of ICM");
    let st = dev.page_stats();
    assert_eq!((st.waiting_commands, st.asked, st.commands_held), (1, 3, 1));
    // Ringing the held slot again does nothing; other slots run meanwhile.
    fx.p.ring(1);
    assert_eq!(regular(&mut fx, 1), 3, "QUERY_PAGES regular: asked for");
    assert_eq!(give_in(&mut fx, 1, 4), (3, syn::PAGES_NOT_REQUESTED));
    assert_eq!(give_in(&mut fx, 1, 2), (0, 0));
    assert_eq!(fx.p.wait_for(&m, NEVER_NS), None, "one page short");
    assert_eq!(give_in(&mut fx, 2, 1), (0, 0));
    assert_eq!(fx.p.wait(&m), Some(0), "released by the give");
    let out = fx.p.output(&m);
    assert_eq!(status(&out), (0, 0));
    let cqn = View::<CreateCqOut>::new(&out)
        .unwrap()
        .get32(CreateCqOut::CQN);
    fx.p.release(m);
    let st = dev.page_stats();
    assert_eq!(
        (st.waiting_commands, st.asked, st.held),
        (0, 0, held0 as u64 + 3)
    );
    assert_eq!(page_events(&fx).len(), 1, "one request was enough");
    assert_eq!(fx.p.take(10, 10).len(), 0, "the CQ uses its 3 pages");
    destroy_cq(&mut fx, cqn);
    let back = fx.p.take(10, 10);
    assert_eq!(back.len(), 3, "free again after DESTROY_CQ");
    fx.p.given.retain(|g| {
        let gone = back.contains(&g.iova);
        if gone {
            dev.dma_free(g.iova).unwrap();
        }
        !gone
    });
    fx.destroy_eq(eqn);
    fx.finish_clean();
}

#[test]
fn a_command_that_needs_pages_is_held_until_they_arrive() {
    held_until_pages_arrive(Mode::Sync);
}

#[test]
fn a_held_command_is_released_on_the_device_thread_too() {
    held_until_pages_arrive(Mode::Threaded);
}

#[test]
fn a_destroy_offers_the_spare_pages_back() {
    let mut fx = fx(
        Mode::Sync,
        PagePolicy {
            icm_pages_per_object: 2,
            spare_pages: Some(0),
            random: None,
        },
    );
    let dev = fx.dev();
    let eqn = page_eq(&mut fx);
    let input = fx.cq_in(eqn, 4, |_| {});
    let m = fx.p.prepare(0, &input, CreateCqOut::BYTES);
    fx.p.ring(1);
    assert_eq!(give_in(&mut fx, 1, 2), (0, 0));
    assert_eq!(fx.p.wait(&m), Some(0));
    let cqn = View::<CreateCqOut>::new(&fx.p.output(&m))
        .unwrap()
        .get32(CreateCqOut::CQN);
    fx.p.release(m);
    destroy_cq(&mut fx, cqn);
    assert_eq!(
        page_events(&fx),
        [(0, 2), (0, -2)],
        "asked 2, offers 2 back"
    );
    assert_eq!(dev.page_stats().offered, 2);
    assert_eq!(regular(&mut fx, 0), -2, "QUERY_PAGES regular: offered back");
    assert_eq!(fx.p.take(1, 10).len(), 1);
    assert_eq!(dev.page_stats().offered, 1);
    fx.p.take_all();
    let st = dev.page_stats();
    assert_eq!((st.offered, st.pages_offered, st.pages_taken), (0, 2, 2));
    // An explicit offer with nothing free raises nothing.
    dev.request_pages(-5);
    assert_eq!(dev.page_stats().reclaims, 1);
    fx.destroy_eq(eqn);
    fx.finish_clean();
}

#[test]
fn cannot_give_fails_the_held_command() {
    let mut fx = fx(Mode::Sync, icm(5));
    let dev = fx.dev();
    let eqn = page_eq(&mut fx);
    let input = fx.cq_in(eqn, 4, |_| {});
    let m = fx.p.prepare(0, &input, CreateCqOut::BYTES);
    fx.p.ring(1);
    assert_eq!(dev.page_stats().waiting_commands, 1);
    let fail = bare::<ManagePagesIn>(Opcode::ManagePages, manage_pages::ALLOC_FAIL);
    assert_eq!(
        status(&fx.p.exec_in(1, &fail, ManagePagesOut::BYTES)),
        (0, 0)
    );
    assert_eq!(fx.p.wait(&m), Some(0), "completed, with a status");
    assert_eq!(
        status(&fx.p.output(&m)),
        (CmdStatus::NoResources.raw(), syn::PAGES_ALLOC_FAIL)
    );
    fx.p.release(m);
    let st = dev.page_stats();
    assert_eq!(
        (st.waiting_commands, st.asked, st.alloc_fail_notices),
        (0, 0, 1)
    );
    assert!(dev
        .live_objects()
        .iter()
        .all(|(k, _)| *k != mlx5_sim::ObjectKind::Cq));
    fx.destroy_eq(eqn);
    fx.finish_clean();
}

/// Runs 60 QUERY_VPORT_STATE under random requests of `seed`, giving what is asked for and
/// taking what is offered; returns the accounts.
fn random_run(seed: u64) -> mlx5_sim::PageStats {
    let mut fx = fx(
        Mode::Sync,
        PagePolicy {
            random: Some(RandomPages {
                seed,
                per_mille: 400,
                max_pages: 6,
            }),
            ..PagePolicy::default()
        },
    );
    let dev = fx.dev();
    // Random requests are raised only when an EQ would hear them (this test answers them from
    // QUERY_PAGES instead; the EQ's ring overflows, which drops events, not requests).
    let eqn = page_eq(&mut fx);
    let vport = bare::<QueryVportStateIn>(Opcode::QueryVportState, 0);
    for _ in 0..60 {
        fx.p.ok(&vport, QueryVportStateOut::BYTES);
        let n = regular(&mut fx, 0);
        if n > 0 {
            assert_eq!(give_in(&mut fx, 0, n as usize), (0, 0));
        } else if n < 0 {
            let back = fx.p.take(n.unsigned_abs().into(), 64);
            assert_eq!(
                back.len(),
                n.unsigned_abs() as usize,
                "offered pages come back"
            );
            fx.p.given.retain(|g| {
                let gone = back.contains(&g.iova);
                if gone {
                    dev.dma_free(g.iova).unwrap();
                }
                !gone
            });
        }
    }
    let st = dev.page_stats();
    fx.destroy_eq(eqn);
    fx.finish_clean();
    let end = dev.page_stats();
    assert_eq!(end.held, 0);
    assert_eq!(
        end.pages_given, end.pages_taken,
        "every page given came back"
    );
    st
}

#[test]
fn random_requests_are_reproducible_from_the_seed() {
    let a = random_run(11);
    assert_eq!(a, random_run(11));
    assert!(a.requests > 3 && a.reclaims > 3, "{a:?}");
    assert_eq!(
        a.pages_given - a.pages_taken,
        a.held,
        "the accounts balance"
    );
    assert_ne!(a, random_run(12));
}

#[test]
fn nobody_subscribed_no_random_requests() {
    let mut fx = fx(
        Mode::Sync,
        PagePolicy {
            random: Some(RandomPages {
                seed: 11,
                per_mille: 1000,
                max_pages: 6,
            }),
            ..PagePolicy::default()
        },
    );
    let vport = bare::<QueryVportStateIn>(Opcode::QueryVportState, 0);
    for _ in 0..20 {
        fx.p.ok(&vport, QueryVportStateOut::BYTES);
    }
    let st = fx.dev().page_stats();
    assert_eq!((st.requests, st.reclaims, st.asked), (0, 0, 0), "{st:?}");
    fx.finish_clean();
}
