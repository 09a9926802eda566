//! BlueFlame registers ("bfregs"): the send doorbells of QPs and Ethernet SQs, four to a UAR page
//! (PRM: register `k` at `0x800 + k · 2^log_bf_reg_size`, each of two halves).
//!
//! A UAR page per queue would bound the queues by BAR0 (8 190 pages of a 32 MiB BAR, against
//! `max_qp` = 2^18). So queues share pages, in the two classes Linux and rdma-core use:
//!
//! * **dedicated** registers, one queue each: BlueFlame allowed, the halves alternated by their
//!   one writer, so no lock. The first `dedicated` queues get them (rdma-core's low-latency
//!   bfregs; the kernel's `mlx5_alloc_bfreg` hands out all four registers of a page this way).
//! * **shared** registers, any number of queues each: the 8-byte doorbell only, always at the
//!   register's first half, so no lock either — rdma-core's bfreg 0, which "does not exercise the
//!   odd/even policy so it can avoid a lock but may not use blue flame". A queue takes the least
//!   used one; at most `shared` of them exist.
//!
//! The device checks that a doorbell's queue names the page it is written to (`uar_page`), so a
//! queue's context names its register's page. Pages are allocated when first needed and given
//! back (DEALLOC_UAR) when their last queue goes — but for one empty page, kept as a spare until
//! close.

use heapless::Vec;
use mlx5_ifc::regs::{uar, UAR_PAGE_SIZE};

use super::uar::Uar;
use crate::error::{Error, Result};

/// Registers in one UAR page (rdma-core `NUM_BFREGS_PER_UAR`).
pub(crate) const PER_PAGE: usize = 4;
/// Dedicated registers the pool can hold (the configured number is clamped to it).
pub(crate) const MAX_DEDICATED: u32 = 1024;
/// Shared registers the pool can hold.
pub(crate) const MAX_SHARED: u32 = 64;
const MAX_PAGES: usize = (MAX_DEDICATED + MAX_SHARED) as usize / PER_PAGE;

/// A queue's send doorbell: a register in a UAR page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bfreg {
    uar: Uar,
    /// BAR0 offset of the register's first half.
    reg: u64,
    /// Half size for BlueFlame, 0 on a shared register (or without BlueFlame).
    half: u32,
}

impl Bfreg {
    /// The UAR page the queue's context names.
    pub(crate) fn uar(&self) -> Uar {
        self.uar
    }

    /// BAR0 offset of the register (its first half).
    pub(crate) fn bar_offset(&self) -> u64 {
        self.reg
    }

    /// The size of one half when the queue may use BlueFlame through this register (it then
    /// alternates between the halves), else 0.
    pub(crate) fn bf_half(&self) -> u32 {
        self.half
    }
}

/// The two classes of register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Dedicated,
    Shared,
}

/// A UAR page of the pool and who uses its registers.
#[derive(Debug)]
struct Page {
    uar: Uar,
    class: Class,
    users: [u32; PER_PAGE],
}

/// How many of each register exist and are in use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BfregUse {
    /// UAR pages the pool holds.
    pub pages: u32,
    /// Dedicated registers given to a queue.
    pub dedicated: u32,
    /// Queues ringing a shared register.
    pub shared_users: u32,
    /// Shared registers existing.
    pub shared: u32,
}

/// The device's registers (behind a lock: queue creation and destruction only).
#[derive(Debug)]
pub(crate) struct BfregPool {
    pages: Vec<Page, MAX_PAGES>,
    /// Registers in a page (1 without usable BlueFlame registers: only register 0 is known).
    per_page: usize,
    /// Bytes between registers.
    reg_bytes: u32,
    /// Half of a register, 0 without BlueFlame.
    bf_half: u32,
    dedicated_max: u32,
    shared_max: u32,
}

impl BfregPool {
    /// An empty pool. `bf_half` is the BlueFlame half size (0: no BlueFlame: the device has
    /// none, or the UAR is not write-combining), `log_bf_reg_size` the device's register size.
    pub(crate) fn new(dedicated: u32, shared: u32, log_bf_reg_size: u8, bf_half: u32) -> Self {
        let room = UAR_PAGE_SIZE as u32 - uar::BF_OFFSET;
        let reg_bytes = match 1u32.checked_shl(u32::from(log_bf_reg_size)) {
            Some(r) if (64..=room).contains(&r) => r,
            _ => 0,
        };
        let per_page = room
            .checked_div(reg_bytes)
            .map_or(1, |n| n.clamp(1, PER_PAGE as u32) as usize);
        let shared_max = (pages_for(shared.clamp(1, MAX_SHARED), per_page) * per_page) as u32;
        Self {
            pages: Vec::new(),
            per_page,
            reg_bytes,
            bf_half: if reg_bytes == 0 { 0 } else { bf_half },
            // Both classes must fit MAX_PAGES whatever the page holds.
            dedicated_max: dedicated
                .min(MAX_DEDICATED)
                .min(((MAX_PAGES - pages_for(shared_max, per_page)) * per_page) as u32),
            shared_max,
        }
    }

    fn bfreg(&self, page: &Page, k: usize) -> Bfreg {
        Bfreg {
            uar: page.uar,
            reg: page.uar.bar_offset()
                + u64::from(uar::BF_OFFSET)
                + (k as u64) * u64::from(self.reg_bytes),
            half: match page.class {
                Class::Dedicated => self.bf_half,
                Class::Shared => 0,
            },
        }
    }

    /// What is in use.
    pub(crate) fn usage(&self) -> BfregUse {
        let mut u = BfregUse {
            pages: self.pages.len() as u32,
            ..Default::default()
        };
        for p in &self.pages {
            let n = p.users[..self.per_page].iter().sum::<u32>();
            match p.class {
                Class::Dedicated => u.dedicated += n,
                Class::Shared => {
                    u.shared_users += n;
                    u.shared += self.per_page as u32;
                }
            }
        }
        u
    }

    /// A register for a new queue from the pages held, or `Err(class)`: a page of that class
    /// must be allocated first ([`BfregPool::add_page`]).
    pub(crate) fn take(&mut self) -> core::result::Result<Bfreg, NeedPage> {
        let u = self.usage();
        let dedicated_free = u.dedicated < self.dedicated_max;
        if dedicated_free {
            let free = self.pages.iter().enumerate().find_map(|(i, p)| {
                let k = p.users[..self.per_page].iter().position(|&n| n == 0)?;
                (p.class == Class::Dedicated).then_some((i, k))
            });
            if let Some((i, k)) = free {
                self.pages[i].users[k] = 1;
                return Ok(self.bfreg(&self.pages[i], k));
            }
            return Err(NeedPage(Class::Dedicated));
        }
        // The least used shared register; a new page while the shared ones are all in use and
        // more may exist.
        let least = self
            .pages
            .iter()
            .enumerate()
            .filter(|(_, p)| p.class == Class::Shared)
            .flat_map(|(i, p)| (0..self.per_page).map(move |k| (p.users[k], i, k)))
            .min();
        match least {
            Some((n, _, _)) if n > 0 && u.shared + (self.per_page as u32) <= self.shared_max => {
                Err(NeedPage(Class::Shared))
            }
            Some((_, i, k)) => {
                self.pages[i].users[k] += 1;
                Ok(self.bfreg(&self.pages[i], k))
            }
            None => Err(NeedPage(Class::Shared)),
        }
    }

    /// Adds a freshly allocated page of the class [`BfregPool::take`] now asks for and takes a
    /// register in it. When another thread made room meanwhile, the register is taken there
    /// and `uar` comes back, to be freed.
    pub(crate) fn add_page(&mut self, uar: Uar) -> (Result<Bfreg>, Option<Uar>) {
        let class = match self.take() {
            Ok(b) => return (Ok(b), Some(uar)),
            Err(NeedPage(c)) => c,
        };
        let mut users = [0; PER_PAGE];
        users[0] = 1;
        let page = Page { uar, class, users };
        let b = self.bfreg(&page, 0);
        match self.pages.push(page) {
            Ok(()) => (Ok(b), None),
            Err(_) => (
                Err(Error::Capacity {
                    what: "UAR pages of the doorbell registers",
                    limit: MAX_PAGES,
                }),
                Some(uar),
            ),
        }
    }

    /// Gives a queue's register back; returns its page when no queue uses it any more and
    /// another page is empty too (to be freed with DEALLOC_UAR). One empty page stays as a
    /// spare — as a context keeps its UAR pages — so that a program creating and destroying one
    /// queue at a time does not pay ALLOC_UAR and DEALLOC_UAR for each; [`Self::drain`] gives
    /// it back at close.
    pub(crate) fn give(&mut self, b: Bfreg) -> Option<Uar> {
        let i = self.pages.iter().position(|p| p.uar == b.uar)?;
        let p = &mut self.pages[i];
        let k = if self.reg_bytes == 0 {
            0
        } else {
            ((b.reg - p.uar.bar_offset() - u64::from(uar::BF_OFFSET)) / u64::from(self.reg_bytes))
                as usize
        };
        if let Some(n) = p.users.get_mut(k) {
            *n = n.saturating_sub(1);
        }
        let empty = |p: &Page| p.users.iter().all(|&n| n == 0);
        if empty(&self.pages[i])
            && self
                .pages
                .iter()
                .enumerate()
                .any(|(j, p)| j != i && empty(p))
        {
            return Some(self.pages.swap_remove(i).uar);
        }
        None
    }

    /// Every page still held (at close).
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Uar> {
        core::mem::take(&mut self.pages).into_iter().map(|p| p.uar)
    }
}

/// [`BfregPool::take`] needs a new page (of this class) for the register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NeedPage(Class);

/// The size of one half of the UAR page's BlueFlame register (the driver alternates between the
/// two), or 0 for no BlueFlame: when the device has none (`bf` 0, `log_bf_reg_size` 0), or
/// reports a register that would not fit in the UAR page between the BlueFlame offset (0x800)
/// and the page's end — BlueFlame stores must never land in another UAR page.
pub(crate) fn bf_half(bf: u8, log_bf_reg_size: u8) -> u32 {
    let room = mlx5_ifc::regs::UAR_PAGE_SIZE as u32 - mlx5_ifc::regs::uar::BF_OFFSET;
    if bf != 1 || log_bf_reg_size == 0 {
        return 0;
    }
    match 1u32.checked_shl(u32::from(log_bf_reg_size)) {
        Some(reg) if reg <= room => reg / 2,
        _ => {
            log::warn!("log_bf_reg_size {log_bf_reg_size} does not fit a UAR page: BlueFlame off");
            0
        }
    }
}

fn pages_for(regs: u32, per_page: usize) -> usize {
    (regs as usize).div_ceil(per_page)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::{Bfreg, BfregPool, Uar};

    /// Takes a register, adding pages (numbered from `next`) as the pool asks.
    fn take(pool: &mut BfregPool, next: &mut u32) -> Bfreg {
        match pool.take() {
            Ok(b) => b,
            Err(_) => {
                *next += 1;
                let (b, spare) = pool.add_page(Uar::test_page(*next));
                assert!(spare.is_none());
                b.expect("room for a page")
            }
        }
    }

    #[test]
    fn dedicated_registers_first_then_the_least_used_shared_one() {
        // log_bf_reg_size 9 (a ConnectX-5): four 512-byte registers, halves of 256.
        let mut pool = BfregPool::new(6, 8, 9, 256);
        let mut next = 10;
        let d: Vec<Bfreg> = (0..6).map(|_| take(&mut pool, &mut next)).collect();
        assert_eq!(
            d.iter().map(|b| b.bar_offset() % 4096).collect::<Vec<_>>(),
            [0x800, 0xa00, 0xc00, 0xe00, 0x800, 0xa00]
        );
        assert!(d.iter().all(|b| b.bf_half() == 256), "dedicated: BlueFlame");
        assert_eq!(
            (d[0].uar(), d[4].uar()),
            (Uar::test_page(11), Uar::test_page(12))
        );
        // Then shared registers: doorbell only, spread over at most 8 (two pages).
        let s: Vec<Bfreg> = (0..20).map(|_| take(&mut pool, &mut next)).collect();
        assert!(s.iter().all(|b| b.bf_half() == 0));
        let u = pool.usage();
        assert_eq!(
            (u.pages, u.dedicated, u.shared, u.shared_users),
            (4, 6, 8, 20)
        );
        let mut per: Vec<usize> = s
            .iter()
            .map(|b| {
                s.iter()
                    .filter(|c| c.bar_offset() == b.bar_offset())
                    .count()
            })
            .collect();
        per.sort();
        assert!(per[0] >= 2 && per[19] <= 3, "spread evenly: {per:?}");
        // A freed dedicated register is taken again before any shared one.
        assert_eq!(pool.give(d[1]), None);
        assert_eq!(take(&mut pool, &mut next), d[1]);
        // The last queue of a page gives the page back — unless it is the only empty page,
        // which stays as a spare.
        assert_eq!(pool.give(d[4]), None);
        assert_eq!(pool.give(d[5]), None, "the spare");
        assert_eq!(pool.usage().pages, 4);
        let given: std::vec::Vec<Uar> = s.into_iter().filter_map(|b| pool.give(b)).collect();
        assert_eq!(given.len(), 2, "both shared pages, now that a spare exists");
        assert_eq!(pool.usage().pages, 2);
        for b in [d[0], d[1], d[2]] {
            assert_eq!(pool.give(b), None);
        }
        assert_eq!(
            pool.give(d[3]),
            Some(Uar::test_page(11)),
            "a second empty page goes"
        );
        assert_eq!(pool.usage().pages, 1);
        assert_eq!(pool.drain().count(), 1);
    }

    #[test]
    fn without_blueflame_registers_every_queue_rings_register_zero() {
        // bf 0 / log_bf_reg_size 0: only the first register is known; no BlueFlame anywhere.
        let mut pool = BfregPool::new(2, 1, 0, 0);
        let mut next = 0;
        let b: Vec<Bfreg> = (0..5).map(|_| take(&mut pool, &mut next)).collect();
        assert!(b
            .iter()
            .all(|b| b.bar_offset() % 4096 == 0x800 && b.bf_half() == 0));
        let u = pool.usage();
        assert_eq!(
            (u.pages, u.dedicated, u.shared, u.shared_users),
            (3, 2, 1, 3)
        );
        // No dedicated registers at all: everything shared.
        let mut pool = BfregPool::new(0, 4, 9, 256);
        let b: Vec<Bfreg> = (0..9).map(|_| take(&mut pool, &mut next)).collect();
        assert!(b.iter().all(|b| b.bf_half() == 0));
        assert_eq!(pool.usage().pages, 1);
    }
}
