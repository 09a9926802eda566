//! `mlx5ctl sim --vfio-user SOCKET [--vfio-user SOCKET2 …] [--sim PROFILE]`: simulated
//! ConnectX-5s served to a QEMU guest over vfio-user (`-device vfio-user-pci,socket=SOCKET`,
//! with guest RAM shared: `-object memory-backend-memfd,id=m,share=on,size=…`
//! `-machine q35,memory-backend=m`). Every device of one invocation is on one simulated RoCE v2
//! fabric, each with its own MAC, so the guest's drivers can move traffic between them. Each
//! socket serves one client, in a thread of its own, until it disconnects; the command ends when
//! all have.

use std::path::PathBuf;

use mlx5_sim::{Fabric, Mode, SimDevice};
use mlx5_vfio_user::{Cx5, Life};

use crate::target;

/// Arguments of `mlx5ctl sim`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A UNIX socket to serve one simulated NIC on (created; must not exist). Give it once per
    /// NIC: all are on one fabric.
    #[arg(long = "vfio-user", value_name = "SOCKET", required = true)]
    pub sockets: Vec<PathBuf>,
    /// The simulated device: a built-in profile name or a caps JSON file.
    #[arg(long, value_name = "PROFILE", default_value = "cx5")]
    pub sim: String,
    /// When a client has gone, write its device's command trace (every command the guest's
    /// driver sent, with the simulator's status and syndrome) as JSON lines to FILE; with
    /// several NICs, FILE gets `.N` appended for NIC N > 0.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write every frame of the simulated wire to FILE as pcap, as it goes (Wireshark
    /// decodes RoCE v1 and v2).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// How long (µs) each NIC's thread keeps polling for work after its last item before it
    /// sleeps. 0, the default, never polls: a QEMU guest under TCG needs the host's CPUs more
    /// than the NIC needs the wake-ups saved.
    #[arg(long, value_name = "US", default_value_t = 0)]
    pub busy_poll_us: u64,
    /// Serve each NIC as a ConnectX-5 virtual function (PCI 15b3:1018, 11 MSI-X vectors, no
    /// e-switch), as a cloud guest or a VM with a passed-through VF gets it; its hypervisor
    /// side (the PF and its e-switch) is the simulator's.
    #[arg(long)]
    pub vf: bool,
    /// With --vf: the hypervisor assigned the VFs no MAC (`permanent_address` reads zero;
    /// Linux's mlx5e then picks a random one and programs it into the vport).
    #[arg(long, requires = "vf")]
    pub vf_mac_unset: bool,
    /// A UNIX socket (created) on which the hypervisor's orders are taken while the guest runs:
    /// `<nic> link down|up|auto`, `<nic> mac <mac>|unset`, `<nic> flr now` (one a line; see
    /// `simctl`).
    #[arg(long, value_name = "SOCKET")]
    pub control: Option<PathBuf>,
}

/// Serves the NICs until every client has gone.
pub fn run(a: &Args) -> Result<(), String> {
    let mut profile = target::profile(&a.sim)?;
    if a.vf {
        profile = profile.as_vf(a.vf_mac_unset);
    }
    let fabric = Fabric::new();
    if let Some(p) = &a.pcap {
        let f = std::fs::File::create(p).map_err(|e| format!("pcap {}: {e}", p.display()))?;
        fabric
            .pcap_to(Box::new(f))
            .map_err(|e| format!("pcap {}: {e}", p.display()))?;
    }
    let mut threads = Vec::new();
    let mut devs = Vec::new();
    for (i, socket) in a.sockets.iter().enumerate() {
        // Locally administered MACs 02:c5:5a:00:01:<i>, distinct on the fabric.
        let mac = [0x02, 0xc5, 0x5a, 0x00, 0x01, i as u8];
        let dev = SimDevice::new(profile.clone().with_mac(mac), Mode::Threaded);
        dev.set_busy_poll(std::time::Duration::from_micros(a.busy_poll_us));
        devs.push(dev.clone());
        fabric
            .attach(&dev)
            .map_err(|e| format!("NIC {i}: fabric: {e}"))?;
        let socket = socket.clone();
        let trace = a.trace.as_ref().map(|t| {
            if i == 0 {
                t.clone()
            } else {
                PathBuf::from(format!("{}.{i}", t.display()))
            }
        });
        eprintln!(
            "mlx5ctl sim: ConnectX-5{} #{i} ({}) on {}",
            if a.vf { " VF" } else { "" },
            profile.name(),
            socket.display()
        );
        // The firmware's accounts at the end of each life (each reset, and the client's
        // departure): what a driver left behind, before a reset wipes it. The command trace
        // of every life is appended to the file.
        let mut trace_err = None;
        let errs = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let seen = errs.clone();
        if let Some(t) = &trace {
            if let Err(e) = std::fs::File::create(t) {
                trace_err = Some(format!("trace {}: {e}", t.display()));
            }
        }
        let hook = Box::new(move |life: &Life<'_>| {
            eprintln!(
                "mlx5ctl sim: NIC #{i} life {} ({}): {}",
                life.index,
                life.end,
                accounts(life)
            );
            if let Some(t) = &trace {
                let written = std::fs::OpenOptions::new()
                    .append(true)
                    .open(t)
                    .and_then(|mut f| life.sim.write_trace_jsonl(&mut f));
                if let Err(e) = written {
                    seen.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(format!("trace {}: {e}", t.display()));
                }
            }
        });
        threads.push(std::thread::spawn(move || {
            let served = Cx5::new(dev)
                .on_life_end(hook)
                .serve(&socket)
                .map_err(|e| format!("{}: {e}", socket.display()));
            let mut errs = errs.lock().unwrap_or_else(|e| e.into_inner()).clone();
            errs.extend(trace_err);
            served.and(if errs.is_empty() {
                Ok(())
            } else {
                Err(errs.join("; "))
            })
        }));
    }
    if let Some(c) = &a.control {
        crate::simctl::serve(c, devs)?;
        eprintln!("mlx5ctl sim: the hypervisor's orders on {}", c.display());
    }
    let mut errors = Vec::new();
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(_) => errors.push("a server thread panicked".to_string()),
        }
    }
    if let Some(p) = &a.pcap {
        match fabric.pcap_finish() {
            Ok(n) => eprintln!("mlx5ctl sim: {n} frames written to {}", p.display()),
            Err(e) => errors.push(format!("pcap {}: {e}", p.display())),
        }
        let c = fabric.counters();
        eprintln!("mlx5ctl sim: the wire: {c:?}");
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// One life's accounts: the HCA state, pages held, live objects by kind, DMA faults by kind, and
/// the client's DMA maps.
fn accounts(life: &Life<'_>) -> String {
    let mut kinds = std::collections::BTreeMap::new();
    for (k, _) in life.sim.live_objects() {
        *kinds.entry(format!("{k:?}")).or_insert(0usize) += 1;
    }
    let mut faults = std::collections::BTreeMap::new();
    let mut first = std::collections::BTreeMap::new();
    for f in life.sim.dma_faults() {
        let kind = format!("{:?}", f.kind);
        *faults.entry(kind.clone()).or_insert(0usize) += 1;
        first
            .entry(kind)
            .or_insert_with(|| format!("{:#x} ({})", f.iova, f.what));
    }
    let pg = life.sim.page_stats();
    format!(
        "accounts: state {:?}, pages held {}, live objects {:?}, DMA faults {:?}; DMA maps {} made, {} removed, {} live; first fault of each kind {:?}; page requests {} ({} pages), offers {} ({} pages), pages given {} taken {}",
        life.sim.hca_state(),
        life.sim.pages_held(),
        kinds,
        faults,
        life.dma_maps,
        life.dma_unmaps,
        life.live_maps,
        first,
        pg.requests,
        pg.pages_requested,
        pg.reclaims,
        pg.pages_offered,
        pg.pages_given,
        pg.pages_taken
    )
}
