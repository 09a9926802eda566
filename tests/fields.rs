//! The values the driver programs, read back from the commands the simulated device received
//! (its trace), against what Linux's mlx5 drivers and rdma-core write (docs/fields.md).

mod common;

use common::*;
use mlx5::ifc::prm::eq::CreateEqIn;
use mlx5::ifc::prm::mr::{CreateMkeyIn, Mkc};
use mlx5::ifc::prm::qp::{Init2rtrQpIn, Qpc, Rtr2rtsQpIn};
use mlx5::ifc::{Layout, Opcode, View};
use mlx5::mr::MrAccess;
use mlx5::qp::ConnectOpts;
use mlx5::sim::{Fabric, Mode, SimDevice};

/// The inputs of every command `opcode` the device received.
fn inputs(sim: &SimDevice, opcode: Opcode) -> Vec<Vec<u8>> {
    sim.trace()
        .into_iter()
        .filter(|r| r.opcode == opcode as u16 && r.status == 0)
        .map(|r| r.input)
        .collect()
}

fn field<L: Layout>(input: &[u8], f: impl FnOnce(&View<'_, L>) -> u64) -> u64 {
    f(&View::<L>::new(input).expect("a whole command input"))
}

/// Row 0 of issue #10: `mkc.log_page_size` is the absolute log2 of the page (12 for 4 KiB), as
/// Linux and rdma-core write it — not relative to 4 KiB as the queue contexts are.
#[test]
fn mkey_page_size_is_absolute() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    let small = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    // 600 pages of 4 KiB do not fit 512 PAS entries: the buffer uses 8 KiB pages.
    let big = dev.alloc_mr(dev.pd(), 600 * 4096, MrAccess::ALL).unwrap();
    let got: Vec<u64> = inputs(&sim, Opcode::CreateMkey)
        .iter()
        .map(|i| {
            field::<CreateMkeyIn>(i, |v| {
                v.nested(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY)
                    .get(Mkc::LOG_PAGE_SIZE)
            })
        })
        .collect();
    assert_eq!(got, [12, 13], "4 KiB and 8 KiB pages");
    drop((small, big));
}

/// Row 6 of issue #10: the MTT goes as whole octwords — an odd page count is padded with a zero
/// entry, so the input is as long as `translations_octword_actual_size` says (the simulator
/// refuses a shorter one with BAD_INPUT_LEN, `hw/sim/tests/datapath_mkey.rs`).
#[test]
fn mkey_mtt_is_padded_to_whole_octwords() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    for pages in [1usize, 2, 3] {
        let mr = dev.alloc_mr(dev.pd(), pages * 4096, MrAccess::ALL).unwrap();
        let input = inputs(&sim, Opcode::CreateMkey).pop().unwrap();
        let octwords = field::<CreateMkeyIn>(&input, |v| {
            v.get(CreateMkeyIn::TRANSLATIONS_OCTWORD_ACTUAL_SIZE)
        });
        assert_eq!(octwords as usize, pages.div_ceil(2), "{pages} pages");
        assert_eq!(
            input.len(),
            CreateMkeyIn::BYTES + 16 * pages.div_ceil(2),
            "{pages} pages"
        );
        mr.dereg().unwrap();
    }
}

/// Row 7 of issue #10: `log_sra_max` is ⌊log2⌋ of the verbs count — a QP never has more
/// READs/atomics outstanding than asked — and `log_rra_max` ⌈log2⌉ — it never offers fewer
/// responder resources than asked. A peer that rounds either way (Linux ≥ 6.12 up, 5.x–6.11 and
/// UCX down) stays within both.
#[test]
fn read_atomic_depths_round_safely_both_ways() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    let cq = dev.create_cq(16).unwrap();
    for (n, rra_want, sra_want) in [(1u8, 0u64, 0u64), (3, 2, 1), (4, 2, 2), (16, 4, 4)] {
        let mut q = qp(&dev, &cq, mlx5::qp::QpType::Rc, cap(4, 4, 1));
        let me = q.endpoint();
        q.connect(
            &me,
            &ConnectOpts {
                max_rd_atomic: n,
                ..ConnectOpts::default()
            },
        )
        .unwrap();
        let rra = inputs(&sim, Opcode::Init2RtrQp).last().map(|i| {
            field::<Init2rtrQpIn>(i, |v| v.nested(Init2rtrQpIn::QPC).get(Qpc::LOG_RRA_MAX))
        });
        let sra = inputs(&sim, Opcode::Rtr2RtsQp)
            .last()
            .map(|i| field::<Rtr2rtsQpIn>(i, |v| v.nested(Rtr2rtsQpIn::QPC).get(Qpc::LOG_SRA_MAX)));
        assert_eq!(
            (rra, sra),
            (Some(rra_want), Some(sra_want)),
            "max_rd_atomic {n}"
        );
    }
}

/// Row 11 of issue #10: the async EQ is not subscribed to INTERNAL_ERROR (0x08), which Linux's
/// async event mask leaves out; the completion EQ to no event type at all; page requests
/// (row 1) go to a pages EQ of their own.
#[test]
fn async_eq_mask_leaves_internal_error_out() {
    let fabric = Fabric::new();
    let (sim, _dev) = nic(&fabric, Mode::Sync);
    let masks: Vec<[u8; 32]> = inputs(&sim, Opcode::CreateEq)
        .iter()
        .map(|i| {
            let at = CreateEqIn::EVENT_BITMASK.offset();
            i[at..at + 32].try_into().unwrap()
        })
        .collect();
    assert_eq!(masks.len(), 3, "the async, the completion and the pages EQ");
    // Four big-endian 64-bit words, word i (types 64i..64i+63) at byte 8i.
    let word0 = u64::from_be_bytes(masks[0][..8].try_into().unwrap());
    assert_eq!(
        word0 & (1 << mlx5::ifc::event::INTERNAL_ERROR),
        0,
        "{word0:#x}"
    );
    assert_ne!(word0 & (1 << mlx5::ifc::event::CQ_ERROR), 0, "{word0:#x}");
    assert_ne!(
        word0 & (1 << mlx5::ifc::event::PORT_CHANGE),
        0,
        "{word0:#x}"
    );
    assert_eq!(
        word0 & (1 << mlx5::ifc::event::PAGE_REQUEST),
        0,
        "page requests have an EQ of their own: {word0:#x}"
    );
    assert_eq!(masks[1], [0; 32]);
    // The pages EQ (Linux's too): PAGE_REQUEST (0x0b) and nothing else.
    let mut pages = [0u8; 32];
    pages[7 - usize::from(mlx5::ifc::event::PAGE_REQUEST / 8)] =
        1 << (mlx5::ifc::event::PAGE_REQUEST % 8);
    assert_eq!(masks[2], pages);
}
