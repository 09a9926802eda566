//! How a device is brought up and run: timeouts, limits and choices, with the firmware's
//! documented defaults.

/// Timeouts and choices of the bring-up. The defaults are the firmware's documented defaults.
#[derive(Debug, Clone)]
pub struct DeviceConfig {
    /// How long the firmware may stay `initializing` before the command queue is set up.
    pub fw_pre_init_timeout_ms: u64,
    /// How long it may stay `initializing` after. A shorter `cmd_q_init_to` published by the
    /// device replaces it (never a longer one: this is the ceiling).
    pub fw_init_timeout_ms: u64,
    /// Per-command timeout. A shorter `cmd_exec_to` published by the device replaces it (never
    /// a longer one: this is the ceiling).
    pub cmd_timeout_ms: u64,
    /// The shortest timeout a device may publish: a shorter `cmd_q_init_to` or `cmd_exec_to`
    /// is raised to this (a device claiming 1 ms would make every command time out).
    pub min_device_timeout_ms: u64,
    /// How long page reclaim may go without progress after TEARDOWN_HCA.
    pub reclaim_timeout_ms: u64,
    /// Upper bound for `log_max_qp` programmed with SET_HCA_CAP.
    pub log_max_qp: u8,
    /// The string given to SET_DRIVER_VERSION.
    pub driver_version: &'static str,
    /// Size of BAR0 (UAR indices are checked against it).
    pub bar_size: u64,
    /// Events the completion EQ holds.
    pub comp_eq_size: u32,
    /// How long a call waits for a CQ that another thread holds (a `CqPoller`, or a poll in
    /// progress) before it fails with `Error::Timeout`.
    pub cq_lock_timeout_ms: u64,
    /// Queues given a BlueFlame register of their own (the first ones created; low latency,
    /// no lock); clamped to 1024. The rest share registers through the 8-byte doorbell.
    pub dedicated_bfregs: u32,
    /// Registers the other queues share (the least used is taken); clamped to 1..=64.
    pub shared_bfregs: u32,
    /// The most 4 KiB pages lent to the firmware (its ICM grows with the objects created); a
    /// request beyond is refused (MANAGE_PAGES op_mod 0), so a device cannot take all memory.
    pub fw_pages_max: usize,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self {
            fw_pre_init_timeout_ms: 120_000,
            fw_init_timeout_ms: 2_000,
            cmd_timeout_ms: 60_000,
            min_device_timeout_ms: 1_000,
            reclaim_timeout_ms: 5_000,
            log_max_qp: 18,
            driver_version: concat!("rust,mlx5,", env!("CARGO_PKG_VERSION")),
            bar_size: 32 << 20,
            comp_eq_size: 1024,
            cq_lock_timeout_ms: 1_000,
            dedicated_bfregs: 256,
            shared_bfregs: 16,
            fw_pages_max: crate::fw::pages::DEFAULT_MAX_PAGES,
        }
    }
}
