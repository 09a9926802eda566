//! Warnings a client can cause, rate-limited: a burst of lines per second, the rest counted and
//! reported with the next line let through (and at the client's departure), so that a stream of
//! bad accesses costs the log a few lines a second, not one per access.

use std::time::{Duration, Instant};

/// Lines let through per window.
pub(crate) const BURST: u32 = 10;
/// The window.
const WINDOW: Duration = Duration::from_secs(1);

/// One limiter per kind of line (or per client).
#[derive(Debug)]
pub(crate) struct RateLimit {
    window: Instant,
    in_window: u32,
    /// Suppressed since the last line let through.
    suppressed: u64,
    /// Suppressed in all.
    total: u64,
}

impl RateLimit {
    pub(crate) fn new() -> Self {
        RateLimit {
            window: Instant::now(),
            in_window: 0,
            suppressed: 0,
            total: 0,
        }
    }

    /// `Some(lines suppressed since the last one let through)` if a line may be logged now;
    /// `None`: suppressed (and counted).
    pub(crate) fn allow(&mut self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    fn allow_at(&mut self, now: Instant) -> Option<u64> {
        if now.saturating_duration_since(self.window) >= WINDOW {
            self.window = now;
            self.in_window = 0;
        }
        if self.in_window < BURST {
            self.in_window += 1;
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            self.total += 1;
            None
        }
    }

    /// Lines suppressed in all.
    pub(crate) fn total_suppressed(&self) -> u64 {
        self.total
    }
}

/// Logs a warning through `limit`: `format_args!` only when let through, with the count of
/// lines suppressed since the last one.
macro_rules! limited_warn {
    ($limit:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $limit.allow() {
            if suppressed > 0 {
                log::warn!(
                    "mlx5-vfio-user: {suppressed} warnings like the next were not logged (limit: {} a second)",
                    $crate::ratelimit::BURST
                );
            }
            log::warn!($($arg)+);
        }
    };
}
pub(crate) use limited_warn;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_a_window_then_the_count_of_those_suppressed() {
        let mut l = RateLimit::new();
        let t0 = l.window;
        for _ in 0..BURST {
            assert_eq!(l.allow_at(t0), Some(0));
        }
        for _ in 0..5000 {
            assert_eq!(l.allow_at(t0 + WINDOW / 2), None);
        }
        assert_eq!(l.allow_at(t0 + WINDOW), Some(5000));
        assert_eq!(l.allow_at(t0 + WINDOW), Some(0));
        assert_eq!(l.total_suppressed(), 5000);
    }
}
