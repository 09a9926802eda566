//! A hostile vfio-user client against the server (issue #26): messages that lie about their
//! sizes, counts past every limit, offsets and ranges that wrap past 2^64, DMA maps of memory the
//! client can take back. The server must answer each with an error and go on serving — never
//! panic, allocate what the client names, flood the log, or fault (SIGBUS) on a DMA access.
//!
//! The DMA cases run the server in a child process (this test binary, running just that test):
//! a fault there kills the child, which the test reports, not the test binary.

mod raw;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mlx5_sim::{Mode, Profile, SimDevice};
use mlx5_vfio_user::Cx5;
use raw::*;

/// Allocations above this fail (and abort the test binary): the server must never allocate a
/// size its client chose.
const ALLOC_LIMIT: usize = 256 << 20;

struct Guard;

// SAFETY: every call goes to the system allocator unchanged, except that too large a request
// fails (a null pointer, which `GlobalAlloc` allows).
unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOC_LIMIT {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOC_LIMIT {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > ALLOC_LIMIT {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GUARD: Guard = Guard;

/// Warning and error lines logged, by the name of the thread that logged them.
static LINES: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

struct CountLines;

impl log::Log for CountLines {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if r.level() <= log::Level::Warn {
            let name = std::thread::current().name().unwrap_or("").to_string();
            *LINES.lock().unwrap().entry(name).or_default() += 1;
        }
    }
    fn flush(&self) {}
}

fn lines_of(thread: &str) -> u64 {
    LINES.lock().unwrap().get(thread).copied().unwrap_or(0)
}

/// A server thread named `vfu-NAME` on a fresh socket, and a raw client of it.
fn server(name: &str) -> (Raw, JoinHandle<Result<(), vfio_user::Error>>) {
    static LOGGER: Once = Once::new();
    LOGGER.call_once(|| {
        log::set_logger(&CountLines).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
    });
    let path = socket(name);
    let p = path.clone();
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let h = std::thread::Builder::new()
        .name(format!("vfu-{name}"))
        .spawn(move || Cx5::new(sim).serve(&p))
        .unwrap();
    (Raw::connect(&path), h)
}

/// Disconnects and checks the server thread ended without a panic.
fn finish(c: Raw, h: JoinHandle<Result<(), vfio_user::Error>>) {
    drop(c);
    let r = h.join().expect("the server thread panicked");
    assert!(r.is_ok(), "the server ended with {r:?}");
}

/// Asserts `r` is an error reply with an errno.
fn refused(r: io::Result<Reply>, what: &str) {
    let r = r.unwrap_or_else(|e| panic!("{what}: no reply ({e}): the server is gone"));
    assert!(r.is_error(), "{what}: accepted: {r:?}");
    assert_ne!(r.error, 0, "{what}: an error reply without an errno: {r:?}");
}

fn answers(c: &mut Raw, after: &str) {
    match c.ids() {
        Ok(ids) => assert_eq!(ids, IDS, "after {after}"),
        Err(e) => panic!("after {after}, the server no longer answers: {e}"),
    }
}

// --- Row 2: VERSION ---------------------------------------------------------------------

#[test]
fn a_version_shorter_than_a_version_message_is_refused() {
    let (mut c, h) = server("ver-short");
    // A header that claims to be all of the message: no major, minor or capabilities.
    c.send_sized(VERSION, HEADER as u32, &[], None).unwrap();
    refused(c.reply(), "VERSION of 16 bytes");
    // One shorter than its own header.
    c.send_sized(VERSION, 8, &[], None).unwrap();
    refused(c.reply(), "VERSION of 8 bytes");
    let r = c.version().expect("a proper VERSION after them");
    assert!(!r.is_error(), "{r:?}");
    answers(&mut c, "short VERSIONs");
    finish(c, h);
}

#[test]
fn a_version_without_its_nul_is_refused() {
    let (mut c, h) = server("ver-nul");
    let mut body = vec![0, 0, 1, 0];
    body.extend_from_slice(CAPS);
    refused(c.call(VERSION, &body, None), "VERSION JSON without its NUL");
    // A NUL inside the JSON.
    let mut inner = body.clone();
    inner[10] = 0;
    inner.push(0);
    refused(
        c.call(VERSION, &inner, None),
        "VERSION JSON with a NUL inside",
    );
    // No capabilities at all: the data is optional, the defaults apply.
    let r = c.call(VERSION, &[0, 0, 1, 0], None).unwrap();
    assert!(!r.is_error(), "VERSION without capabilities: {r:?}");
    answers(&mut c, "VERSIONs without NUL");
    finish(c, h);
}

#[test]
fn a_version_of_4_gib_allocates_nothing() {
    let (mut c, h) = server("ver-4g");
    c.send_sized(VERSION, u32::MAX, &[0, 0, 1, 0, b'{'], None)
        .unwrap();
    // The client never sends the rest: the server skips what came and answers at the end.
    c.s.shutdown(std::net::Shutdown::Write).unwrap();
    refused(c.reply(), "VERSION claiming 4 GiB");
    finish(c, h);
}

// --- Row 6: sizes and the log -------------------------------------------------------------

#[test]
fn a_region_read_over_the_transfer_limit_or_the_region_is_refused() {
    let (mut c, h) = server("read-limit");
    refused(c.read(BAR0, 0, 2 << 20), "REGION_READ of 2 MiB of BAR0");
    refused(
        c.read(CONFIG, 0, 512),
        "REGION_READ of 512 bytes of 256-byte config space",
    );
    let r = c.read(BAR0, 0, 1 << 20).unwrap();
    assert!(!r.is_error(), "1 MiB of BAR0 is within both: {:?}", r.flags);
    assert_eq!(r.body.len(), 16 + (1 << 20));
    answers(&mut c, "oversized reads");
    finish(c, h);
}

#[test]
fn a_region_write_over_the_limit_is_refused_and_its_payload_skipped() {
    let (mut c, h) = server("write-limit");
    let mut body = region_body(BAR0, 0, 2 << 20);
    body.resize(body.len() + (2 << 20), 0xa5);
    refused(c.call(REGION_WRITE, &body, None), "REGION_WRITE of 2 MiB");
    // The 2 MiB were skipped, not parsed as messages: the next one is answered.
    answers(&mut c, "an oversized write");
    finish(c, h);
}

#[test]
fn region_accesses_of_4_gib_allocate_nothing() {
    let (mut c, h) = server("4g");
    refused(c.read(BAR0, 0, u32::MAX), "REGION_READ of 4 GiB");
    refused(
        c.read(CONFIG, 0, u32::MAX),
        "REGION_READ of 4 GiB of config space",
    );
    let mut body = region_body(BAR0, 0, u32::MAX);
    body.extend_from_slice(&[0; 64]);
    c.send(REGION_WRITE, &body, None).unwrap();
    c.s.shutdown(std::net::Shutdown::Write).unwrap();
    refused(c.reply(), "REGION_WRITE of 4 GiB");
    finish(c, h);
}

#[test]
fn reads_past_the_bar_log_a_bounded_number_of_lines() {
    let (mut c, h) = server("flood");
    let bar = SimDevice::new(Profile::connectx5(), Mode::Sync).bar_size();
    let t = Instant::now();
    let mut replies = vec![c.read(BAR0, bar - 4, 1 << 20)];
    for _ in 0..1000 {
        replies.push(c.read(BAR0, bar, 4));
    }
    let n = lines_of("vfu-flood");
    let secs = t.elapsed().as_secs() + 1;
    // A burst and a summary per second, from the server and the protocol layer each.
    assert!(
        n <= 25 * secs,
        "1001 reads past the BAR in {secs} s logged {n} lines"
    );
    for r in replies {
        refused(r, "a read past BAR0");
    }
    finish(c, h);
}

// --- Row 11: arithmetic that wraps ------------------------------------------------------

#[test]
fn a_dma_unmap_range_that_wraps_is_refused() {
    let (mut c, h) = server("unmap-wrap");
    let mem = memfd(1 << 16, true);
    let r = c
        .call(DMA_MAP, &dma_map_body(0, 0x4000_0000, 1 << 16), Some(&mem))
        .unwrap();
    assert!(!r.is_error(), "a proper map: {r:?}");
    // One near the top of the IOVA space, inside the range unmapped next.
    const HIGH: u64 = 0xffff_ffff_fff0_0000;
    let r = c
        .call(DMA_MAP, &dma_map_body(0, HIGH, 4096), Some(&mem))
        .unwrap();
    assert!(!r.is_error(), "a proper map at {HIGH:#x}: {r:?}");
    refused(
        c.call(DMA_UNMAP, &dma_unmap_body(0, HIGH, 0x20_0000), None),
        "DMA_UNMAP of a range that wraps, over a live map",
    );
    refused(
        c.call(
            DMA_UNMAP,
            &dma_unmap_body(0, u64::MAX - 0xfff, 0x2000),
            None,
        ),
        "DMA_UNMAP of a range that wraps",
    );
    let r = c
        .call(DMA_UNMAP, &dma_unmap_body(0, HIGH, 4096), None)
        .unwrap();
    assert!(!r.is_error(), "the proper unmap at {HIGH:#x}: {r:?}");
    refused(
        c.call(
            DMA_MAP,
            &dma_map_body(0, u64::MAX - 0xfff, 0x2000),
            Some(&mem),
        ),
        "DMA_MAP of a range that wraps",
    );
    refused(
        c.call(
            DMA_MAP,
            &dma_map_body(u64::MAX - 0xfff, 0x8000_0000, 0x2000),
            Some(&mem),
        ),
        "DMA_MAP at a file offset that wraps",
    );
    let r = c
        .call(DMA_UNMAP, &dma_unmap_body(0, 0x4000_0000, 1 << 16), None)
        .unwrap();
    assert!(!r.is_error(), "the proper unmap: {r:?}");
    answers(&mut c, "wrapping DMA ranges");
    finish(c, h);
}

#[test]
fn a_bar_access_at_an_offset_that_wraps_is_refused() {
    let (mut c, h) = server("bar-wrap");
    refused(c.read(BAR0, u64::MAX - 1, 4), "BAR0 read at 2^64 - 2");
    refused(c.read(BAR0, u64::MAX - 3, 8), "BAR0 read at 2^64 - 4");
    refused(
        c.write(BAR0, u64::MAX - 3, &[0; 8]),
        "BAR0 write at 2^64 - 4",
    );
    let r = c.read(CONFIG, u64::MAX - 1, 4).unwrap();
    assert!(
        !r.is_error(),
        "config space past its end reads as zeros: {r:?}"
    );
    answers(&mut c, "wrapping BAR offsets");
    finish(c, h);
}

#[test]
fn dma_maps_past_the_limit_are_refused() {
    let (mut c, h) = server("map-limit");
    let mem = memfd(4096, true);
    let limit = mlx5_vfio_user::MAX_DMA_MAPS as u64;
    for i in 0..limit {
        let r = c
            .call(
                DMA_MAP,
                &dma_map_body(0, 0x1_0000_0000 + i * 4096, 4096),
                Some(&mem),
            )
            .unwrap();
        assert!(!r.is_error(), "map {i} of {limit}: {r:?}");
    }
    let past = 0x1_0000_0000 + limit * 4096;
    refused(
        c.call(DMA_MAP, &dma_map_body(0, past, 4096), Some(&mem)),
        "one map past MAX_DMA_MAPS",
    );
    let r = c
        .call(DMA_UNMAP, &dma_unmap_body(0, 0x1_0000_0000, 4096), None)
        .unwrap();
    assert!(!r.is_error(), "{r:?}");
    let r = c
        .call(DMA_MAP, &dma_map_body(0, past, 4096), Some(&mem))
        .unwrap();
    assert!(!r.is_error(), "a map once one is gone: {r:?}");
    answers(&mut c, "maps past the limit");
    finish(c, h);
}

// --- Row 1: DMA into memory the client can take back --------------------------------------

/// Set in the child: the socket it serves on.
const CHILD: &str = "MLX5_VFU_HOSTILE_SERVER";

/// In the child process, serves one client on the socket the parent named; true there.
fn serve_if_child() -> bool {
    let Some(p) = std::env::var_os(CHILD) else {
        return false;
    };
    let sim = SimDevice::new(Profile::connectx5(), Mode::Threaded);
    let r = Cx5::new(sim).serve(Path::new(&p));
    eprintln!("the child's server ended: {r:?}");
    true
}

/// A server in a child process (this binary, running only `test`), and a client of it.
fn child_server(test: &str, name: &str) -> (Child, Raw, PathBuf) {
    let path = socket(name);
    let child = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let c = Raw::connect(&path);
    (child, c, path)
}

/// Asserts the child still serves: it answers a configuration read.
fn child_answers(child: &mut Child, c: &mut Raw, after: &str) {
    match c.ids() {
        Ok(ids) => assert_eq!(ids, IDS),
        Err(e) => {
            let status = child.wait().unwrap();
            panic!("after {after}, the server process is gone ({e}): {status}");
        }
    }
}

/// Points the command queue at `iova` and rings its slot 0 (once the firmware has
/// initialized): the device reads the command entry there.
fn ring_command_queue(c: &mut Raw, iova: u64) -> io::Result<()> {
    let t = Instant::now();
    while c.bar_read32(0x1fc)? & 0x8000_0000 != 0 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the firmware initializes"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    c.bar_write32(0x10, (iova >> 32) as u32)?;
    c.bar_write32(0x14, iova as u32 & !0xfff)?;
    c.bar_write32(0x18, 1)?;
    // The device thread reads the entry; give it time to.
    std::thread::sleep(Duration::from_millis(300));
    Ok(())
}

fn end_child(mut child: Child, c: Raw, path: &Path) {
    drop(c);
    let status = child.wait().unwrap();
    let _ = std::fs::remove_file(path);
    assert!(status.success(), "the server process ended with {status}");
}

#[test]
fn a_dma_map_past_the_files_end_then_a_doorbell_leaves_the_server_answering() {
    if serve_if_child() {
        return;
    }
    let (mut child, mut c, path) = child_server(
        "a_dma_map_past_the_files_end_then_a_doorbell_leaves_the_server_answering",
        "past-end",
    );
    // 2 MiB mapped over a 4 KiB file, the command queue 1 MiB in.
    let mem = memfd(4096, true);
    let map = c.call(DMA_MAP, &dma_map_body(0, 0x1000_0000, 2 << 20), Some(&mem));
    let _ = ring_command_queue(&mut c, 0x1010_0000);
    child_answers(&mut child, &mut c, "a command queue past the file's end");
    refused(map, "DMA_MAP of 2 MiB over a 4 KiB file");
    end_child(child, c, &path);
}

#[test]
fn a_memfd_truncated_after_its_map_leaves_the_server_answering() {
    if serve_if_child() {
        return;
    }
    let (mut child, mut c, path) = child_server(
        "a_memfd_truncated_after_its_map_leaves_the_server_answering",
        "truncated",
    );
    let mem = memfd(1 << 16, true);
    let r = c
        .call(DMA_MAP, &dma_map_body(0, 0x1000_0000, 1 << 16), Some(&mem))
        .unwrap();
    assert!(!r.is_error(), "a proper map of a sealable memfd: {r:?}");
    // The client takes most of it back, then points the command queue there.
    let truncated = mem.set_len(4096);
    let _ = ring_command_queue(&mut c, 0x1000_8000);
    child_answers(&mut child, &mut c, "a command queue in a truncated memfd");
    assert!(
        truncated.is_err(),
        "the mapped memfd could be truncated: the server did not seal it"
    );
    end_child(child, c, &path);
}

#[test]
fn a_memfd_that_cannot_be_sealed_is_refused() {
    if serve_if_child() {
        return;
    }
    let (mut child, mut c, path) =
        child_server("a_memfd_that_cannot_be_sealed_is_refused", "unsealable");
    let mem = memfd(1 << 16, false);
    let map = c.call(DMA_MAP, &dma_map_body(0, 0x1000_0000, 1 << 16), Some(&mem));
    mem.set_len(4096).unwrap();
    let _ = ring_command_queue(&mut c, 0x1000_8000);
    child_answers(
        &mut child,
        &mut c,
        "a command queue in an unsealable, truncated memfd",
    );
    refused(map, "DMA_MAP of a memfd that cannot be sealed");
    end_child(child, c, &path);
}
