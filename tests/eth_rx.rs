//! The Ethernet receive path against frames a peer chooses (issue #26): a receive that
//! completes in error gives its buffer back, so no sequence of bad frames can leave the port
//! without buffers.

mod common;

use common::wire::{ipv4_frame, send_raw};
use common::*;
use mlx5::eth::{EthPort, EthPortConfig};
use mlx5::sim::{Fabric, Mode};

/// Issue #26: a receive completing in error (here a frame longer than the port's buffers, which
/// the device writes as LOCAL_LENGTH_ERR) gave its buffer up for good — `recv` counted the error
/// and never posted the buffer again, so a peer's `rx_depth` over-long frames left the port
/// deaf (every later frame dropped for want of a buffer, `eth_rx_out_of_buffer`). Found by the
/// fuzz target eth_frames. Every buffer now goes back, whatever its completion says.
#[test]
fn frames_too_long_for_the_buffers_do_not_use_them_up() {
    let fabric = Fabric::new();
    let (sa, da) = nic(&fabric, Mode::Sync);
    let (_sb, db) = nic(&fabric, Mode::Sync);
    let (tx, rx) = (da.create_cq(64).unwrap(), da.create_cq(64).unwrap());
    let (ma, mb) = (da.vport().mac, db.vport().mac);
    let cfg = EthPortConfig {
        rx_depth: 4,
        ..EthPortConfig::default()
    };
    let mut port = EthPort::open(&da, &tx, &rx, &cfg).unwrap();
    // 1600 bytes: over the 1536-byte buffers of a 1500-byte MTU.
    let long = ipv4_frame(ma, mb, 17, &[0u8; 1600 - 34]);
    let good = ipv4_frame(ma, mb, 1, &[8, 0, 0xf7, 0xfd, 0, 1, 0, 1]);
    for _ in 0..3 {
        send_raw(&db, &vec![long.clone(); 4]);
        assert_eq!(port.recv().unwrap(), None, "no frame fits");
    }
    send_raw(&db, std::slice::from_ref(&good));
    let n = port
        .recv()
        .unwrap()
        .expect("the good frame, into a buffer given back");
    assert_eq!(&port.received(n)[..good.len()], &good[..]);
    let st = port.stats();
    assert_eq!((st.rx_errors, st.rx_frames), (12, 1), "{st:?}");
    assert_eq!(sa.datapath_counters().eth_rx_out_of_buffer, 0);
    port.close().unwrap();
    tx.destroy().unwrap();
    rx.destroy().unwrap();
}
