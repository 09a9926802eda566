//! Tests of the PCI module against a fake configuration space.
extern crate std;
use super::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::string::ToString;
use std::vec::Vec;

/// Config space per function: 64 dwords, BAR probe semantics, RW1C status, and a log of
/// the command register's value at each BAR write.
#[derive(Default)]
struct Fake {
    fns: RefCell<HashMap<Bdf, [u32; 64]>>,
    /// (bdf, dword index) -> writable mask of a BAR dword; fixed bits kept from the value.
    bar_masks: HashMap<(Bdf, usize), u32>,
    cmd_at_bar_write: RefCell<Vec<u16>>,
}

impl Fake {
    fn add(&mut self, bdf: Bdf, vendor: u16, device: u16, class: u32, ht: u8) {
        let mut s = [0u32; 64];
        s[0] = u32::from(vendor) | (u32::from(device) << 16);
        s[2] = class << 8;
        s[3] = u32::from(ht) << 16;
        self.fns.borrow_mut().insert(bdf, s);
    }
    fn set(&self, bdf: Bdf, off: u16, v: u32) {
        self.fns.borrow_mut().get_mut(&bdf).unwrap()[usize::from(off / 4)] = v;
    }
    fn get(&self, bdf: Bdf, off: u16) -> u32 {
        self.read32(bdf, off)
    }
    /// BAR dword `i` reading `value`, decoding `size` bytes (low part for dword i).
    fn bar(&mut self, bdf: Bdf, i: usize, value: u32, mask: u32) {
        self.set(bdf, BAR0 + 4 * i as u16, value);
        self.bar_masks.insert((bdf, i), mask);
    }
    /// The ConnectX-5 as QEMU shows it: 64-bit prefetchable 32 MiB BAR0 at 0xfc000000,
    /// caps 0x34 -> 0x60 (PCIe) -> 0x9c (MSI-X, 64 entries) -> 0.
    fn cx5(bdf: Bdf) -> Self {
        let mut f = Fake::default();
        f.add(bdf, 0x15b3, 0x1017, 0x020000, 0);
        f.bar(bdf, 0, 0xfc00_000c, !(32 << 20) + 1);
        f.bar(bdf, 1, 0, 0xffff_ffff);
        f.set(bdf, 0x04, (u32::from(STATUS_CAP_LIST) << 16) | 0x0006);
        f.set(bdf, 0x34, 0x60);
        f.set(bdf, 0x60, 0x9c00 | u32::from(CAP_ID_PCIE));
        f.set(bdf, 0x9c, 0x003f_0000 | u32::from(CAP_ID_MSIX));
        f.set(bdf, 0xa0, 0x2000);
        f.set(bdf, 0xa4, 0x3000);
        f
    }
}

impl ConfigAccess for Fake {
    fn read32(&self, bdf: Bdf, off: u16) -> u32 {
        assert_eq!(off % 4, 0);
        self.fns
            .borrow()
            .get(&bdf)
            .map_or(0xffff_ffff, |s| s[usize::from(off / 4)])
    }
    fn write32(&self, bdf: Bdf, off: u16, v: u32) {
        assert_eq!(off % 4, 0);
        let i = usize::from(off / 4);
        let old = self.read32(bdf, off);
        let bar = (4..10)
            .contains(&i)
            .then(|| self.bar_masks.get(&(bdf, i - 4)))
            .flatten();
        let new = if let Some(&m) = bar {
            let cmd = self.read16(bdf, COMMAND);
            self.cmd_at_bar_write.borrow_mut().push(cmd);
            (v & m) | (old & !m)
        } else if i == 1 {
            (v & 0xffff) | (old & 0xffff_0000 & !(v & 0xffff_0000))
        } else {
            v
        };
        self.set(bdf, off, new);
    }
}

const CX5: Bdf = Bdf::new(0x01, 0x00, 0);

#[test]
fn bdf_display_and_addresses() {
    let b = Bdf::new(0x3a, 0x1f, 7);
    assert_eq!(b.to_string(), "3a:1f.7");
    assert_eq!(CX5.to_string(), "01:00.0");
    assert_eq!(
        ecam_offset(b, 0x104),
        (0x3a << 20) | (0x1f << 15) | (7 << 12) | 0x104
    );
    assert_eq!(
        cf8_address(b, 0x9e),
        0x8000_0000 | (0x3a << 16) | (0x1f << 11) | (7 << 8) | 0x9c
    );
}

#[test]
fn narrow_reads() {
    let f = Fake::cx5(CX5);
    assert_eq!(f.read16(CX5, 0), 0x15b3);
    assert_eq!(f.read16(CX5, 2), 0x1017);
    assert_eq!(f.read8(CX5, 0x0b), 0x02);
    assert_eq!(f.read8(CX5, 0x9d), 0x00);
    assert_eq!(f.read16(CX5, 0x9e), 0x003f);
}

#[test]
fn cx5_bar0_is_64bit_prefetchable_32mib_and_restored() {
    let f = Fake::cx5(CX5);
    let bar = size_bar(&f, CX5, 0).unwrap();
    assert_eq!(
        bar,
        Bar {
            base: 0xfc00_0000,
            size: 32 << 20,
            is_64: true,
            prefetchable: true
        }
    );
    assert_eq!(f.get(CX5, 0x10), 0xfc00_000c);
    assert_eq!(f.get(CX5, 0x14), 0);
    // Memory decode was off for each of the 4 BAR writes, and is back on.
    let log = f.cmd_at_bar_write.borrow();
    assert_eq!(log.len(), 4);
    assert!(log
        .iter()
        .all(|c| c & CMD_MEMORY == 0 && c & CMD_BUS_MASTER != 0));
    assert_eq!(
        f.get(CX5, 0x04),
        (u32::from(STATUS_CAP_LIST) << 16) | 0x0006
    );
}

#[test]
fn bar_32bit_high_address_and_errors() {
    let mut f = Fake::cx5(CX5);
    f.bar(CX5, 2, 0xfeb0_0000, !0xfff); // 4 KiB, 32-bit, non-prefetchable
    f.bar(CX5, 3, 0x0000_c001, !0xff); // I/O
    f.bar(CX5, 4, 0, 0); // unimplemented
    f.bar(CX5, 5, 0x0000_0004, 0xffff_fff0); // 64-bit in the last slot
    let bar = size_bar(&f, CX5, 2).unwrap();
    assert_eq!(
        bar,
        Bar {
            base: 0xfeb0_0000,
            size: 0x1000,
            is_64: false,
            prefetchable: false
        }
    );
    assert_eq!(f.get(CX5, 0x18), 0xfeb0_0000);
    assert_eq!(size_bar(&f, CX5, 3), Err(PciError::IoBar(CX5, 3)));
    assert_eq!(f.get(CX5, 0x1c), 0xc001); // untouched
    assert_eq!(
        size_bar(&f, CX5, 4),
        Err(PciError::BarNotImplemented(CX5, 4))
    );
    assert_eq!(size_bar(&f, CX5, 5), Err(PciError::BarIndex(CX5, 5)));
    assert_eq!(size_bar(&f, CX5, 6), Err(PciError::BarIndex(CX5, 6)));
    f.set(CX5, 0x18, 0x2); // type 0b01: reserved
    assert!(matches!(
        size_bar(&f, CX5, 2),
        Err(PciError::BarType { index: 2, .. })
    ));
    f.bar(CX5, 2, 0, 0xf0f0_0000);
    assert!(matches!(
        size_bar(&f, CX5, 2),
        Err(PciError::BarMask {
            mask: 0xf0f0_0000,
            ..
        })
    ));
    assert_eq!(
        size_bar(&f, Bdf::new(9, 0, 0), 0),
        Err(PciError::NoDevice(Bdf::new(9, 0, 0)))
    );
    let e = size_bar(&f, CX5, 3).unwrap_err().to_string();
    assert!(
        e.contains("01:00.0") && e.contains("BAR3") && e.contains("I/O"),
        "{e}"
    );
}

#[test]
fn capability_walk_finds_msix() {
    let f = Fake::cx5(CX5);
    let caps: Vec<_> = capabilities(&f, CX5).map(Result::unwrap).collect();
    assert_eq!(
        caps,
        [
            Capability {
                id: 0x10,
                offset: 0x60
            },
            Capability {
                id: 0x11,
                offset: 0x9c
            }
        ]
    );
    assert_eq!(find_cap(&f, CX5, CAP_ID_PCIE), Ok(Some(0x60)));
    assert_eq!(find_cap(&f, CX5, 0x05), Ok(None));
    let m = msix(&f, CX5).unwrap();
    let want = MsixInfo {
        cap: 0x9c,
        table_size: 64,
        enabled: false,
        function_masked: false,
        table_bir: 0,
        table_offset: 0x2000,
        pba_bir: 0,
        pba_offset: 0x3000,
    };
    assert_eq!(m, want);
    assert_eq!((m.table_len(), m.pba_len()), (1024, 8));
    assert_eq!(m.check_bar0(32 << 20), Ok(()));
    assert!(matches!(
        m.check_bar0(0x2200),
        Err(PciError::MsixOutsideBar {
            part: MsixPart::Table,
            ..
        })
    ));
    f.set(CX5, 0xa4, 0x3002);
    let m = msix(&f, CX5).unwrap();
    assert_eq!(
        m.check_bar0(32 << 20),
        Err(PciError::MsixNotInBar0 {
            part: MsixPart::Pba,
            bir: 2
        })
    );
    f.set(CX5, 0xa0, 0x2007);
    assert_eq!(
        msix(&f, CX5),
        Err(PciError::MsixBir {
            bdf: CX5,
            part: MsixPart::Table,
            bir: 7
        })
    );
}

#[test]
fn no_cap_list_or_no_msix() {
    let f = Fake::cx5(CX5);
    f.set(CX5, 0x9c, 0x0005); // MSI instead, end of list
    assert_eq!(msix(&f, CX5), Err(PciError::NoMsix(CX5)));
    f.set(CX5, 0x04, 0x0006); // status bit 4 clear: the pointer is ignored
    assert_eq!(capabilities(&f, CX5).count(), 0);
    assert_eq!(find_cap(&f, CX5, CAP_ID_PCIE), Ok(None));
}

#[test]
fn looping_or_bad_pointers_are_errors() {
    let f = Fake::cx5(CX5);
    f.set(CX5, 0x9c, 0x6005); // 0x60 -> 0x9c -> 0x60 ...
    assert_eq!(find_cap(&f, CX5, CAP_ID_MSIX), Err(PciError::CapLoop(CX5)));
    assert_eq!(capabilities(&f, CX5).count(), MAX_CAPS + 1);
    f.set(CX5, 0x9c, 0x6311); // 0x63 masks to 0x60: still a loop, but MSI-X comes first
    assert_eq!(msix(&f, CX5).map(|m| m.cap), Ok(0x9c));
    assert_eq!(find_cap(&f, CX5, 0x05), Err(PciError::CapLoop(CX5)));
    f.set(CX5, 0x60, 0x9c10 | 0x1f0000);
    f.set(CX5, 0x9c, 0x0c05); // points into the header
    assert_eq!(
        find_cap(&f, CX5, CAP_ID_MSIX),
        Err(PciError::CapPointer {
            bdf: CX5,
            at: 0x9d,
            ptr: 0x0c
        })
    );
    f.set(CX5, 0x34, 0x3f);
    assert_eq!(
        find_cap(&f, CX5, CAP_ID_MSIX),
        Err(PciError::CapPointer {
            bdf: CX5,
            at: 0x34,
            ptr: 0x3c
        })
    );
    f.set(CX5, 0x34, 0xf8);
    f.set(CX5, 0xf8, 0x11);
    assert_eq!(
        msix(&f, CX5),
        Err(PciError::CapTruncated {
            bdf: CX5,
            id: 0x11,
            offset: 0xf8
        })
    );
}

#[test]
fn enable_msix_and_bus_master_leave_status_alone() {
    let f = Fake::cx5(CX5);
    f.set(CX5, 0x04, (0x8000 | u32::from(STATUS_CAP_LIST)) << 16); // a pending RW1C error bit
    enable_bus_master(&f, CX5);
    assert_eq!(f.get(CX5, 0x04) & 0xffff, 0x0406);
    assert_eq!(
        f.get(CX5, 0x04) >> 16,
        0x8010,
        "status bits must not be cleared"
    );
    let m = msix(&f, CX5).unwrap();
    set_msix_control(&f, CX5, &m, true, true);
    assert_eq!(f.get(CX5, 0x9c), 0xc03f_0011);
    let m = msix(&f, CX5).unwrap();
    assert!(m.enabled && m.function_masked);
    enable_msix(&f, CX5, &m);
    assert_eq!(f.get(CX5, 0x9c), 0x803f_0011);
}

#[test]
fn msix_message_and_entry_layout() {
    assert_eq!(msix_message(0, 0x30), (0xfee0_0000, 0x30));
    assert_eq!(msix_message(3, 0xff), (0xfee0_3000, 0xff));
    let e = MsixEntry::new(0xff, 0x41);
    assert_eq!(e.dwords(), [0xfeef_f000, 0, 0x41, 0]);
    assert_eq!(
        MsixEntry { masked: true, ..e }.dwords()[3],
        MsixEntry::MASKED
    );
    assert_eq!(MsixEntry::offset(3), 48);
    assert_eq!(
        [
            MsixEntry::ADDR_LO,
            MsixEntry::ADDR_HI,
            MsixEntry::DATA,
            MsixEntry::VECTOR_CTRL
        ],
        [0, 4, 8, 12]
    );
}

#[test]
fn enumeration_follows_multifunction_bit() {
    let mut f = Fake::default();
    f.add(Bdf::new(0, 0, 0), 0x8086, 0x29c0, 0x060000, 0x00); // host bridge
    f.add(Bdf::new(0, 0, 3), 0x1234, 0x0001, 0, 0); // hidden: function 0 not multifunction
    f.add(Bdf::new(0, 0x1f, 0), 0x8086, 0x2918, 0x060100, 0x80); // multifunction
    f.add(Bdf::new(0, 0x1f, 2), 0x8086, 0x2922, 0x010601, 0x00);
    f.add(Bdf::new(0, 0x1f, 3), 0x8086, 0x2930, 0x0c0500, 0x00);
    f.add(Bdf::new(1, 0, 0), 0x15b3, 0x1017, 0x020000, 0x00);
    f.add(Bdf::new(1, 0, 1), 0x15b3, 0x1018, 0x020000, 0x00); // hidden too
    f.add(Bdf::new(0xff, 0x1f, 0), 0x1af4, 0x1041, 0x020000, 0x00);
    let mut out = heapless::Vec::<Function, 8>::new();
    assert_eq!(enumerate(&f, &mut out), 6);
    let bdfs: Vec<_> = out.iter().map(|f| f.bdf.to_string()).collect();
    assert_eq!(
        bdfs,
        ["00:00.0", "00:1f.0", "00:1f.2", "00:1f.3", "01:00.0", "ff:1f.0"]
    );
    assert_eq!(
        out[4],
        Function {
            bdf: Bdf::new(1, 0, 0),
            vendor: 0x15b3,
            device: 0x1017,
            class: 0x020000,
            header_type: 0
        }
    );
    let mut small = heapless::Vec::<Function, 2>::new();
    assert_eq!(enumerate(&f, &mut small), 6);
    assert_eq!(small.len(), 2);
}
