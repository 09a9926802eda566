//! The attacker's end of the external port: a unix datagram socket (as QEMU's `-netdev dgram`
//! would have), a thread that keeps reading what the port sends so that neither side ever
//! blocks on the other (the kernel queues 10 datagrams by default), fences, and a model of the
//! port's neighbour table.

use std::collections::{HashMap, VecDeque};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::common::wire::{self, ETHERTYPE_ARP};
use super::{ATTACKER_MAC, IP_A};
use mlx5::cm::mapped;
use mlx5::sim::{ExternalPort, Fabric, MAX_NEIGHBOURS};

/// What the port's neighbour table must hold: the same first-learned, first-out rule, applied
/// to every address the attacker announced.
#[derive(Default)]
pub struct Neighbours {
    map: HashMap<[u8; 16], [u8; 6]>,
    order: VecDeque<[u8; 16]>,
    pub evicted: u64,
    pub announced: u64,
    pub hwm: usize,
}

impl Neighbours {
    pub fn learn(&mut self, addr: [u8; 16], mac: [u8; 6]) {
        self.announced += 1;
        if let Some(m) = self.map.get_mut(&addr) {
            *m = mac;
            return;
        }
        while self.map.len() >= MAX_NEIGHBOURS {
            let old = self.order.pop_front().expect("an entry to evict");
            self.map.remove(&old);
            self.evicted += 1;
        }
        self.map.insert(addr, mac);
        self.order.push_back(addr);
        self.hwm = self.hwm.max(self.map.len());
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// The port's counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Snap {
    pub rx: u64,
    pub runts: u64,
    pub tx: u64,
    pub answered: u64,
    pub evicted: u64,
}

/// The attacker's link to the fabric.
pub struct Ext {
    pub port: ExternalPort,
    sock: UnixDatagram,
    ours: PathBuf,
    dir: PathBuf,
    from_port: mpsc::Receiver<Vec<u8>>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    fences: u32,
    /// Frames written (runts, shorter than an Ethernet header, among them), and frames the
    /// port sent back.
    pub sent: u64,
    pub runts: u64,
    pub back: u64,
    /// Frames the responder must have answered (ARP and neighbour requests for the NICs'
    /// addresses, fences included).
    pub answered: u64,
    pub model: Neighbours,
}

impl Ext {
    pub fn new(fabric: &Fabric) -> Ext {
        let dir = std::env::temp_dir().join(format!("mlx5-hostile-peer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (ours, theirs) = (dir.join("port"), dir.join("attacker"));
        let sock = UnixDatagram::bind(&theirs).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let port = fabric.attach_unix_dgram(&ours, &theirs, true).unwrap();
        let (tx, from_port) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (sock, stop) = (sock.try_clone().unwrap(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Relaxed) {
                    match sock.recv(&mut buf) {
                        Ok(n) => {
                            if tx.send(buf[..n].to_vec()).is_err() {
                                return;
                            }
                        }
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock
                                    | std::io::ErrorKind::TimedOut
                                    | std::io::ErrorKind::Interrupted
                            ) => {}
                        Err(e) => panic!("the attacker's socket: {e}"),
                    }
                }
            })
        };
        Ext {
            port,
            sock,
            ours,
            dir,
            from_port,
            stop,
            reader: Some(reader),
            fences: 0,
            sent: 0,
            runts: 0,
            back: 0,
            answered: 0,
            model: Neighbours::default(),
        }
    }

    /// Writes one frame into the port (waiting while the port's queue is full); `answered`:
    /// the responder answers it.
    pub fn send(&mut self, f: &[u8], answered: bool) {
        self.sent += 1;
        self.answered += u64::from(answered);
        if f.len() < wire::ETH {
            self.runts += 1;
        }
        loop {
            match self.sock.send_to(f, &self.ours) {
                Ok(_) => return,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::Interrupted
                        || e.raw_os_error() == Some(105) =>
                {
                    std::thread::sleep(Duration::from_micros(50));
                }
                Err(e) => panic!("writing into the port: {e}"),
            }
        }
    }

    /// An ARP request for A's address from a sender used once, then every frame the port sent
    /// back until the responder's reply to it: the port took every frame written before (one
    /// reader, in order) and the fabric ran what each caused; then the port's counters are
    /// waited for (it counts a frame just after sending it). The frames, marker reply not
    /// among them.
    pub fn fence(&mut self) -> Vec<Vec<u8>> {
        self.fences += 1;
        let f = self.fences;
        let ip = [198, 18 + (f >> 16) as u8 % 2, (f >> 8) as u8, f as u8];
        self.model.learn(mapped(ip), ATTACKER_MAC);
        self.send(&wire::arp(1, ATTACKER_MAC, ip, [0; 6], IP_A), true);
        let mut out = Vec::new();
        loop {
            let r = self
                .from_port
                .recv_timeout(Duration::from_secs(20))
                .expect("the responder's answer to the fence");
            let marker = r.len() >= 42
                && r[12..14] == ETHERTYPE_ARP.to_be_bytes()
                && r[20..22] == [0, 2]
                && r[28..32] == IP_A
                && r[38..42] == ip;
            if marker {
                self.settle();
                return out;
            }
            self.back += 1;
            out.push(r);
        }
    }

    pub fn snap(&self) -> Snap {
        let c = self.port.counters();
        Snap {
            rx: c.rx_frames.load(Relaxed),
            runts: c.rx_runts.load(Relaxed),
            tx: c.tx_frames.load(Relaxed),
            answered: c.answered.load(Relaxed),
            evicted: c.neighbours_evicted.load(Relaxed),
        }
    }

    /// Waits until the port counted every answer it owes and every frame that reached us.
    fn settle(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let tx = self.back + u64::from(self.fences);
        loop {
            let s = self.snap();
            if s.answered >= self.answered && s.tx >= tx {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the port counted {s:?}, not {} answers and {tx} frames sent",
                self.answered
            );
            std::thread::yield_now();
        }
    }
}

impl Drop for Ext {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.reader.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
