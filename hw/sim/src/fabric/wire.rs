//! The fabric itself ([`Fabric`]): its ports, its wire with the faults on it, its clock and
//! capture; what a device on it is to the fabric ([`Station`]).

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

use super::{pcap, pool};
use crate::error::SimError;
use crate::mode::Mode;
use crate::work::Work;

/// How many deliveries [`Fabric::run_until_idle`] makes at most before it gives up (a
/// livelock guard).
const IDLE_LIMIT: usize = 1 << 20;

/// The most frames handed to a station at once ([`Station::deliver`]).
pub(crate) const BATCH: usize = 64;

thread_local! {
    /// A delivery batch's list, emptied after each (its capacity kept: delivering allocates
    /// nothing).
    static SPARE_BATCH: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A fault on the wire (see [`Fabric::inject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireFault {
    /// The next `count` frames are lost.
    Drop {
        /// How many frames.
        count: u32,
    },
    /// Every frame is lost with probability `per_million` / 1 000 000 (a deterministic
    /// generator seeded with `seed`), until [`Fabric::clear_faults`].
    DropRandom {
        /// Loss probability in millionths.
        per_million: u32,
        /// Seed of the generator.
        seed: u64,
    },
    /// The next `count` frames get one byte flipped (the last byte before the ICRC).
    Corrupt {
        /// How many frames.
        count: u32,
    },
    /// Every frame arrives `ns` nanoseconds of fabric time late, until `clear_faults`.
    Delay {
        /// The delay.
        ns: u64,
    },
    /// The next `count` frames are each overtaken by the frame after them.
    Reorder {
        /// How many frames.
        count: u32,
    },
    /// Every frame is overtaken by the next with probability `per_million` / 1 000 000 (a
    /// deterministic generator seeded with `seed`), until [`Fabric::clear_faults`].
    ReorderRandom {
        /// Reordering probability in millionths.
        per_million: u32,
        /// Seed of the generator.
        seed: u64,
    },
    /// The next `count` frames arrive twice.
    Duplicate {
        /// How many frames.
        count: u32,
    },
    /// Every frame arrives twice with probability `per_million` / 1 000 000 (a deterministic
    /// generator seeded with `seed`), until [`Fabric::clear_faults`].
    DuplicateRandom {
        /// Duplication probability in millionths.
        per_million: u32,
        /// Seed of the generator.
        seed: u64,
    },
    /// Every frame is lost until [`WireFault::LinkUp`] or `clear_faults`.
    LinkDown,
    /// Ends a [`WireFault::LinkDown`].
    LinkUp,
}

/// What a fabric has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FabricCounters {
    /// Frames sent by the ports.
    pub frames: u64,
    /// Bytes sent by the ports.
    pub bytes: u64,
    /// Frames lost to a fault (drops, link down).
    pub dropped: u64,
    /// Frames corrupted by a fault.
    pub corrupted: u64,
    /// Frames reordered by a fault.
    pub reordered: u64,
    /// Frames duplicated by a fault (each counted once, however many ports it went to).
    pub duplicated: u64,
    /// Frames that reached no port: to a MAC no port has (or to a group), with no other port
    /// on the wire to flood them to.
    pub unroutable: u64,
    /// Frames handed to a port.
    pub delivered: u64,
}

/// What the fabric needs of the device on a port (the device core implements it): taking a
/// frame, and its data path timers.
pub(crate) trait Station: Send + Sync {
    /// Takes frames from the wire, in order: those due on its port at one moment, at most
    /// [`BATCH`] (one pass through the device for all of them).
    fn deliver(&self, frames: &[Vec<u8>]);
    /// Every frame due for the device has been delivered: it sends what it held back for that
    /// moment (coalesced ACKs). Whether it sent anything.
    fn idle(&self) -> bool {
        false
    }
    /// Whether a data path timer is due.
    fn timers_due(&self) -> bool;
    /// Services the due timers.
    fn service_timers(&self);
    /// The earliest data path timer (device time).
    fn deadline(&self) -> Option<u64>;
    /// The addresses of the device's RoCE GID table (an external port's ARP/ND responder
    /// answers for them).
    fn gids(&self) -> Vec<[u8; 16]> {
        Vec::new()
    }
}

pub(super) struct Port {
    /// The device; `None` once it is detached.
    dev: Option<Weak<dyn Station>>,
    pub(super) mac: [u8; 6],
    /// The other unicast addresses the device behind the port owns (its vport's address list,
    /// its GIDs' MACs): the switch forwards them to this port as it does `mac`, as a legacy
    /// e-switch's FDB has a `dmac → vport` rule for each address a vport lists.
    learned: Addresses,
    inbox: VecDeque<(u64, Vec<u8>)>,
    kick: Option<Sender<Work>>,
}

/// The most addresses a port learns besides its MAC (more are flooded to, as unknown unicast).
pub(crate) const LEARNED: usize = 16;

/// A port's learned addresses.
pub(crate) type Addresses = heapless::Vec<[u8; 6], LEARNED>;

impl Port {
    /// The device, if it is attached and alive.
    pub(super) fn station(&self) -> Option<Arc<dyn Station>> {
        self.dev.as_ref().and_then(Weak::upgrade)
    }
}

#[derive(Default)]
struct Faults {
    drop: u32,
    random: Option<(u32, u64)>,
    corrupt: u32,
    delay: u64,
    reorder: u32,
    reorder_random: Option<(u32, u64)>,
    dup: u32,
    dup_random: Option<(u32, u64)>,
    down: bool,
}

/// Whether a fault strikes this frame: while `count` lasts (it counts down), else by one draw
/// of the seeded generator, if there is one.
fn strikes_next(count: &mut u32, random: &mut Option<(u32, u64)>) -> bool {
    if *count > 0 {
        *count -= 1;
        return true;
    }
    strikes(random)
}

/// One draw of a seeded fault: whether it strikes (xorshift64 over `state`).
fn strikes(random: &mut Option<(u32, u64)>) -> bool {
    let Some((per_million, state)) = random.as_mut() else {
        return false;
    };
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state % 1_000_000 < u64::from(*per_million)
}

pub(super) struct Wire {
    pub(super) ports: Vec<Port>,
    faults: Faults,
    held: Option<(usize, u64, Vec<u8>)>,
    counters: FabricCounters,
    /// The last `keep` frames ([`Fabric::keep_frames`]).
    capture: VecDeque<(u64, Vec<u8>)>,
    keep: usize,
    /// The pcap file being written ([`Fabric::pcap_to`]).
    pcap: Option<pcap::Stream>,
}

pub(super) struct Inner {
    /// The mode of the devices (set by the first one attached).
    pub(super) mode: OnceLock<Mode>,
    wire: Mutex<Wire>,
    clock: AtomicU64,
    created: Instant,
    private: bool,
}

/// A wire connecting simulated devices (cheap to clone; clones share it).
#[derive(Clone)]
pub struct Fabric {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("ports", &self.wire().ports.len())
            .field("private", &self.inner.private)
            .finish_non_exhaustive()
    }
}

impl Default for Fabric {
    fn default() -> Self {
        Self::new()
    }
}

impl Fabric {
    fn make(mode: Option<Mode>, private: bool) -> Fabric {
        let once = OnceLock::new();
        if let Some(m) = mode {
            let _ = once.set(m);
        }
        Fabric {
            inner: Arc::new(Inner {
                mode: once,
                wire: Mutex::new(Wire {
                    ports: Vec::new(),
                    faults: Faults::default(),
                    held: None,
                    counters: FabricCounters::default(),
                    capture: VecDeque::new(),
                    keep: 0,
                    pcap: None,
                }),
                clock: AtomicU64::new(0),
                created: Instant::now(),
                private,
            }),
        }
    }

    /// An empty fabric; its mode is that of the first device attached.
    pub fn new() -> Fabric {
        Self::make(None, false)
    }

    /// The private fabric of a new device.
    pub(crate) fn private(mode: Mode) -> Fabric {
        Self::make(Some(mode), true)
    }

    pub(super) fn wire(&self) -> MutexGuard<'_, Wire> {
        self.inner.wire.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn mode(&self) -> Mode {
        self.inner.mode.get().copied().unwrap_or(Mode::Sync)
    }

    /// Fabric time in nanoseconds (virtual in [`Mode::Sync`], real in [`Mode::Threaded`]).
    pub fn now_ns(&self) -> u64 {
        match self.mode() {
            Mode::Sync => self.inner.clock.load(Ordering::Acquire),
            Mode::Threaded => {
                u64::try_from(self.inner.created.elapsed().as_nanos()).unwrap_or(u64::MAX)
            }
        }
    }

    /// Advances the virtual clock by `ns` (device `relax()`).
    pub(crate) fn tick_clock(&self, ns: u64) {
        self.inner.clock.fetch_add(ns, Ordering::AcqRel);
    }

    /// Adds a port for `dev` (whose doorbells go to `kick` in threaded mode).
    pub(crate) fn add_port(
        &self,
        dev: Weak<dyn Station>,
        mac: [u8; 6],
        kick: Option<Sender<Work>>,
    ) -> usize {
        let mut w = self.wire();
        w.ports.push(Port {
            dev: Some(dev),
            mac,
            learned: Addresses::new(),
            inbox: VecDeque::new(),
            kick,
        });
        w.ports.len() - 1
    }

    /// Moves a device's port from port `old_port` of `old` onto this fabric: its `station`,
    /// `mode`, `mac` and the `kick` that wakes its thread. `Ok(None)` if it is here already;
    /// otherwise the new port. Refused as [`Fabric::attach`] says.
    pub(crate) fn join(
        &self,
        old: &Fabric,
        old_port: usize,
        mode: Mode,
        mac: [u8; 6],
        station: Arc<dyn Station>,
        kick: Option<Sender<Work>>,
    ) -> Result<Option<usize>, SimError> {
        if Arc::ptr_eq(&old.inner, &self.inner) {
            return Ok(None);
        }
        if !old.inner.private {
            return Err(SimError::FabricAlreadyAttached);
        }
        let fabric_mode = *self.inner.mode.get_or_init(|| mode);
        if fabric_mode != mode {
            return Err(SimError::FabricModeMismatch {
                fabric: fabric_mode,
                device: mode,
            });
        }
        self.inner
            .clock
            .fetch_max(old.inner.clock.load(Ordering::Acquire), Ordering::AcqRel);
        if self
            .wire()
            .ports
            .iter()
            .any(|p| p.mac == mac && p.station().is_some())
        {
            return Err(SimError::DuplicateMac { mac });
        }
        let port = self.add_port(Arc::downgrade(&station), mac, kick);
        old.detach(old_port);
        Ok(Some(port))
    }

    pub(super) fn detach(&self, port: usize) {
        let mut w = self.wire();
        if let Some(p) = w.ports.get_mut(port) {
            p.dev = None;
            p.inbox.clear();
            p.kick = None;
        }
    }

    /// Injects a wire fault.
    pub fn inject(&self, f: WireFault) {
        let mut w = self.wire();
        let faults = &mut w.faults;
        match f {
            WireFault::Drop { count } => faults.drop = faults.drop.saturating_add(count),
            WireFault::DropRandom { per_million, seed } => {
                faults.random = Some((per_million, seed | 1));
            }
            WireFault::Corrupt { count } => faults.corrupt = faults.corrupt.saturating_add(count),
            WireFault::Delay { ns } => faults.delay = ns,
            WireFault::Reorder { count } => faults.reorder = faults.reorder.saturating_add(count),
            WireFault::ReorderRandom { per_million, seed } => {
                faults.reorder_random = Some((per_million, seed | 1));
            }
            WireFault::Duplicate { count } => faults.dup = faults.dup.saturating_add(count),
            WireFault::DuplicateRandom { per_million, seed } => {
                faults.dup_random = Some((per_million, seed | 1));
            }
            WireFault::LinkDown => faults.down = true,
            WireFault::LinkUp => faults.down = false,
        }
    }

    /// Ends every pending wire fault.
    pub fn clear_faults(&self) {
        self.wire().faults = Faults::default();
    }

    /// The fabric's counters.
    pub fn counters(&self) -> FabricCounters {
        self.wire().counters
    }

    /// Keeps the last `n` frames the wire carries in memory, with their fabric time, for
    /// [`Fabric::captured`] and [`Fabric::write_pcap`] (0, the default, keeps none; a smaller
    /// `n` forgets the oldest at once).
    pub fn keep_frames(&self, n: usize) {
        let mut w = self.wire();
        w.keep = n;
        while w.capture.len() > n {
            w.capture.pop_front();
        }
    }

    /// The frames kept ([`Fabric::keep_frames`]), oldest first, with their fabric time.
    pub fn captured(&self) -> Vec<(u64, Vec<u8>)> {
        self.wire().capture.iter().cloned().collect()
    }

    /// Writes the kept frames ([`Fabric::keep_frames`]) as a pcap file (nanosecond timestamps
    /// from fabric time, link type Ethernet), for Wireshark's RoCE v2 dissector.
    pub fn write_pcap(&self, w: &mut dyn Write) -> io::Result<()> {
        let frames = self.captured();
        pcap::write(w, frames.iter())
    }

    /// From now on, writes every frame that makes it onto the wire to `w` as a pcap file, as it
    /// is sent (buffered: [`Fabric::pcap_finish`] flushes it). A stream already going is
    /// finished first (its error, if any, is logged).
    pub fn pcap_to(&self, w: Box<dyn Write + Send>) -> io::Result<()> {
        let stream = pcap::Stream::start(w)?;
        if let Some(old) = self.wire().pcap.replace(stream) {
            if let Err(e) = old.finish() {
                log::error!("mlx5-sim: the earlier pcap stream: {e}");
            }
        }
        Ok(())
    }

    /// Ends the pcap stream of [`Fabric::pcap_to`]: flushes it and returns how many frames it
    /// holds, or the first write error (the file then ends before it). `Ok(0)` without one.
    pub fn pcap_finish(&self) -> io::Result<u64> {
        let stream = self.wire().pcap.take();
        stream.map_or(Ok(0), pcap::Stream::finish)
    }

    /// The addresses of `port` now: its MAC and the unicast addresses it owns besides (a
    /// command changed them; the switch forwards them there from now on).
    pub(crate) fn announce(&self, port: usize, (mac, learned): ([u8; 6], &Addresses)) {
        let mut w = self.wire();
        if let Some(p) = w.ports.get_mut(port) {
            p.mac = mac;
            if p.learned != *learned {
                p.learned.clone_from(learned);
            }
        }
    }

    /// Puts frames from `port` (whose MAC is now `mac`, and which owns the unicast addresses
    /// `learned` too) on the wire (`frames` is left empty, its capacity kept).
    pub(crate) fn transmit(
        &self,
        port: usize,
        (mac, learned): ([u8; 6], &Addresses),
        frames: &mut Vec<Vec<u8>>,
    ) {
        if frames.is_empty() {
            return;
        }
        let now = self.now_ns();
        let mut kicks = Vec::new();
        {
            let mut w = self.wire();
            if let Some(p) = w.ports.get_mut(port) {
                p.mac = mac;
                if p.learned != *learned {
                    p.learned.clone_from(learned);
                }
            }
            for f in frames.drain(..) {
                kicks.extend(w.send_one(now, port, f));
            }
        }
        for k in kicks {
            // A stopped device thread no longer listens: nothing to deliver to.
            let _ = k.send(Work::Wire);
        }
    }

    /// The frames due on the first port that has any (`only` that port), at most [`BATCH`],
    /// into `out` (empty), in their order; with the port's device.
    fn next_batch(&self, only: Option<usize>, out: &mut Vec<Vec<u8>>) -> Option<Arc<dyn Station>> {
        let now = self.now_ns();
        let mut w = self.wire();
        let due = |w: &Wire, i: usize| w.ports[i].inbox.front().is_some_and(|(t, _)| *t <= now);
        loop {
            let idx = (0..w.ports.len()).find(|&i| only.is_none_or(|o| o == i) && due(&w, i));
            let Some(i) = idx else {
                // Nothing else is due: a frame held back for reordering goes now.
                let (port, at, f) = w.held.take()?;
                if let Some(p) = w.ports.get_mut(port) {
                    p.inbox.push_back((at, f));
                }
                continue;
            };
            let Some(dev) = w.ports[i].station() else {
                let (_, f) = w.ports[i].inbox.pop_front()?;
                pool::give(f);
                continue;
            };
            while out.len() < BATCH && due(&w, i) {
                let Some((_, f)) = w.ports[i].inbox.pop_front() else {
                    break;
                };
                out.push(f);
                w.counters.delivered += 1;
            }
            return Some(dev);
        }
    }

    /// Delivers the next batch ([`Fabric::next_batch`]); whether there was one.
    fn deliver_next(&self, only: Option<usize>) -> bool {
        let mut batch = SPARE_BATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
        let dev = self.next_batch(only, &mut batch);
        if let Some(dev) = &dev {
            dev.deliver(&batch);
        }
        for f in batch.drain(..) {
            pool::give(f);
        }
        SPARE_BATCH.with(|s| *s.borrow_mut() = batch);
        dev.is_some()
    }

    /// The attached devices.
    /// (A few ports inline: asked at every idle phase, it allocates nothing then.)
    fn devices(&self) -> crate::small::SmallList<Arc<dyn Station>, 8> {
        let mut out = crate::small::SmallList::new();
        for d in self.wire().ports.iter().filter_map(Port::station) {
            out.push(d);
        }
        out
    }

    /// Whether a frame is due or held, or a device's timer has expired.
    fn pending(&self) -> bool {
        let now = self.now_ns();
        let frames = {
            let w = self.wire();
            w.held.is_some()
                || w.ports
                    .iter()
                    .any(|p| p.inbox.front().is_some_and(|(t, _)| *t <= now))
        };
        frames || self.devices().iter().any(|d| d.timers_due())
    }

    /// Delivers every frame that is due and services every expired timer, again and again
    /// until nothing more happens ([`Mode::Sync`]; in [`Mode::Threaded`] the device threads do
    /// this themselves and this returns at once).
    pub fn run_until_idle(&self) {
        if self.mode() == Mode::Threaded {
            return;
        }
        for _ in 0..IDLE_LIMIT {
            if self.deliver_next(None) {
                continue;
            }
            let devices = self.devices();
            if devices.iter().fold(false, |any, d| d.idle() | any) {
                continue;
            }
            let mut any = false;
            for d in devices.iter() {
                if d.timers_due() {
                    d.service_timers();
                    any = true;
                }
            }
            if !any {
                return;
            }
        }
        log::error!("mlx5-sim: the fabric did not become idle after {IDLE_LIMIT} steps");
    }

    /// `run_until_idle` if anything is pending (cheap when nothing is).
    pub(crate) fn poll(&self) {
        if self.pending() {
            self.run_until_idle();
        }
    }

    /// Threaded mode: delivers the due frames of `port` and services `dev`'s timers.
    pub(crate) fn service(&self, port: usize, dev: &dyn Station) {
        for _ in 0..IDLE_LIMIT {
            if !self.deliver_next(Some(port)) {
                break;
            }
        }
        dev.idle();
        if dev.timers_due() {
            dev.service_timers();
        }
    }

    /// The earliest time something is scheduled: a delayed frame or a device timer.
    fn next_event(&self) -> Option<u64> {
        let frames = {
            let w = self.wire();
            w.ports
                .iter()
                .filter_map(|p| p.inbox.front().map(|(t, _)| *t))
                .min()
        };
        let timers = self.devices().iter().filter_map(|d| d.deadline()).min();
        [frames, timers].into_iter().flatten().min()
    }

    /// [`Mode::Sync`]: moves the clock `ns` forward, stopping at every scheduled event on the
    /// way (timers, delayed frames) to run it. [`Mode::Threaded`]: sleeps `ns` of real time.
    pub fn advance(&self, ns: u64) {
        if self.mode() == Mode::Threaded {
            std::thread::sleep(std::time::Duration::from_nanos(ns));
            return;
        }
        let target = self.now_ns().saturating_add(ns);
        self.run_until_idle();
        while let Some(t) = self.next_event().filter(|&t| t <= target) {
            self.inner.clock.fetch_max(t, Ordering::AcqRel);
            self.run_until_idle();
        }
        self.inner.clock.fetch_max(target, Ordering::AcqRel);
        self.run_until_idle();
    }
}

impl Wire {
    /// One frame from port `from`: faults, capture, routing. The kicks of the ports it goes to.
    fn send_one(&mut self, now: u64, from: usize, mut f: Vec<u8>) -> Vec<Sender<Work>> {
        self.counters.frames += 1;
        self.counters.bytes += f.len() as u64;
        let faults = &mut self.faults;
        let lost = if faults.down {
            true
        } else {
            strikes_next(&mut faults.drop, &mut faults.random)
        };
        if lost {
            self.counters.dropped += 1;
            pool::give(f);
            return Vec::new();
        }
        if faults.corrupt > 0 && f.len() > 5 {
            faults.corrupt -= 1;
            let at = f.len() - 5;
            f[at] ^= 0x5a;
            self.counters.corrupted += 1;
        }
        if let Some(p) = self.pcap.as_mut() {
            p.frame(now, &f);
        }
        if self.keep > 0 {
            if self.capture.len() >= self.keep {
                self.capture.pop_front();
            }
            self.capture.push_back((now, f.clone()));
        }
        let Some(dmac) = f.get(..6) else {
            return Vec::new();
        };
        let twice = strikes_next(&mut self.faults.dup, &mut self.faults.dup_random);
        if twice {
            self.counters.duplicated += 1;
        }
        let at = now.saturating_add(self.faults.delay);
        let known = self.ports.iter().position(|p| {
            (p.mac == dmac || p.learned.iter().any(|m| m[..] == *dmac))
                && p.dev.as_ref().is_some_and(|d| d.strong_count() > 0)
        });
        let group = dmac[0] & 1 != 0;
        if group || known.is_none() {
            // Broadcast, multicast and unicast to an address no port has (the switch has not
            // learned it) go to every other port, as a switch floods them; with no other port,
            // the frame is lost.
            let mut kicks = Vec::new();
            let mut reached = false;
            for (i, p) in self.ports.iter_mut().enumerate() {
                if i != from && p.station().is_some() {
                    p.inbox.push_back((at, pool::copy(&f)));
                    if twice {
                        p.inbox.push_back((at, pool::copy(&f)));
                    }
                    kicks.extend(p.kick.clone());
                    reached = true;
                }
            }
            pool::give(f);
            if !reached {
                self.counters.unroutable += 1;
            }
            return kicks;
        }
        let Some(dst) = known else {
            return Vec::new();
        };
        if twice {
            self.ports[dst].inbox.push_back((at, pool::copy(&f)));
        }
        // One frame held back at a time: the next one overtakes it.
        if self.held.is_none()
            && strikes_next(&mut self.faults.reorder, &mut self.faults.reorder_random)
        {
            self.counters.reordered += 1;
            self.held = Some((dst, at, f));
            return Vec::new();
        }
        self.ports[dst].inbox.push_back((at, f));
        if let Some((port, t, held)) = self.held.take() {
            if let Some(p) = self.ports.get_mut(port) {
                p.inbox.push_back((t, held));
            }
        }
        self.ports[dst].kick.clone().into_iter().collect()
    }
}
