//! Multicast groups: which UD QPs each multicast GID delivers to (ATTACH_TO_MCG /
//! DETACH_FROM_MCG, [`crate::fw::mcg`]; delivery in [`crate::engine::responder`]).
//!
//! A group exists while a QP is attached to it. At most `2^log_max_mcg` groups and
//! `max_qp_mcg` QPs per group (the CUR capabilities; the command refuses beyond). A QP that is
//! destroyed leaves every group ([`super::Model::remove`]).

use std::collections::BTreeMap;

/// Why an attach was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// Every one of the `2^log_max_mcg` groups is in use.
    Groups,
    /// The group has `max_qp_mcg` QPs.
    Members,
}

/// The multicast groups of the function.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    by_gid: BTreeMap<[u8; 16], Vec<u32>>,
}

impl Groups {
    /// Attaches `qpn` to `gid` (already attached: nothing changes).
    pub(crate) fn attach(
        &mut self,
        gid: [u8; 16],
        qpn: u32,
        max_groups: u64,
        max_members: u64,
    ) -> Result<(), Full> {
        let groups = self.by_gid.len() as u64;
        match self.by_gid.get_mut(&gid) {
            Some(m) if m.contains(&qpn) => Ok(()),
            Some(m) if m.len() as u64 >= max_members => Err(Full::Members),
            Some(m) => {
                m.push(qpn);
                Ok(())
            }
            None if groups >= max_groups => Err(Full::Groups),
            None if max_members == 0 => Err(Full::Members),
            None => {
                self.by_gid.insert(gid, vec![qpn]);
                Ok(())
            }
        }
    }

    /// Detaches `qpn` from `gid`; whether it was attached.
    pub(crate) fn detach(&mut self, gid: &[u8; 16], qpn: u32) -> bool {
        let Some(m) = self.by_gid.get_mut(gid) else {
            return false;
        };
        let Some(at) = m.iter().position(|&q| q == qpn) else {
            return false;
        };
        m.remove(at);
        if m.is_empty() {
            self.by_gid.remove(gid);
        }
        true
    }

    /// The QPs attached to `gid`, in the order they joined.
    pub(crate) fn members(&self, gid: &[u8; 16]) -> &[u32] {
        self.by_gid.get(gid).map_or(&[], Vec::as_slice)
    }

    /// `qpn` leaves every group (it is destroyed).
    pub(crate) fn forget_qp(&mut self, qpn: u32) {
        self.by_gid.retain(|_, m| {
            m.retain(|&q| q != qpn);
            !m.is_empty()
        });
    }

    /// The number of groups in use.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_gid.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_hold_their_members_within_the_limits() {
        let mut g = Groups::default();
        let (a, b) = ([0xff; 16], [0xfe; 16]);
        assert_eq!(g.attach(a, 5, 2, 2), Ok(()));
        assert_eq!(
            g.attach(a, 5, 2, 2),
            Ok(()),
            "attaching twice changes nothing"
        );
        assert_eq!(g.attach(a, 6, 2, 2), Ok(()));
        assert_eq!(g.attach(a, 7, 2, 2), Err(Full::Members));
        assert_eq!(g.attach(b, 7, 2, 2), Ok(()));
        assert_eq!(g.attach([1; 16], 7, 2, 2), Err(Full::Groups));
        assert_eq!(g.members(&a), &[5, 6]);
        assert!(g.detach(&a, 5));
        assert!(!g.detach(&a, 5));
        g.forget_qp(7);
        assert_eq!(g.len(), 1);
        assert!(g.members(&b).is_empty());
    }
}
