//! The body of the fuzz target `external_port` (issue #26): frames from a real link into the
//! simulator's external port (hw/sim/src/fabric/external.rs) — its neighbour learning (ARP, ND),
//! its address responder, and the fabric behind it, where simulated NIC C (10.0.0.1 as GID 1,
//! its link-local IPv6 address as GID 0) has an RC QP connected to a peer on the link (QPN
//! 0x123 at 10.0.0.9), a UD QP, receives posted on both and a region open to remote access.
//! Each record of the input (see `frames.rs`) is one datagram written to the port's socket, as
//! QEMU's `-netdev dgram` writes frames; then a sentinel ARP request for C's address, whose
//! answer means the port's reader has dealt with everything before it. What the port sends to
//! the link is read and dropped.
//!
//! Must hold: nothing panics (the port's threads included: a panic anywhere aborts the
//! process), the port takes every frame of at least 14 bytes, it answers the sentinel (it has
//! not stopped or hung), its neighbour table stays within `MAX_NEIGHBOURS`, and the NIC makes
//! no DMA fault.
//!
//! The fabric, the NIC, its QPs and the port are made once per process (a thread's first
//! input); each input starts with both QPs reset, connected again (RC's expected PSN 0) and
//! their receives posted, so that what an input does to them does not depend on the last one.
//! The neighbour table carries over (it fills, and evicts, as a long-lived port's does).
//!
//! Record `ctl` bits past the fix-ups (applied before them): 0x08 the destination MAC is C's;
//! 0x10 a RoCE frame's BTH names C's RC QP, 0x20 its UD QP (both: QP1); 0x40 a RETH or
//! AtomicETH names C's region (its address and rkey).

#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mlx5::cq::Cq;
use mlx5::mr::MemoryRegion;
use mlx5::qp::{ConnectOpts, Qp, QpAttr, QpAttrMask, QpCap, QpEndpoint, QpInitAttr, QpState};
use mlx5::qp::{QpType, RecvWr, Sge};
use mlx5::sim::{ExternalPort, Fabric, Mode, Profile, SimDevice, MAX_NEIGHBOURS};
use mlx5::{Device, DeviceConfig, GidEntry, MrAccess, SimPlatform, Wc};

use crate::frames::{self, l2};

type Dev = Device<SimPlatform>;

pub const MAC_C: [u8; 6] = [2, 0xc5, 0x5a, 0, 0x26, 0x0c];
pub const IP_C: [u8; 4] = [10, 0, 0, 1];
pub const PEER_MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 9];
pub const PEER_IP: [u8; 4] = [10, 0, 0, 9];
pub const PEER_QPN: u32 = 0x123;
const SENTINEL_IP: [u8; 4] = [10, 0, 0, 254];
/// Bytes of padding per `pad` of a record: 255 of them make a frame past the port's 64 KiB.
const PAD_UNIT: usize = 260;
/// Frames longer than a unix datagram socket's default send buffer are refused by the kernel.
const FRAME_MAX: usize = 72 * 1024;
/// Receives posted on each QP, and their bytes.
const RECVS: u32 = 8;
const RECV_BYTES: u32 = 1024;
/// The region: receive buffers, then what the peer may read, write and update.
const REGION: usize = 64 * 1024;
pub const REMOTE_AT: usize = 32 * 1024;

pub const DST_C: u8 = 0x08;
pub const TO_RC: u8 = 0x10;
pub const TO_UD: u8 = 0x20;
pub const RKEY: u8 = 0x40;

/// The NIC, its QPs and the port, made once.
struct Rig {
    _fabric: Fabric,
    sim: SimDevice,
    dev: &'static Dev,
    cq: &'static Cq<'static, SimPlatform>,
    mr: MemoryRegion<'static, SimPlatform>,
    rc: Qp<'static, SimPlatform>,
    ud: Qp<'static, SimPlatform>,
    port: ExternalPort,
    /// Our end of the link.
    link: UnixDatagram,
    /// The port's socket.
    ours: PathBuf,
    dir: PathBuf,
    /// Inputs run: the sentinel's MAC (no input can foresee it).
    inputs: u32,
    /// Frames read from the link.
    link_frames: Cell<u64>,
    /// Of them, ARP replies and neighbour advertisements: the responder's (C has no stack).
    link_answers: Cell<u64>,
}

/// The prefix of a process's scratch directory (its sockets), then its process id.
const SCRATCH: &str = "mlx5-fuzz-external-";

/// Removes the scratch directories of processes that are gone (a fuzzing process never drops
/// its rig, so never its directory).
fn sweep() {
    let tmp = std::env::temp_dir();
    for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH)) else {
            continue;
        };
        if !std::path::Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn mapped(ip: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10..12].fill(0xff);
    g[12..].copy_from_slice(&ip);
    g
}

impl Rig {
    fn new() -> Rig {
        let fabric = Fabric::new();
        let sim = SimDevice::new(Profile::connectx5().with_mac(MAC_C), Mode::Sync);
        fabric.attach(&sim).expect("attach");
        let dev: &'static Dev = Box::leak(Box::new(
            Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default())
                .expect("a fault-free bring-up"),
        ));
        dev.set_gid(1, Some(GidEntry::ipv4(IP_C, MAC_C)))
            .expect("GID 1");
        let cq: &'static Cq<'static, SimPlatform> =
            Box::leak(Box::new(dev.create_cq(256).expect("CQ")));
        let pd = dev.pd();
        let mr = dev.alloc_mr(pd, REGION, MrAccess::ALL).expect("MR");
        let cap = QpCap {
            max_send_wr: 8,
            max_recv_wr: RECVS,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let rc = dev
            .create_qp(pd, &QpInitAttr::new(QpType::Rc, cq, cq, cap))
            .expect("RC QP");
        let ud = dev
            .create_qp(pd, &QpInitAttr::new(QpType::Ud, cq, cq, cap))
            .expect("UD QP");
        sweep();
        let dir = std::env::temp_dir().join(format!("{SCRATCH}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let (ours, theirs) = (dir.join("port"), dir.join("link"));
        let link = UnixDatagram::bind(&theirs).expect("our end of the link");
        link.set_nonblocking(true).expect("non-blocking");
        let port = fabric
            .attach_unix_dgram(&ours, &theirs, true)
            .expect("the external port");
        Rig {
            _fabric: fabric,
            sim,
            dev,
            cq,
            mr,
            rc,
            ud,
            port,
            link,
            ours,
            dir,
            inputs: 0,
            link_frames: Cell::new(0),
            link_answers: Cell::new(0),
        }
    }

    /// Both QPs reset, connected again and given their receives; the CQ emptied.
    fn reset(&mut self) {
        let mr = &self.mr;
        for (k, q) in [&mut self.rc, &mut self.ud].into_iter().enumerate() {
            let reset = QpAttr {
                qp_state: Some(QpState::Reset),
                ..QpAttr::default()
            };
            q.modify(&reset, QpAttrMask::STATE).expect("to RESET");
            let peer = QpEndpoint {
                qpn: PEER_QPN,
                gid: mapped(PEER_IP),
                mac: PEER_MAC,
                psn: 0,
            };
            let opts = ConnectOpts {
                gid_index: 1,
                ..ConnectOpts::default()
            };
            q.connect(&peer, &opts).expect("connect");
            for i in 0..RECVS {
                let at = (k as u32 * RECVS + i) * RECV_BYTES;
                let sge = [Sge {
                    addr: mr.addr() + u64::from(at),
                    length: RECV_BYTES,
                    lkey: mr.lkey(),
                }];
                q.post_recv(&[RecvWr {
                    wr_id: u64::from(i),
                    sg_list: &sge,
                }])
                .expect("post_recv");
            }
        }
        self.drain_cq();
    }

    fn drain_cq(&self) {
        let mut wc = [Wc::default(); 16];
        for _ in 0..64 {
            if self.cq.poll(&mut wc).expect("CQ poll") == 0 {
                break;
            }
        }
    }

    /// The sentinel's MAC for this input.
    fn sentinel_mac(&self) -> [u8; 6] {
        let n = self.inputs.to_be_bytes();
        [0x52, 0x54, 0xfe, n[1], n[2], n[3]]
    }

    /// Reads what the port sent to the link; whether the sentinel's answer was among it.
    fn drain_link(&self) -> bool {
        let mac = self.sentinel_mac();
        let mut buf = vec![0u8; 70 * 1024];
        let mut answered = false;
        while let Ok(n) = self.link.recv(&mut buf) {
            self.link_frames.set(self.link_frames.get() + 1);
            let f = &buf[..n];
            let arp_reply = n >= 22 && f[12..14] == [8, 6] && f[20..22] == [0, 2];
            let advert = n >= 55 && f[12..14] == [0x86, 0xdd] && f[20] == 58 && f[54] == 136;
            if arp_reply || advert {
                self.link_answers.set(self.link_answers.get() + 1);
            }
            answered |= n >= 42
                && f[..6] == mac
                && f[12..14] == [8, 6]
                && f[20..22] == [0, 2]
                && f[28..32] == IP_C
                && f[38..42] == SENTINEL_IP;
        }
        answered
    }

    /// Writes `f` to the port; while its socket is full, reads ours (the port's reader may be
    /// waiting to write to it).
    fn write(&self, f: &[u8], answered: &mut bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self.link.send_to(f, &self.ours) {
                Ok(_) => return,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    *answered |= self.drain_link();
                    assert!(Instant::now() < deadline, "the port stopped reading");
                    std::thread::yield_now();
                }
                Err(e) => panic!("writing a frame of {} bytes to the port: {e}", f.len()),
            }
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

thread_local! {
    /// Never dropped: at the process's exit, tearing the rig down from a thread-local's
    /// destructor would meet other thread-locals already gone ([`finish`] drops it).
    static RIG: &'static RefCell<Option<Rig>> = Box::leak(Box::new(RefCell::new(None)));
}

/// The sentinel: an ARP request for C's address, from a host of its own (`mac`).
fn sentinel(mac: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&SENTINEL_IP);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&IP_C);
    f.resize(60, 0);
    f
}

/// Where the BTH of a RoCE frame begins, and whether it is RoCE v1.
fn bth(f: &[u8]) -> Option<usize> {
    let (l3, et) = l2(f)?;
    let at = match et {
        0x8915 => l3 + 40,
        0x86dd if f.get(l3 + 6) == Some(&17) => l3 + 48,
        0x0800 if f.get(l3 + 9) == Some(&17) => l3 + usize::from(f.get(l3)? & 0xf) * 4 + 8,
        _ => return None,
    };
    (f.len() >= at + 12).then_some(at)
}

/// Aims `f` at C's QPs and region as `ctl` asks.
fn aim(f: &mut [u8], ctl: u8, rig: &Rig) {
    if ctl & DST_C != 0 && f.len() >= 6 {
        f[..6].copy_from_slice(&MAC_C);
    }
    let Some(b) = bth(f) else { return };
    let qpn = match ctl & (TO_RC | TO_UD) {
        TO_RC => Some(rig.rc.qpn()),
        TO_UD => Some(rig.ud.qpn()),
        0 => None,
        _ => Some(1),
    };
    if let Some(q) = qpn {
        f[b + 5..b + 8].copy_from_slice(&q.to_be_bytes()[1..]);
    }
    // RDMA WRITE FIRST/ONLY (with immediate), READ REQUEST: a RETH after the BTH; the two
    // atomics: an AtomicETH (address and rkey first, as in a RETH).
    let op = f[b] & 0x1f;
    if ctl & RKEY != 0 && matches!(op, 0x06 | 0x0a | 0x0b | 0x0c | 0x13 | 0x14) {
        let at = b + 12;
        if f.len() >= at + 12 {
            let va = rig.mr.addr() + REMOTE_AT as u64;
            f[at..at + 8].copy_from_slice(&va.to_be_bytes());
            f[at + 8..at + 12].copy_from_slice(&rig.mr.rkey().to_be_bytes());
        }
    }
}

/// What the port did with one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Frames the port took from the link (the sentinel not counted).
    pub taken: u64,
    /// ARP replies and neighbour advertisements the responder sent (the sentinel's not
    /// counted).
    pub answered: u64,
    /// Frames C's device took off the wire.
    pub nic_frames: u64,
    /// Of them, RoCE packets the transport dropped, refused as malformed or for their ICRC.
    pub nic_dropped: u64,
    /// Work completions on C's QPs.
    pub completions: u64,
    /// Frames the port put on the link (the sentinel's answer not counted): the responder's
    /// answers, and what C sent (acknowledgements, read responses, broadcasts).
    pub sent: u64,
    /// Neighbours the port holds now.
    pub neighbours: usize,
}

/// Runs one input (see the module documentation).
pub fn run(data: &[u8]) -> Summary {
    frames::with_rig(&RIG, Rig::new, |rig| run_on(rig, data))
}

/// Drops this thread's rig (a test's end).
pub fn finish() {
    frames::drop_rig(&RIG);
}

fn run_on(rig: &mut Rig, data: &[u8]) -> Summary {
    use std::sync::atomic::Ordering::Relaxed;
    rig.reset();
    rig.inputs = rig.inputs.wrapping_add(1);
    let c = rig.port.counters();
    let rx0 = c.rx_frames.load(Relaxed);
    let nic0 = rig.sim.datapath_counters();
    let (sent0, answers0) = (rig.link_frames.get(), rig.link_answers.get());
    let mut written = 0u64;
    let mut answered = false;
    for mut r in frames::records(data, PAD_UNIT, FRAME_MAX) {
        aim(&mut r.frame, r.ctl, rig);
        frames::fix(&mut r.frame, r.ctl);
        rig.write(&r.frame, &mut answered);
        if r.frame.len() >= 14 {
            written += 1;
        }
    }
    rig.write(&sentinel(rig.sentinel_mac()), &mut answered);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !answered {
        assert!(
            Instant::now() < deadline,
            "the port did not answer the sentinel: {:?}",
            rig.port.counters()
        );
        std::thread::sleep(Duration::from_micros(50));
        answered = rig.drain_link();
    }
    let c = rig.port.counters();
    let taken = c.rx_frames.load(Relaxed) - rx0 - 1;
    assert_eq!(taken, written, "the port took every frame: {c:?}");
    let neighbours = rig.port.neighbours_held();
    assert!(
        neighbours <= MAX_NEIGHBOURS,
        "{neighbours} neighbours held, over {MAX_NEIGHBOURS}"
    );
    assert!(
        rig.sim.dma_faults().is_empty(),
        "{:?}",
        rig.sim.dma_faults()
    );
    let nic = rig.sim.datapath_counters();
    let mut completions = 0;
    let mut wc = [Wc::default(); 16];
    for _ in 0..64 {
        match rig.cq.poll(&mut wc).expect("CQ poll") {
            0 => break,
            n => completions += n as u64,
        }
    }
    let _ = rig.dev;
    Summary {
        taken,
        answered: rig.link_answers.get() - answers0 - 1,
        nic_frames: nic.rx_frames - nic0.rx_frames,
        nic_dropped: (nic.rx_dropped + nic.rx_malformed + nic.rx_icrc_errors)
            - (nic0.rx_dropped + nic0.rx_malformed + nic0.rx_icrc_errors),
        completions,
        sent: rig.link_frames.get() - sent0 - 1,
        neighbours,
    }
}
