//! The body of the fuzz target `vfio_user_server` (tests/fuzz/fuzz_targets, which includes this
//! file and `mod.rs` by path), and of `tests/fuzz_corpus.rs`, which replays the committed corpus
//! through it in every `cargo test`: any bytes a client may send, served by [`Cx5::serve`] in
//! this process.
//!
//! The input: byte 0 chooses the memory the client shares — bits 0-3 the pages of a memfd (0:
//! none), bit 4 a memfd that cannot be sealed, bit 5 the memfd truncated to nothing right after
//! the first DMA_MAP is sent. The rest is the byte stream, cut where each header says its
//! message ends; a DMA_MAP or SET_IRQS carries the memfd. The server must answer or refuse each,
//! then end when the client does: no panic (caught or not), no fault, nothing past its limits.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use mlx5_sim::{Mode, Profile, SimDevice};
use mlx5_vfio_user::{contained_panics, Cx5};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use crate::raw::{self, DMA_MAP, HEADER, SET_IRQS};

/// Serves `data` (see the module) to a fresh device; panics on what the server must not do.
pub fn serve_messages(data: &[u8]) {
    static N: AtomicU64 = AtomicU64::new(0);
    let Some((&memory, mut rest)) = data.split_first() else {
        return;
    };
    let pages = u64::from(memory & 0x0f);
    let mem = (pages > 0).then(|| raw::memfd(pages * 4096, memory & 0x10 == 0));
    let mut truncate = memory & 0x20 != 0;

    // Past the firmware's initialization (device time is virtual), so that a doorbell reaches
    // the command interface.
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    for _ in 0..100_000 {
        if sim.bar_read32(0x1fc).get() & 0x8000_0000 == 0 {
            break;
        }
        sim.relax();
    }
    let path = raw::socket(&format!("fuzz-{}", N.fetch_add(1, Ordering::Relaxed)));
    let panics = contained_panics();
    let p = path.clone();
    let server = std::thread::spawn(move || Cx5::new(sim).serve(&p));
    let s = raw::connect(&path);
    let mut replies = s.try_clone().unwrap();
    let reader = std::thread::spawn(move || io::copy(&mut replies, &mut io::sink()));

    while !rest.is_empty() {
        let claimed = match rest.get(4..8) {
            Some(b) => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize,
            None => rest.len(),
        };
        let (chunk, tail) = rest.split_at(claimed.clamp(HEADER.min(rest.len()), rest.len()));
        rest = tail;
        let command = chunk
            .get(2..4)
            .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]));
        let fd = mem
            .as_ref()
            .filter(|_| command == DMA_MAP || command == SET_IRQS)
            .map(|m| m.as_raw_fd());
        // sendmsg with MSG_NOSIGNAL: a server that has closed the connection is an error here,
        // not a SIGPIPE.
        let mut sent = 0;
        while sent < chunk.len() {
            let fds: &[i32] = match fd {
                Some(ref fd) if sent == 0 => std::slice::from_ref(fd),
                _ => &[],
            };
            match s.send_with_fds(&[&chunk[sent..]], fds) {
                Ok(n) if n > 0 => sent += n,
                _ => break,
            }
        }
        if sent < chunk.len() {
            break;
        }
        if truncate && command == DMA_MAP {
            if let Some(m) = &mem {
                // Refused once the server has sealed it; else the server must refuse the map.
                let _ = m.set_len(0);
            }
            truncate = false;
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = reader.join().expect("the reply reader panicked");
    let served = server.join().expect("the server thread panicked");
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        contained_panics(),
        panics,
        "serving the input panicked (caught, the connection ended: {served:?})"
    );
}
