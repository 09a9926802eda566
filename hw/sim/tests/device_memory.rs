//! Device memory (MEMIC) at the byte level, as Linux 6.1's mlx5_ib and rdma-core use it
//! (docs/fields.md "Device memory"): the capability page (128 KiB, as a real ConnectX-5
//! reports), ALLOC_MEMIC inside a page range Linux picks (the lowest free place; no room is
//! NO_RESOURCES, on which Linux tries its next page), the window written and read through BAR0
//! as memory, a MEMIC key (zero-based: an access at address `a` reaches the allocation's
//! `start + a`) used by a SEND and an RDMA WRITE, and DEALLOC_MEMIC refused while a key
//! reaches the memory.

mod common;

use common::cmd;
use common::datapath::{connected, fill, pair, read, Node, Seg};
use mlx5_ifc::consts::{cap_mode, cap_type, qp_st};
use mlx5_ifc::prm::memic::{AllocMemicIn, AllocMemicOut, DeallocMemicIn, DeviceMemCap as D};
use mlx5_ifc::prm::mr::{CreateMkeyIn, CreateMkeyOut, DestroyMkeyIn, Mkc};
use mlx5_ifc::{Be32, Layout, Opcode, View};
use mlx5_sim::{Mode, BAR_SIZE};

const SEND: u8 = 0x0a;
const WRITE: u8 = 0x08;
const SIGNALED: u8 = 0x08;
const WINDOW: u64 = 128 << 10;
const BASE: u64 = BAR_SIZE - WINDOW;

/// ALLOC_MEMIC of `size` bytes in the pages `[page, page + pages)` of the window, as mlx5_ib
/// asks (alignment 0): status, syndrome and the address.
fn alloc(n: &mut Node, page: u64, pages: u64, size: u64) -> ((u8, u32), u64) {
    let input = cmd::<AllocMemicIn>(Opcode::AllocMemic, 0, |v| {
        v.set(AllocMemicIn::RANGE_START_ADDR, BASE + page * 4096)
            .unwrap();
        v.set(AllocMemicIn::RANGE_SIZE, pages * 4096).unwrap();
        v.set(AllocMemicIn::MEMIC_SIZE, size).unwrap();
    });
    let (st, out) = n.fx.run(&input, AllocMemicOut::BYTES);
    let at = View::<AllocMemicOut>::new(&out)
        .unwrap()
        .get(AllocMemicOut::MEMIC_START_ADDR);
    (st, at)
}

fn dealloc(n: &mut Node, at: u64, size: u64) -> (u8, u32) {
    let input = cmd::<DeallocMemicIn>(Opcode::DeallocMemic, 0, |v| {
        v.set(DeallocMemicIn::MEMIC_START_ADDR, at).unwrap();
        v.set(DeallocMemicIn::MEMIC_SIZE, size).unwrap();
    });
    n.fx.run(&input, 0x10).0
}

/// A MEMIC key as `mlx5_ib_get_dm_mr` makes one: access mode 5, `lr` and the given remote
/// rights, `start_addr` the allocation's BAR0 offset, `len`.
fn dm_key(n: &mut Node, start: u64, len: u64) -> ((u8, u32), u32) {
    let pd = n.fx.pd;
    let input = cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        c.set(Mkc::ACCESS_MODE_1_0, 1).unwrap();
        c.set(Mkc::ACCESS_MODE_4_2, 1).unwrap();
        for f in [Mkc::LR, Mkc::LW, Mkc::RR, Mkc::RW] {
            c.set(f, 1).unwrap();
        }
        c.set(Mkc::QPN, 0xff_ffff).unwrap();
        c.set(Mkc::MKEY_7_0, 0x3c).unwrap();
        c.set(Mkc::PD, pd.into()).unwrap();
        c.set(Mkc::START_ADDR, start).unwrap();
        c.set(Mkc::LEN, len).unwrap();
    });
    let (st, out) = n.fx.run(&input, CreateMkeyOut::BYTES);
    let index = View::<CreateMkeyOut>::new(&out)
        .unwrap()
        .get32(CreateMkeyOut::MKEY_INDEX);
    (st, index << 8 | 0x3c)
}

#[test]
fn device_memory_is_allocated_written_through_the_bar_and_reached_by_keys() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let caps = a.fx.p.query_cap(cap_type::DEV_MEM, cap_mode::CUR);
    let c = View::<D>::new(&caps).unwrap();
    assert_eq!(
        [
            D::MEMIC,
            D::MEMIC_BAR_START_ADDR,
            D::MEMIC_BAR_SIZE,
            D::MAX_MEMIC_SIZE
        ]
        .map(|f| c.get(f)),
        [1, BASE, WINDOW, WINDOW],
        "128 KiB of device memory at the top of BAR0"
    );

    // Linux's search: 1024 bytes from page 0; a page's worth in the same page has no room
    // (NO_RESOURCES: Linux tries its next page); refusals.
    let ((st, at), size) = (alloc(&mut a, 0, 1, 1024), 1024);
    assert_eq!((st, at), ((0, 0), BASE));
    assert_eq!(alloc(&mut a, 0, 1, 4096).0, (0x0f, 0x5e0f_0002), "no room");
    let (st, next) = alloc(&mut a, 1, 1, 4096);
    assert_eq!((st, next), ((0, 0), BASE + 4096), "the next page");
    assert_eq!(alloc(&mut a, 2, 1, 0).0, (0x03, 0x5e03_006e), "size 0");
    assert_eq!(
        alloc(&mut a, 31, 2, 64).0,
        (0x03, 0x5e03_006e),
        "past the window"
    );
    assert_eq!(
        dealloc(&mut a, BASE + 64, 64),
        (0x03, 0x5e03_006f),
        "not handed out"
    );
    assert_eq!(dealloc(&mut a, next, 4096), (0, 0));

    // The host writes and reads it through the BAR: 4-byte stores (rdma-core's copies) and
    // other sizes a write-combining mapping may merge them into.
    let dev = a.dev();
    for k in 0..256u64 {
        dev.bar_write32(at + 4 * k, Be32::from_bytes([k as u8, 1, 2, 3]));
    }
    assert!(dev.bar_write_bytes(at + 1020, &[9, 9]));
    assert!(!dev.bar_write_bytes(BASE - 4, &[1; 4]), "below the window");
    assert_eq!(dev.bar_read32(at + 8).to_bytes(), [2, 1, 2, 3]);
    assert_eq!(dev.bar_read32(at + 1020).to_bytes(), [9, 9, 2, 3]);

    // A key inside the allocation (and one of no bytes, as pyverbs registers); not beyond it.
    let ((st, key), _) = (dm_key(&mut a, at, size), ());
    assert_eq!(st, (0, 0));
    assert_eq!(dm_key(&mut a, at, 0).0, (0, 0));
    assert_eq!(
        dm_key(&mut a, at + 512, 1024).0,
        (0x03, 0x5e03_003d),
        "past the allocation"
    );

    // A SEND from device memory (address 0: the key is zero-based) ...
    let (mut qa, mut qb) = connected(&mut a, &mut b, qp_st::RC, |_| {});
    let dst = b.reg_mr(4096, false, true, false);
    b.post_recv(&mut qb, &[(4096, dst.key, dst.va(0))]);
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Data(1024, key, 0)]);
    assert_eq!(a.poll().map(|c| c.opcode), Some(0));
    assert_eq!(b.poll().map(|c| c.byte_cnt), Some(1024));
    let mut want = Vec::new();
    for k in 0..256u64 {
        let word = dev.bar_read32(at + 4 * k).to_bytes();
        want.extend_from_slice(&word);
    }
    assert_eq!(read(&b.dev(), &dst, 0, 1024), want);
    // ... and an RDMA WRITE into it at offset 100 through its rkey.
    let src = b.reg_mr(4096, false, false, false);
    let data = fill(&b.dev(), &src, 5);
    b.post_send(
        &mut qb,
        WRITE,
        SIGNALED,
        [0; 4],
        &[Seg::Raddr(100, key), Seg::Data(200, src.key, src.va(0))],
    );
    assert_eq!(b.poll().map(|c| c.opcode), Some(0));
    let mut got = vec![0u8; 200];
    for (i, b4) in got.chunks_mut(4).enumerate() {
        b4.copy_from_slice(&dev.bar_read32(at + 100 + 4 * i as u64).to_bytes());
    }
    assert_eq!(got, &data[..200]);
    // Past the key's length: refused (a remote access error at the requester).
    b.post_send(
        &mut qb,
        WRITE,
        SIGNALED,
        [0; 4],
        &[Seg::Raddr(1000, key), Seg::Data(100, src.key, src.va(0))],
    );
    assert_eq!(b.poll().map(|c| (c.opcode, c.syndrome)), Some((0xd, 0x13)));

    // Freed only once no key reaches it.
    assert_eq!(
        dealloc(&mut a, at, size),
        (0x06, 0x5e06_000f),
        "a key reaches it"
    );
    for k in [key, key + 0x100] {
        let input = cmd::<DestroyMkeyIn>(Opcode::DestroyMkey, 0, |v| {
            v.set(DestroyMkeyIn::MKEY_INDEX, u64::from(k >> 8)).unwrap();
        });
        assert_eq!(a.fx.run(&input, 0x10).0, (0, 0));
    }
    assert_eq!(dealloc(&mut a, at, size), (0, 0));
    assert_eq!(dev.memic_allocations(), 0);
}
