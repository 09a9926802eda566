//! The firmware pages the device holds ([`Pages`]) and its run-time page requests: the policy
//! ([`PagePolicy`]), the request state ([`Requests`]) and the accounts ([`PageStats`]). The
//! commands (QUERY_PAGES, MANAGE_PAGES) and the PAGE_REQUEST events are [`crate::fw`]'s.

use std::collections::BTreeSet;

use mlx5_ifc::consts::ADAPTER_PAGE_SIZE;

use crate::scribble::Rng;

/// The pages the device holds, and its run-time requests.
#[derive(Debug)]
pub(crate) struct Pages {
    pub(crate) held: BTreeSet<u64>,
    pub(crate) req: Requests,
}

impl Pages {
    pub(crate) fn new(policy: PagePolicy) -> Self {
        Self {
            held: BTreeSet::new(),
            req: Requests::new(policy),
        }
    }

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

/// How the firmware asks for pages at run time (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PagePolicy {
    /// Pages of ICM each CQ, QP, SRQ, RMP and memory key needs; 0: commands never wait.
    pub icm_pages_per_object: u32,
    /// Free pages the firmware keeps after a DESTROY; above them it offers pages back.
    /// `None`: it never offers pages back after a destroy.
    pub spare_pages: Option<u32>,
    /// Requests at random moments.
    pub random: Option<RandomPages>,
}

/// Seeded run-time page requests of a [`PagePolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomPages {
    /// The seed: the same seed over the same commands gives the same requests.
    pub seed: u64,
    /// Chance per executed command, in thousandths.
    pub per_mille: u16,
    /// The most pages one request asks for or offers back (at least 1).
    pub max_pages: u32,
}

/// The firmware's page accounts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PageStats {
    /// Pages the device holds now.
    pub held: u64,
    /// Pages asked for and not yet given.
    pub asked: u64,
    /// Pages offered back and not yet taken.
    pub offered: u64,
    /// Commands waiting for pages now.
    pub waiting_commands: u64,
    /// PAGE_REQUEST events with `num_pages` > 0 raised so far.
    pub requests: u64,
    /// Pages they asked for.
    pub pages_requested: u64,
    /// PAGE_REQUEST events with `num_pages` < 0 raised so far.
    pub reclaims: u64,
    /// Pages they offered back.
    pub pages_offered: u64,
    /// Pages given by MANAGE_PAGES so far (boot and init pages included).
    pub pages_given: u64,
    /// Pages taken back by MANAGE_PAGES so far.
    pub pages_taken: u64,
    /// Commands that had to wait for pages so far.
    pub commands_held: u64,
    /// MANAGE_PAGES op_mod 0 (cannot give) received so far.
    pub alloc_fail_notices: u64,
}

/// The run-time request state.
#[derive(Debug)]
pub(crate) struct Requests {
    pub(crate) policy: PagePolicy,
    pub(crate) rng: Rng,
    /// Pages asked for and not yet given.
    pub(crate) asked: u64,
    /// Pages offered back and not yet taken.
    pub(crate) offered: u64,
    /// Pages the held commands need, together.
    pub(crate) waiting: u64,
    /// Held commands.
    pub(crate) waiting_commands: u64,
    /// The driver said it cannot give: held commands fail (consumed by the command interface).
    pub(crate) alloc_failed: bool,
    pub(crate) stats: PageStats,
}

impl Requests {
    pub(crate) fn new(policy: PagePolicy) -> Self {
        let seed = policy.random.map_or(0, |r| r.seed);
        Self {
            policy,
            rng: Rng(seed),
            asked: 0,
            offered: 0,
            waiting: 0,
            waiting_commands: 0,
            alloc_failed: false,
            stats: PageStats::default(),
        }
    }

    /// A new policy (the random generator restarts from its seed).
    pub(crate) fn set_policy(&mut self, policy: PagePolicy) {
        self.rng = Rng(policy.random.map_or(0, |r| r.seed));
        self.policy = policy;
    }
}
