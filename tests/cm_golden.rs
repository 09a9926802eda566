//! The CM's MAD layouts against the bytes Linux itself sent: two connections captured on the
//! simulated wire during tests/rxe-qemu (`--pcap`), Debian's 6.1 kernel with rdma_rxe and
//! rdma-core 44's rping in the guest (tests/data/linux-6.1-cm/, one 256-byte MAD per file).
//! In A this driver is the active side (our REQ, Linux's REP, our RTU, our DREQ, Linux's DREP);
//! in B Linux is (its REQ, our REP, its RTU, its DREQ, our DREP). Each of Linux's messages is
//! read through our field table and must say what the fact sheet says Linux writes; and every
//! field one side copies from the other's message (communication IDs, transaction IDs, QPNs)
//! must match — which checks our offsets against Linux's on real bytes.

use mlx5::cm::{guid_of_mac, mapped};
use mlx5::raw::mad::{attr, dreq, hdr, ids, rep, req, CmaHdr, Mad, MAD_LEN};

fn mad(name: &str) -> Mad {
    let path = format!(
        "{}/tests/data/linux-6.1-cm/{name}.hex",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let hex: String = text.split_whitespace().collect();
    assert_eq!(hex.len(), 2 * MAD_LEN, "{path}");
    let mut m = Mad::default();
    for (i, b) in m.0.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    assert!(m.is_cm(), "{name}: not a CM MAD Linux's agent takes");
    m
}

const GUEST: [u8; 4] = [198, 18, 0, 2];
const OURS: [u8; 4] = [198, 18, 0, 1];

#[test]
fn linux_as_passive_answers_our_req() {
    let (q, p, u, d, r) = (
        mad("a-req-ours"),
        mad("a-rep-linux"),
        mad("a-rtu-ours"),
        mad("a-dreq-ours"),
        mad("a-drep-linux"),
    );
    assert_eq!(
        [
            q.attr_id(),
            p.attr_id(),
            u.attr_id(),
            d.attr_id(),
            r.attr_id()
        ],
        [attr::REQ, attr::REP, attr::RTU, attr::DREQ, attr::DREP]
    );
    // Linux's REP names our REQ: our communication ID, our transaction ID.
    assert_eq!(p.get(ids::REMOTE_COMM_ID), q.get(req::LOCAL_COMM_ID));
    assert_eq!(p.tid(), q.tid());
    // What rping's passive offers (rdma_accept with NULL: the REQ's depths, RNR retry 7),
    // and rxe's identity: ACK delay 15, the node GUID of the guest NIC's MAC.
    assert_eq!(p.get(rep::RESPONDER_RESOURCES), 1);
    assert_eq!(p.get(rep::INITIATOR_DEPTH), 1);
    assert_eq!(p.get(rep::TARGET_ACK_DELAY), 15);
    assert_eq!(p.get(rep::RNR_RETRY), 7);
    assert_eq!(p.get(rep::LOCAL_QKEY), 0);
    assert_eq!(
        p.get(rep::LOCAL_CA_GUID),
        guid_of_mac([0x52, 0x54, 0, 0, 0, 2])
    );
    let their_qpn = p.get(rep::LOCAL_QPN);
    assert!(their_qpn > 1 && their_qpn < 1 << 24);
    assert!(p.get(rep::STARTING_PSN) < 1 << 24);
    // Our RTU and DREQ name both sides; our DREQ names Linux's QP.
    let both = |m: &Mad| (m.get(ids::LOCAL_COMM_ID), m.get(ids::REMOTE_COMM_ID));
    let ours = (q.get(req::LOCAL_COMM_ID), p.get(ids::LOCAL_COMM_ID));
    assert_eq!(both(&u), ours);
    assert_eq!(both(&d), ours);
    assert_eq!(d.get(dreq::REMOTE_QPN), their_qpn);
    // Linux's DREP answers our DREQ: the IDs swapped, its transaction ID echoed.
    assert_eq!(both(&r), (ours.1, ours.0));
    assert_eq!(r.tid(), d.tid());
}

#[test]
fn linux_as_active_sends_what_the_fact_sheet_says() {
    let (q, p, u, d, r) = (
        mad("b-req-linux"),
        mad("b-rep-ours"),
        mad("b-rtu-linux"),
        mad("b-dreq-linux"),
        mad("b-drep-ours"),
    );
    // The header: base version 1, class CM, class version 2, method SEND; no ECE (rxe).
    assert_eq!(&q.0[..4], &[1, 7, 2, 3]);
    assert_eq!(q.get(hdr::ATTR_MOD), 0);
    // rping's REQ through rdma_cm: ServiceID 0x01060000 + 7174, RC, its QP and depths,
    // timeouts 20, 15 CM retries, 7 and 7 retries, P_Key 0xFFFF, MTU 1024 (an e1000's 1500).
    assert_eq!(q.get(req::SERVICE_ID), 0x0106_1c06);
    assert_eq!(q.get(req::TRANSPORT), 0);
    assert_eq!(q.get(req::RESPONDER_RESOURCES), 1);
    assert_eq!(q.get(req::INITIATOR_DEPTH), 1);
    assert_eq!(q.get(req::REMOTE_CM_RESPONSE_TIMEOUT), 20);
    assert_eq!(q.get(req::LOCAL_CM_RESPONSE_TIMEOUT), 20);
    assert_eq!(q.get(req::MAX_CM_RETRIES), 15);
    assert_eq!(q.get(req::RETRY_COUNT), 7);
    assert_eq!(q.get(req::RNR_RETRY), 7);
    assert_eq!(q.get(req::PKEY), 0xffff);
    assert_eq!(q.get(req::PATH_MTU), 3);
    assert_eq!(q.get(req::FLOW_CONTROL), 0);
    assert_eq!(q.get(req::SRQ), 0);
    // The routed RoCE path: LIDs 0xFFFF, IPv4-mapped GIDs, hop limit 64, not subnet-local, no
    // alternate path; local ACK timeout cm_ack_timeout(15, 18) = 19 (Debian's 6.1 uses a
    // packet life time of 18).
    assert_eq!(q.get(req::PRIMARY_LOCAL_LID), 0xffff);
    assert_eq!(q.get(req::PRIMARY_REMOTE_LID), 0xffff);
    assert_eq!(q.gid(req::PRIMARY_LOCAL_GID), mapped(GUEST));
    assert_eq!(q.gid(req::PRIMARY_REMOTE_GID), mapped(OURS));
    assert_eq!(q.get(req::HOP_LIMIT), 64);
    assert_eq!(q.get(req::SUBNET_LOCAL), 0);
    assert_eq!(q.get(req::ALT_LOCAL_LID), 0);
    assert_eq!(q.get(req::LOCAL_ACK_TIMEOUT), 19);
    assert_eq!(mlx5::cm::ack_timeout(15, 18), 19);
    // rdma_cm's private-data header, and its flow label from the two ports.
    let h = CmaHdr::parse(&q.0[req::PRIVATE..]).expect("cma header");
    assert_eq!((h.src_ip, h.dst_ip), (GUEST, OURS));
    let fl = (u64::from(h.src_port) * 31 + 7174) & 0xf_ffff;
    assert_eq!(q.get(req::FLOW_LABEL), fl);
    assert!(q.0[req::PRIVATE + 36..].iter().all(|&b| b == 0));
    // Our REP names Linux's REQ (IDs, transaction ID echoed).
    assert_eq!(p.get(ids::REMOTE_COMM_ID), q.get(req::LOCAL_COMM_ID));
    assert_eq!(p.tid(), q.tid());
    // Linux's RTU names both; its DREQ names our QP; our DREP answers it.
    let both = |m: &Mad| (m.get(ids::LOCAL_COMM_ID), m.get(ids::REMOTE_COMM_ID));
    let theirs = (q.get(req::LOCAL_COMM_ID), p.get(ids::LOCAL_COMM_ID));
    assert_eq!(both(&u), theirs);
    assert_eq!(u.tid(), q.tid(), "the RTU reuses the REQ's transaction ID");
    assert_eq!(both(&d), theirs);
    assert_eq!(d.get(dreq::REMOTE_QPN), p.get(rep::LOCAL_QPN));
    assert_eq!(both(&r), (theirs.1, theirs.0));
    assert_eq!(r.tid(), d.tid());
}
