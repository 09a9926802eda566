#!/usr/bin/env python3
"""Generates hw/ifc/src/prm/*.rs from reference/mlx5_ifc_offsets.json (the facts: bit offset and
width of every field of the mlx5_ifc structures we use) and reference/ste-v0.json (the same facts
for the software-steering entry layouts, STE format v0, which only rdma-core's mlx5_ifc.h has).

    python3 hw/ifc/gen/ifcgen.py            # rewrite the generated files
    python3 hw/ifc/gen/ifcgen.py --check    # exit 1 if they are stale (CI)

Every named (non-reserved) field of each listed structure becomes a typed constant:
`Field<L>` (integers up to 64 bits), `Bytes<L>` (byte arrays and flexible tails) or
`Nested<L, M>` (an embedded structure that is also generated).
"""
import json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REF = os.path.join(ROOT, "reference", "mlx5_ifc_offsets.json")
# Fields Linux leaves reserved that rdma-core's PRM layouts name (DevX UMEM ids and offsets).
NAMES = os.path.join(ROOT, "reference", "rdma-core-names.json")
# Whole structures Linux's mlx5_ifc.h lacks: STE format v0 (ConnectX-5 software steering), from
# rdma-core's mlx5_ifc.h and dr_ste.c (made by ste2json.py).
STE = os.path.join(ROOT, "reference", "ste-v0.json")
OUT = os.path.join(ROOT, "src", "prm")

# room -> [(struct, doc)]
ROOMS = {
    "init_seg": [
        ("initial_seg", "The initialization segment at BAR0 offset 0 (PRM \"Initialization Segment\")."),
        ("health_buffer", "The firmware health buffer at BAR0 + 0x200 (PRM \"Health Buffer\")."),
    ],
    "cmdif": [
        ("cmd_queue_entry", "A 64-byte command queue entry (PRM \"Command Queue Entry\")."),
        ("cmd_if_box", "A 576-byte command mailbox block (PRM \"Command Mailbox\")."),
        ("cmd_pas", "A physical address (PAS) entry of a 4 KiB page."),
    ],
    "hca": [
        ("enable_hca_in", "ENABLE_HCA (0x104) input."),
        ("enable_hca_out", "ENABLE_HCA (0x104) output."),
        ("disable_hca_in", "DISABLE_HCA (0x105) input."),
        ("disable_hca_out", "DISABLE_HCA (0x105) output."),
        ("query_issi_in", "QUERY_ISSI (0x10a) input."),
        ("query_issi_out", "QUERY_ISSI (0x10a) output."),
        ("set_issi_in", "SET_ISSI (0x10b) input."),
        ("set_issi_out", "SET_ISSI (0x10b) output."),
        ("query_pages_in", "QUERY_PAGES (0x107) input."),
        ("query_pages_out", "QUERY_PAGES (0x107) output."),
        ("manage_pages_in", "MANAGE_PAGES (0x108) input; the PAS list follows at byte 0x10."),
        ("manage_pages_out", "MANAGE_PAGES (0x108) output; the PAS list follows at byte 0x10."),
        ("query_hca_cap_in", "QUERY_HCA_CAP (0x100) input."),
        ("query_hca_cap_out", "QUERY_HCA_CAP (0x100) output; the capability starts at byte 0x10."),
        ("set_hca_cap_in", "SET_HCA_CAP (0x109) input; the capability starts at byte 0x10."),
        ("set_hca_cap_out", "SET_HCA_CAP (0x109) output."),
        ("init_hca_in", "INIT_HCA (0x102) input."),
        ("init_hca_out", "INIT_HCA (0x102) output."),
        ("teardown_hca_in", "TEARDOWN_HCA (0x103) input."),
        ("teardown_hca_out", "TEARDOWN_HCA (0x103) output."),
        ("set_driver_version_in", "SET_DRIVER_VERSION (0x10d) input."),
        ("set_driver_version_out", "SET_DRIVER_VERSION (0x10d) output."),
        ("access_register_in", "ACCESS_REG (0x805) input; register data from byte 0x10."),
        ("access_register_out", "ACCESS_REG (0x805) output; register data from byte 0x10."),
        ("query_adapter_in", "QUERY_ADAPTER (0x101) input."),
        ("query_adapter_out", "QUERY_ADAPTER (0x101) output."),
        ("query_adapter_param_block", "The adapter's identity in QUERY_ADAPTER: vendor IDs and the PSID."),
        ("paos_reg", "PAOS register (0x5006): port administrative and operational status."),
        ("pmtu_reg", "PMTU register (0x5003): port MTU."),
        ("register_host_endianness", "HOST_ENDIANNESS register (0x7004): the host's byte order."),
        ("ptys_reg", "PTYS register (0x5004): port type and speed."),
        ("pcmr_reg", "PCMR register (0x5041): port capabilities mask (FCS)."),
        ("ppcnt_reg", "PPCNT register (0x5008): port performance counters; the group's counters follow."),
        ("pfcc_reg", "PFCC register (0x5007): port flow control — global pause and per-priority flow control, each way."),
    ],
    "caps": [
        ("cmd_hca_cap", "General device capabilities (HCA_CAP cap_type 0, PRM \"HCA Capabilities\")."),
        ("roce_cap", "RoCE capabilities (HCA_CAP cap_type 4)."),
        ("atomic_caps", "Atomic capabilities (HCA_CAP cap_type 3, PRM \"Atomic Capabilities\")."),
        ("per_protocol_networking_offload_caps", "Ethernet offload capabilities (HCA_CAP cap_type 1, PRM \"Ethernet Offload Capabilities\")."),
        ("flow_table_nic_cap", "NIC flow table capabilities (HCA_CAP cap_type 7, PRM \"Flow Table Capabilities\")."),
        ("flow_table_prop_layout", "The properties of one flow table type (in `flow_table_nic_cap`)."),
        ("flow_table_fields_supported", "The match fields a flow table type supports."),
        ("flow_table_fields_supported_2", "More match fields a flow table type supports."),
    ],
    "uar_pd": [
        ("alloc_uar_in", "ALLOC_UAR (0x802) input."),
        ("alloc_uar_out", "ALLOC_UAR (0x802) output."),
        ("dealloc_uar_in", "DEALLOC_UAR (0x803) input."),
        ("dealloc_uar_out", "DEALLOC_UAR (0x803) output."),
        ("alloc_pd_in", "ALLOC_PD (0x800) input."),
        ("alloc_pd_out", "ALLOC_PD (0x800) output."),
        ("dealloc_pd_in", "DEALLOC_PD (0x801) input."),
        ("dealloc_pd_out", "DEALLOC_PD (0x801) output."),
        ("query_special_contexts_in", "QUERY_SPECIAL_CONTEXTS (0x203) input."),
        ("query_special_contexts_out", "QUERY_SPECIAL_CONTEXTS (0x203) output: reserved lkey, null mkey."),
        ("alloc_xrcd_in", "ALLOC_XRCD (0x80e) input."),
        ("alloc_xrcd_out", "ALLOC_XRCD (0x80e) output."),
        ("dealloc_xrcd_in", "DEALLOC_XRCD (0x80f) input."),
        ("dealloc_xrcd_out", "DEALLOC_XRCD (0x80f) output."),
    ],
    "vport": [
        ("nic_vport_context", "NIC vport context (PRM \"NIC_Vport Context\")."),
        ("modify_nic_vport_field_select", "Which NIC vport context fields MODIFY_NIC_VPORT_CONTEXT changes."),
        ("query_nic_vport_context_in", "QUERY_NIC_VPORT_CONTEXT (0x754) input."),
        ("query_nic_vport_context_out", "QUERY_NIC_VPORT_CONTEXT (0x754) output."),
        ("modify_nic_vport_context_in", "MODIFY_NIC_VPORT_CONTEXT (0x755) input."),
        ("modify_nic_vport_context_out", "MODIFY_NIC_VPORT_CONTEXT (0x755) output."),
        ("roce_addr_layout", "A RoCE address (GID table entry): L3 address, MAC, VLAN, RoCE version."),
        ("set_roce_address_in", "SET_ROCE_ADDRESS (0x761) input."),
        ("set_roce_address_out", "SET_ROCE_ADDRESS (0x761) output."),
        ("query_roce_address_in", "QUERY_ROCE_ADDRESS (0x760) input."),
        ("query_roce_address_out", "QUERY_ROCE_ADDRESS (0x760) output."),
        ("query_vport_state_in", "QUERY_VPORT_STATE (0x750) input."),
        ("query_vport_state_out", "QUERY_VPORT_STATE (0x750) output."),
        ("modify_vport_state_in", "MODIFY_VPORT_STATE (0x751) input: a vport's administrative state (the e-switch manager's, for another vport)."),
        ("modify_vport_state_out", "MODIFY_VPORT_STATE (0x751) output."),
        ("query_hca_vport_pkey_in", "QUERY_HCA_VPORT_PKEY (0x765) input."),
        ("query_hca_vport_pkey_out", "QUERY_HCA_VPORT_PKEY (0x765) output; the P_Keys follow."),
        ("pkey", "One P_Key entry."),
        ("mad_ifc_in", "MAD_IFC (0x50d) input: a 256-byte MAD for the port's management agents."),
        ("mad_ifc_out", "MAD_IFC (0x50d) output: the response MAD."),
    ],
    "eq": [
        ("eqc", "Event queue context (PRM \"EQ Context\")."),
        ("create_eq_in", "CREATE_EQ (0x301) input; PAS list at byte 0x110."),
        ("create_eq_out", "CREATE_EQ (0x301) output."),
        ("destroy_eq_in", "DESTROY_EQ (0x302) input."),
        ("destroy_eq_out", "DESTROY_EQ (0x302) output."),
        ("query_eq_in", "QUERY_EQ (0x303) input."),
        ("query_eq_out", "QUERY_EQ (0x303) output."),
    ],
    "eqe": [
        ("eqe", "An event queue entry, 64 bytes (PRM \"Event Queue Entry\"): type, sub-type, 28 bytes of event data, owner bit."),
        ("event_auto", "The 28 bytes of event data of an EQE, read by event type (a union)."),
        ("comp_event", "Event data of a COMPLETION event (type 0x00): the CQ that got a CQE."),
        ("qp_events", "Event data of a QP/SRQ event (types 0x01-0x05, 0x07, 0x10-0x14): resource type and number."),
        ("cq_error", "Event data of a CQ_ERROR event (type 0x04): the CQ and the syndrome (1: overrun)."),
        ("pages_req_event", "Event data of a PAGE_REQUEST event (type 0x0b): the function and the pages it wants (negative: return)."),
        ("port_state_change_event", "Event data of a PORT_CHANGE event (type 0x09): the port; the sub-type says what changed."),
        ("cmd_inter_comp_event", "Event data of a CMD event (type 0x0a): the command entries that completed."),
        ("dct_events", "Event data of a DCT event (DCT_DRAINED 0x1c, DCT_KEY_VIOLATION 0x1d): the DCT number."),
    ],
    "cq": [
        ("cqc", "Completion queue context (PRM \"CQ Context\")."),
        ("create_cq_in", "CREATE_CQ (0x400) input; PAS list at byte 0x110."),
        ("create_cq_out", "CREATE_CQ (0x400) output."),
        ("destroy_cq_in", "DESTROY_CQ (0x401) input."),
        ("destroy_cq_out", "DESTROY_CQ (0x401) output."),
        ("query_cq_in", "QUERY_CQ (0x402) input."),
        ("query_cq_out", "QUERY_CQ (0x402) output."),
        ("modify_cq_in", "MODIFY_CQ (0x403) input: moderation (op_mod 0) or resize (op_mod 1)."),
        ("modify_cq_out", "MODIFY_CQ (0x403) output."),
    ],
    "srq": [
        ("srqc", "Shared receive queue context (PRM \"SRQ Context\", ISSI 0)."),
        ("wq", "Work queue context embedded in RMP/RQ/SQ contexts (PRM \"WQ Context\")."),
        ("rmpc", "Receive memory pool context (PRM \"RMP Context\"), the SRQ of ISSI >= 1."),
        ("create_srq_in", "CREATE_SRQ (0x700) input; PAS list at byte 0x110."),
        ("create_srq_out", "CREATE_SRQ (0x700) output."),
        ("destroy_srq_in", "DESTROY_SRQ (0x701) input."),
        ("destroy_srq_out", "DESTROY_SRQ (0x701) output."),
        ("query_srq_in", "QUERY_SRQ (0x702) input."),
        ("query_srq_out", "QUERY_SRQ (0x702) output."),
        ("create_rmp_in", "CREATE_RMP (0x90c) input."),
        ("create_rmp_out", "CREATE_RMP (0x90c) output."),
        ("destroy_rmp_in", "DESTROY_RMP (0x90e) input."),
        ("destroy_rmp_out", "DESTROY_RMP (0x90e) output."),
        ("query_rmp_in", "QUERY_RMP (0x90f) input."),
        ("query_rmp_out", "QUERY_RMP (0x90f) output."),
        ("rmp_bitmask", "MODIFY_RMP field select: which RMP context fields the command changes."),
        ("modify_rmp_in", "MODIFY_RMP (0x90d) input: new state, field select, context."),
        ("modify_rmp_out", "MODIFY_RMP (0x90d) output."),
        ("arm_rq_in", "ARM_RQ (0x703) input: arms the limit event of an SRQ (op_mod 1) or RQ."),
        ("arm_rq_out", "ARM_RQ (0x703) output."),
        ("xrc_srqc", "XRC shared receive queue context (PRM \"XRC_SRQ Context\")."),
        ("create_xrc_srq_in", "CREATE_XRC_SRQ (0x705) input; the PAS list follows."),
        ("create_xrc_srq_out", "CREATE_XRC_SRQ (0x705) output."),
        ("destroy_xrc_srq_in", "DESTROY_XRC_SRQ (0x706) input."),
        ("destroy_xrc_srq_out", "DESTROY_XRC_SRQ (0x706) output."),
    ],
    "qp": [
        ("ads", "Address path (PRM \"Address Path\"), primary and secondary paths of a QP context."),
        ("qpc", "Queue pair context (PRM \"QP Context\", 232 bytes)."),
        ("create_qp_in", "CREATE_QP (0x500) input; the QP context at byte 0x18, PAS list at byte 0x110."),
        ("create_qp_out", "CREATE_QP (0x500) output."),
        ("destroy_qp_in", "DESTROY_QP (0x501) input."),
        ("destroy_qp_out", "DESTROY_QP (0x501) output."),
        ("query_qp_in", "QUERY_QP (0x50b) input."),
        ("query_qp_out", "QUERY_QP (0x50b) output."),
        ("rst2init_qp_in", "RST2INIT_QP (0x502) input."),
        ("rst2init_qp_out", "RST2INIT_QP (0x502) output."),
        ("init2init_qp_in", "INIT2INIT_QP (0x50e) input."),
        ("init2init_qp_out", "INIT2INIT_QP (0x50e) output."),
        ("init2rtr_qp_in", "INIT2RTR_QP (0x503) input."),
        ("init2rtr_qp_out", "INIT2RTR_QP (0x503) output."),
        ("rtr2rts_qp_in", "RTR2RTS_QP (0x504) input."),
        ("rtr2rts_qp_out", "RTR2RTS_QP (0x504) output."),
        ("rts2rts_qp_in", "RTS2RTS_QP (0x505) input."),
        ("rts2rts_qp_out", "RTS2RTS_QP (0x505) output."),
        ("qp_2err_in", "2ERR_QP (0x507) input."),
        ("qp_2err_out", "2ERR_QP (0x507) output."),
        ("qp_2rst_in", "2RST_QP (0x50a) input."),
        ("qp_2rst_out", "2RST_QP (0x50a) output."),
        ("attach_to_mcg_in", "ATTACH_TO_MCG (0x806) input: a UD QP joins the multicast group of `multicast_gid`."),
        ("attach_to_mcg_out", "ATTACH_TO_MCG (0x806) output."),
        ("detach_from_mcg_in", "DETACH_FROM_MCG (0x807) input."),
        ("detach_from_mcg_out", "DETACH_FROM_MCG (0x807) output."),
    ],
    "dct": [
        ("dctc", "DC target context (PRM \"DCT Context\"): the responder end of the Dynamically Connected transport."),
        ("create_dct_in", "CREATE_DCT (0x710) input; the DCT context at byte 0x10."),
        ("create_dct_out", "CREATE_DCT (0x710) output: the DCT number."),
        ("destroy_dct_in", "DESTROY_DCT (0x711) input."),
        ("destroy_dct_out", "DESTROY_DCT (0x711) output."),
        ("query_dct_in", "QUERY_DCT (0x713) input."),
        ("query_dct_out", "QUERY_DCT (0x713) output; the DCT context at byte 0x10."),
        ("arm_dct_in", "ARM_DCT_FOR_KEY_VIOLATION (0x714) input."),
        ("arm_dct_out", "ARM_DCT_FOR_KEY_VIOLATION (0x714) output."),
        ("drain_dct_in", "DRAIN_DCT (0x712) input."),
        ("drain_dct_out", "DRAIN_DCT (0x712) output."),
    ],
    "mr": [
        ("mkc", "Memory key context (PRM \"MKey Context\")."),
        ("create_mkey_in", "CREATE_MKEY (0x200) input; MTT/KLM list at byte 0x110."),
        ("create_mkey_out", "CREATE_MKEY (0x200) output."),
        ("destroy_mkey_in", "DESTROY_MKEY (0x202) input."),
        ("destroy_mkey_out", "DESTROY_MKEY (0x202) output."),
        ("query_mkey_in", "QUERY_MKEY (0x201) input."),
        ("query_mkey_out", "QUERY_MKEY (0x201) output."),
    ],
    "tir": [
        ("alloc_transport_domain_in", "ALLOC_TRANSPORT_DOMAIN (0x816) input."),
        ("alloc_transport_domain_out", "ALLOC_TRANSPORT_DOMAIN (0x816) output."),
        ("dealloc_transport_domain_in", "DEALLOC_TRANSPORT_DOMAIN (0x817) input."),
        ("dealloc_transport_domain_out", "DEALLOC_TRANSPORT_DOMAIN (0x817) output."),
        ("create_tis_in", "CREATE_TIS (0x912) input."),
        ("create_tis_out", "CREATE_TIS (0x912) output."),
        ("modify_tis_in", "MODIFY_TIS (0x913) input."),
        ("modify_tis_out", "MODIFY_TIS (0x913) output."),
        ("destroy_tis_in", "DESTROY_TIS (0x914) input."),
        ("destroy_tis_out", "DESTROY_TIS (0x914) output."),
        ("create_tir_in", "CREATE_TIR (0x900) input."),
        ("create_tir_out", "CREATE_TIR (0x900) output."),
        ("modify_tir_in", "MODIFY_TIR (0x901) input."),
        ("modify_tir_out", "MODIFY_TIR (0x901) output."),
        ("destroy_tir_in", "DESTROY_TIR (0x902) input."),
        ("destroy_tir_out", "DESTROY_TIR (0x902) output."),
        ("create_rqt_in", "CREATE_RQT (0x916) input."),
        ("create_rqt_out", "CREATE_RQT (0x916) output."),
        ("modify_rqt_in", "MODIFY_RQT (0x917) input."),
        ("modify_rqt_out", "MODIFY_RQT (0x917) output."),
        ("destroy_rqt_in", "DESTROY_RQT (0x918) input."),
        ("destroy_rqt_out", "DESTROY_RQT (0x918) output."),
        ("tisc", "The transport interface send context (PRM \"TISC\")."),
        ("tirc", "The transport interface receive context (PRM \"TIRC\")."),
        ("rx_hash_field_select", "The packet fields a TIR hashes (in `tirc`)."),
        ("rqtc", "The RQ table context (PRM \"RQTC\"); the RQ numbers follow."),
        ("rq_num", "One RQ number of an RQT."),
    ],
    "sq_rq": [
        ("set_delay_drop_params_in", "SET_DELAY_DROP_PARAMS (0x910) input: how long an RQ with `delay_drop_en` and no WQE holds a frame (100 µs units; 0 disarms)."),
        ("set_delay_drop_params_out", "SET_DELAY_DROP_PARAMS (0x910) output."),
        ("create_sq_in", "CREATE_SQ (0x904) input."),
        ("create_sq_out", "CREATE_SQ (0x904) output."),
        ("modify_sq_in", "MODIFY_SQ (0x905) input."),
        ("modify_sq_out", "MODIFY_SQ (0x905) output."),
        ("destroy_sq_in", "DESTROY_SQ (0x906) input."),
        ("destroy_sq_out", "DESTROY_SQ (0x906) output."),
        ("query_sq_in", "QUERY_SQ (0x907) input."),
        ("query_sq_out", "QUERY_SQ (0x907) output."),
        ("create_rq_in", "CREATE_RQ (0x908) input."),
        ("create_rq_out", "CREATE_RQ (0x908) output."),
        ("modify_rq_in", "MODIFY_RQ (0x909) input."),
        ("modify_rq_out", "MODIFY_RQ (0x909) output."),
        ("destroy_rq_in", "DESTROY_RQ (0x90a) input."),
        ("destroy_rq_out", "DESTROY_RQ (0x90a) output."),
        ("query_rq_in", "QUERY_RQ (0x90b) input."),
        ("query_rq_out", "QUERY_RQ (0x90b) output."),
        ("alloc_q_counter_in", "ALLOC_Q_COUNTER (0x771) input."),
        ("alloc_q_counter_out", "ALLOC_Q_COUNTER (0x771) output."),
        ("dealloc_q_counter_in", "DEALLOC_Q_COUNTER (0x772) input."),
        ("dealloc_q_counter_out", "DEALLOC_Q_COUNTER (0x772) output."),
        ("query_q_counter_in", "QUERY_Q_COUNTER (0x773) input."),
        ("query_q_counter_out", "QUERY_Q_COUNTER (0x773) output."),
        ("query_vport_counter_in", "QUERY_VPORT_COUNTER (0x770) input."),
        ("query_vport_counter_out", "QUERY_VPORT_COUNTER (0x770) output."),
        ("sqc", "The send queue context (PRM \"SQC\")."),
        ("rqc", "The receive queue context (PRM \"RQC\")."),
        ("traffic_counter", "A packet and octet counter pair."),
    ],
    "flow": [
        ("create_flow_table_in", "CREATE_FLOW_TABLE (0x930) input."),
        ("create_flow_table_out", "CREATE_FLOW_TABLE (0x930) output."),
        ("destroy_flow_table_in", "DESTROY_FLOW_TABLE (0x931) input."),
        ("destroy_flow_table_out", "DESTROY_FLOW_TABLE (0x931) output."),
        ("set_flow_table_root_in", "SET_FLOW_TABLE_ROOT (0x92f) input."),
        ("set_flow_table_root_out", "SET_FLOW_TABLE_ROOT (0x92f) output."),
        ("modify_flow_table_in", "MODIFY_FLOW_TABLE (0x93c) input."),
        ("modify_flow_table_out", "MODIFY_FLOW_TABLE (0x93c) output."),
        ("create_flow_group_in", "CREATE_FLOW_GROUP (0x933) input."),
        ("create_flow_group_out", "CREATE_FLOW_GROUP (0x933) output."),
        ("destroy_flow_group_in", "DESTROY_FLOW_GROUP (0x934) input."),
        ("destroy_flow_group_out", "DESTROY_FLOW_GROUP (0x934) output."),
        ("set_fte_in", "SET_FLOW_TABLE_ENTRY (0x936) input."),
        ("set_fte_out", "SET_FLOW_TABLE_ENTRY (0x936) output."),
        ("delete_fte_in", "DELETE_FLOW_TABLE_ENTRY (0x938) input."),
        ("delete_fte_out", "DELETE_FLOW_TABLE_ENTRY (0x938) output."),
        ("query_flow_table_in", "QUERY_FLOW_TABLE (0x932) input."),
        ("query_flow_table_out", "QUERY_FLOW_TABLE (0x932) output: the table's context (a software-owned table's ICM roots)."),
        ("flow_table_context", "A flow table's properties (in CREATE/MODIFY_FLOW_TABLE)."),
        ("flow_context", "A flow table entry: match value, action and destinations (SET_FLOW_TABLE_ENTRY)."),
        ("dest_format_struct", "One destination of a flow table entry."),
        ("fte_match_param", "Match criteria or value: outer headers, misc, inner headers, misc 2-5."),
        ("fte_match_set_lyr_2_4", "Layer 2-4 header fields of a match."),
        ("fte_match_set_misc", "Miscellaneous fields of a match (VXLAN VNI, GRE key, source port, ...)."),
    ],
    "flow_counter": [
        ("alloc_flow_counter_in", "ALLOC_FLOW_COUNTER (0x939) input: one counter, or a bulk (`flow_counter_bulk_log_size`: 2^n; `flow_counter_bulk`: 128 × n)."),
        ("alloc_flow_counter_out", "ALLOC_FLOW_COUNTER (0x939) output: the (first) counter id; a bulk is the ids from it on."),
        ("dealloc_flow_counter_in", "DEALLOC_FLOW_COUNTER (0x93a) input: a counter, or a bulk by its first id."),
        ("dealloc_flow_counter_out", "DEALLOC_FLOW_COUNTER (0x93a) output."),
        ("query_flow_counter_in", "QUERY_FLOW_COUNTER (0x93b) input: `num_of_counters` from `flow_counter_id` (0: one), `clear`."),
        ("query_flow_counter_out", "QUERY_FLOW_COUNTER (0x93b) output; a traffic counter per counter from byte 0x10."),
        ("traffic_counter", "A flow counter's packets and octets."),
        ("flow_counter_list", "A counter in a flow table entry's list (after its destinations, their stride)."),
    ],
    "reformat": [
        ("alloc_packet_reformat_context_in", "ALLOC_PACKET_REFORMAT_CONTEXT (0x93d) input; the reformat data from byte 0x22."),
        ("alloc_packet_reformat_context_out", "ALLOC_PACKET_REFORMAT_CONTEXT (0x93d) output."),
        ("dealloc_packet_reformat_context_in", "DEALLOC_PACKET_REFORMAT_CONTEXT (0x93e) input."),
        ("dealloc_packet_reformat_context_out", "DEALLOC_PACKET_REFORMAT_CONTEXT (0x93e) output."),
        ("packet_reformat_context_in", "A packet reformat context: type, parameters, data size; the data follows."),
    ],
    "modify_header": [
        ("alloc_modify_header_context_in", "ALLOC_MODIFY_HEADER_CONTEXT (0x940) input; `num_of_actions` 8-byte actions from byte 0x10."),
        ("alloc_modify_header_context_out", "ALLOC_MODIFY_HEADER_CONTEXT (0x940) output."),
        ("dealloc_modify_header_context_in", "DEALLOC_MODIFY_HEADER_CONTEXT (0x941) input."),
        ("dealloc_modify_header_context_out", "DEALLOC_MODIFY_HEADER_CONTEXT (0x941) output."),
        ("set_action_in", "A SET action (action_type 1): `length` bits (0: 32) of `data` into `field` from bit `offset`."),
        ("add_action_in", "An ADD action (action_type 2): `data` added to `field`."),
        ("copy_action_in", "A COPY action (action_type 3): `length` bits (0: 32) of `src_field` from `src_offset` to `dst_field` at `dst_offset`."),
    ],
    "odp": [
        ("odp_cap", "On-demand paging capabilities (HCA_CAP cap_type 2): the transport page-fault scheme's per-transport operations."),
        ("odp_scheme_cap", "One page-fault scheme of `odp_cap`: which operations of each transport may fault."),
        ("odp_per_transport_service_cap", "The operations of one transport that may take a page fault (send, receive, write, read, atomic, SRQ receive)."),
        ("wqe_associated_page_fault_event", "Event data of a PAGE_FAULT event (type 0x0c) of sub-type WQE: the WQE, its queue and the fault's direction."),
        ("rdma_page_fault_event", "Event data of a PAGE_FAULT event (type 0x0c) of sub-type RDMA: the remote key and range the responder could not reach."),
        ("page_fault_resume_in", "PAGE_FAULT_RESUME (0x204) input: the fault resolved (or failed)."),
        ("page_fault_resume_out", "PAGE_FAULT_RESUME (0x204) output."),
        ("page_fault_resume_in_page_fault_info_auto", "The fault a PAGE_FAULT_RESUME names (a union)."),
        ("trans_page_fault_info", "A transport page fault in PAGE_FAULT_RESUME: error, type, the queue and the fault's token."),
    ],
    "devx": [
        ("create_uctx_in", "CREATE_UCTX (0xa04) input: a user context (DevX) with the capabilities it asks for; no uid in the header."),
        ("create_uctx_out", "CREATE_UCTX (0xa04) output: the context's uid, which its commands carry from then on."),
        ("destroy_uctx_in", "DESTROY_UCTX (0xa06) input: the uid at byte 10, not in the header."),
        ("destroy_uctx_out", "DESTROY_UCTX (0xa06) output."),
        ("uctx", "A user context's capabilities (`cap`: RAW_TX 0x1, INTERNAL_DEV_RES 0x2)."),
        ("create_umem_in", "CREATE_UMEM (0xa08) input: user memory registered for DevX objects; the MTT list follows the umem."),
        ("create_umem_out", "CREATE_UMEM (0xa08) output: the umem id."),
        ("destroy_umem_in", "DESTROY_UMEM (0xa0a) input."),
        ("destroy_umem_out", "DESTROY_UMEM (0xa0a) output."),
        ("umem", "A user memory region: page size, offset into the first page, and its MTT entries (a flexible tail)."),
    ],
    "memic": [
        ("device_mem_cap", "Device memory capabilities (HCA_CAP cap_type 0xf): the MEMIC window in BAR0 and its allocations; SW ICM."),
        ("alloc_memic_in", "ALLOC_MEMIC (0x205) input: device memory from a range of the MEMIC window."),
        ("alloc_memic_out", "ALLOC_MEMIC (0x205) output: the allocation's BAR0 offset."),
        ("dealloc_memic_in", "DEALLOC_MEMIC (0x206) input."),
        ("dealloc_memic_out", "DEALLOC_MEMIC (0x206) output."),
    ],
    "general_obj": [
        ("general_obj_in_cmd_hdr", "The input of CREATE (0xa00), MODIFY (0xa01), QUERY (0xa02) and DESTROY_GENERAL_OBJECT (0xa03): the object's type and id; DESTROY's whole input."),
        ("general_obj_out_cmd_hdr", "The output of the general object commands: the id of the object created; DESTROY's whole output."),
        ("general_obj_create_param", "CREATE_GENERAL_OBJECT's `op_param`: an alias, or a range of 2^`log_obj_range` objects."),
        ("general_obj_query_param", "QUERY_GENERAL_OBJECT's `op_param`: an alias, or the object at `obj_offset` of a range."),
        ("flow_sampler", "A FLOW_SAMPLER object (general object type 0x20), after the `general_obj_in_cmd_hdr` of CREATE_GENERAL_OBJECT and the `general_obj_out_cmd_hdr` of QUERY_GENERAL_OBJECT: one frame in `sample_ratio` also goes to the sample table (a termination table), every frame to the default table; QUERY reports the ICM addresses an STE jumps to."),
    ],
    "sw_icm": [
        ("sw_icm", "A SW ICM object (general object type 0x8): steering memory the software writes (STEs, rewrite actions), `2^log_sw_icm_size` bytes at `sw_icm_start_addr`."),
        ("create_sw_icm_in", "CREATE_GENERAL_OBJECT (0xa00) input for a SW ICM object; the output is `general_obj_out_cmd_hdr`."),
        ("sync_steering_in", "SYNC_STEERING (0xb00) input: the device drops what it cached of software-written steering ICM."),
        ("sync_steering_out", "SYNC_STEERING (0xb00) output."),
    ],
    "ste": [
        ("dr_hw_ste_format", "A 64-byte steering entry (STE, format v0) in steering ICM: control (bytes 0..31, laid out by `entry_type`: `SteRxSteeringMult`, `SteSxTransmit`, `SteModifyPacket`), then the tag (bytes 32..47) and the mask (bytes 48..63), both laid out by the entry's lookup type (`super::ste_tag`)."),
        ("ste_general", "The control bytes every STE shares: entry type, its own lookup type, the next table's hash byte mask, lookup type and address. Its `tag_value`/`bit_mask` (12 bytes at bytes 32 and 44) are a leftover of an older format: v0's tag and mask are `DrHwSteFormat::TAG` and `DrHwSteFormat::MASK`, 16 bytes each."),
        ("ste_rx_steering_mult", "Control of an RX STE (`entry_type` 2): the flow tag (`qp_list_pointer`), tunneling action, flow counter and miss address."),
        ("ste_sx_transmit", "Control of a TX STE (`entry_type` 1): action type (push VLAN, encap) and its data, flow counter and miss address."),
        ("ste_modify_packet", "Control of a MODIFY_PKT STE (`entry_type` 6): the rewrite action list (count; pointer in 64-byte units of header-modify ICM), tunneling action, flow counter and miss address."),
        ("dr_action_hw_set", "An 8-byte SET (0x2) or ADD (0x3) rewrite action of a MODIFY_PKT STE's list: field code, left shift, length (0 means 32), data."),
        ("dr_action_hw_copy", "An 8-byte COPY (0x1) rewrite action: destination and source field codes and shifts, length."),
    ],
    "ste_tag": [
        ("ste_eth_l2_src", "STE v0 tag (and mask) of lookup ETHL2_SRC (0x08 outer TX, 0x09 inner, 0x1c outer RX): source MAC, EtherType, two VLANs, L3 type, fragment."),
        ("ste_eth_l2_dst", "STE v0 tag of ETHL2_DST (0x06 / 0x07 / 0x1b): destination MAC, EtherType, two VLANs, L3 type, fragment."),
        ("ste_eth_l2_src_dst", "STE v0 tag of ETHL2_SRC_DST (0x36 / 0x37 / 0x38): both MACs, L3 type, first VLAN."),
        ("ste_eth_l2_tnl", "STE v0 tag of ETHL2_TUNNELING_I (0x0a): inner destination MAC and EtherType, the tunnel's network id (VXLAN VNI << 8), inner VLAN."),
        ("ste_eth_l3_ipv4_5_tuple", "STE v0 tag of ETHL3_IPV4_5_TUPLE (0x11 / 0x12 / 0x20): IPv4 addresses, L4 ports, protocol, DSCP/ECN, TCP flags, fragment."),
        ("ste_eth_l3_ipv4_misc", "STE v0 tag of ETHL3_IPV4_MISC (0x29 / 0x2a / 0x2b): the IPv4 header's first 12 bytes (IHL, TTL, ...)."),
        ("ste_eth_l3_ipv6_dst", "STE v0 tag of ETHL3_IPV6_DST (0x0d / 0x0e / 0x1e): the IPv6 destination address."),
        ("ste_eth_l3_ipv6_src", "STE v0 tag of ETHL3_IPV6_SRC (0x0f / 0x10 / 0x1f; 0x0f is also DONT_CARE): the IPv6 source address."),
        ("ste_eth_l4", "STE v0 tag of ETHL4 (0x13 / 0x14 / 0x21), the IPv6 L3+L4 lookup: protocol, ports, TCP flags, hop limit, DSCP/ECN, flow label."),
        ("ste_eth_l4_misc", "STE v0 tag of ETHL4_MISC (0x2c / 0x2d / 0x2e): TCP sequence and acknowledgement numbers, checksum, length, window, urgent pointer."),
        ("ste_mpls", "STE v0 tag of MPLS_FIRST (0x15 / 0x24 / 0x25): the first MPLS label stack entry, later labels and their qualifiers."),
        ("ste_gre", "STE v0 tag of GRE (0x16): C/K/S bits, protocol type, key."),
        ("ste_general_purpose", "STE v0 tag of GENERAL_PURPOSE (0x18): metadata register A."),
        ("ste_register_0", "STE v0 tag of STEERING_REGISTERS_0 (0x2f): reg_c_0 (`register_0_h`), reg_c_1, reg_c_2, reg_c_3 (`register_1_l`)."),
        ("ste_register_1", "STE v0 tag of STEERING_REGISTERS_1 (0x30): reg_c_4 (`register_2_h`) to reg_c_7 (`register_3_l`)."),
        ("ste_src_gvmi_qp", "STE v0 tag of SRC_GVMI_AND_QP (0x05): the sender's gvmi (vhca id), loopback bits, source QP (SQ number)."),
        ("ste_flex_parser_0", "STE v0 tag of FLEX_PARSER_0 (0x22): flex parsers 3, 2, 1, 0, 32 bits each."),
        ("ste_flex_parser_1", "STE v0 tag of FLEX_PARSER_1 (0x23): flex parsers 7, 6, 5, 4."),
        ("ste_flex_parser_tnl_vxlan_gpe", "STE v0 tag of FLEX_PARSER_TNL_HEADER (0x19) for VXLAN-GPE: flags, next protocol, VNI."),
        ("ste_flex_parser_tnl_geneve", "STE v0 tag of FLEX_PARSER_TNL_HEADER (0x19) for GENEVE: option length, OAM, protocol type, VNI."),
        ("ste_flex_parser_tnl_gtpu", "STE v0 tag of FLEX_PARSER_TNL_HEADER (0x19) for GTP-U: flags, message type, TEID."),
        ("ste_tunnel_header", "STE v0 tag of TUNNEL_HEADER (0x34): the tunnel header's first two dwords."),
    ],
    "pacing": [
        ("qos_cap", "QoS capabilities (HCA_CAP cap_type 0xc): packet pacing (rate-limited send queues) and scheduling."),
        ("set_pp_rate_limit_in", "SET_PP_RATE_LIMIT (0x780) input: one entry of the packet pacing rate table."),
        ("set_pp_rate_limit_out", "SET_PP_RATE_LIMIT (0x780) output."),
        ("set_pp_rate_limit_context", "A packet pacing rate table entry: the rate (kbit/s; 0 frees it), burst bound, typical packet size."),
    ],
}


def camel(name):
    parts = name.split("_")
    return "".join(p[:1].upper() + p[1:] for p in parts)


def const_name(field):
    n = field.replace(".", "_").upper()
    if n[0].isdigit():
        n = "F_" + n
    return n


def main():
    check = "--check" in sys.argv
    facts = json.load(open(REF))
    source = {s: "mlx5_ifc_offsets.json" for s in facts if not s.startswith("_")}
    ste = json.load(open(STE))
    for struct, fields in ste.items():
        if struct.startswith("_"):
            continue
        assert struct not in facts, f"{struct}: in both references"
        facts[struct] = {f: tuple(v) for f, v in fields.items()}
        facts["_sizes"][struct] = ste["_sizes"][struct]
        source[struct] = "ste-v0.json"
    for struct, fields in json.load(open(NAMES)).items():
        if struct.startswith("_"):
            continue
        merged = dict(facts[struct])
        merged.update({f: tuple(v) for f, v in fields.items()})
        facts[struct] = dict(sorted(merged.items(), key=lambda kv: (kv[1][0], kv[0])))
    generated = {s for room in ROOMS.values() for s, _ in room}
    room_of = {s: room for room, structs in ROOMS.items() for s, _ in structs}
    files = {}
    all_entries = []
    for room, structs in ROOMS.items():
        sources = sorted({source[s] for s, _ in structs}, key=lambda n: n != "mlx5_ifc_offsets.json")
        out = [
            f"// @generated by hw/ifc/gen/ifcgen.py from reference/{' and reference/'.join(sources)}: do not edit.",
            f"//! Layouts of the `{room}` room.",
            "",
            "#[allow(unused_imports)]",
            "use crate::layout::{Bytes, Field, FieldInfo, Layout, Nested};",
            "",
        ]
        for s, doc in structs:
            fields = facts[s]
            size = facts["_sizes"][s] // 8
            members = facts["_member_types"].get(s, {})
            ty = camel(s)
            consts, infos = [], []
            for fname, (bit, width) in fields.items():
                if fname.startswith("reserved") or "#" in fname:
                    continue
                mt = members.get(fname)
                cn = const_name(fname)
                loc = f"bit {bit:#x}, width {width}, byte {bit // 8:#x}"
                if mt and mt.get("kind") in ("struct", "union") and mt["type"] in generated and mt.get("count", 1) == 1:
                    inner = camel(mt['type'])
                    if room_of[mt['type']] != room:
                        inner = f"super::{room_of[mt['type']]}::{inner}"
                    consts.append(f"    #[doc = \"`{fname}` ({mt['type']}): {loc}.\"] pub const {cn}: Nested<Self, {inner}> = Nested::new(\"{fname}\", {bit:#x}, {width});")
                elif width <= 64 and width > 0 and not mt:
                    consts.append(f"    #[doc = \"`{fname}`: {loc}.\"] pub const {cn}: Field<Self> = Field::new(\"{fname}\", {bit:#x}, {width});")
                elif bit % 8 == 0 and width % 8 == 0:
                    consts.append(f"    #[doc = \"`{fname}` (bytes): {loc}.\"] pub const {cn}: Bytes<Self> = Bytes::new(\"{fname}\", {bit:#x}, {width});")
                elif width <= 64:
                    consts.append(f"    #[doc = \"`{fname}`: {loc}.\"] pub const {cn}: Field<Self> = Field::new(\"{fname}\", {bit:#x}, {width});")
                else:
                    continue
                infos.append(f"Self::{cn}.info")
            out.append(f"/// {doc}")
            if source[s] == "mlx5_ifc_offsets.json":
                origin = f"`mlx5_ifc` structure `{s}`"
            elif s.startswith("dr_hw_"):
                origin = f"rdma-core structure `{s}` (dr_ste.c; reference/{source[s]})"
            else:
                origin = f"rdma-core `mlx5_ifc` structure `{s}` (reference/{source[s]})"
            out.append(f"///\n/// {origin}, {size} bytes.")
            out.append("#[derive(Debug, Clone, Copy)]")
            out.append(f"pub struct {ty};")
            out.append("")
            out.append(f"impl {ty} {{")
            out.extend(consts)
            out.append("}")
            out.append("")
            out.append(f"impl Layout for {ty} {{")
            out.append(f"    const NAME: &'static str = \"{s}\";")
            out.append(f"    const BYTES: usize = {size:#x};")
            out.append("    const FIELDS: &'static [FieldInfo] = &[")
            for k in range(0, len(infos), 4):
                out.append("        " + " ".join(f"{i}," for i in infos[k:k + 4]))
            out.append("    ];")
            out.append("}")
            out.append("")
            all_entries.append(f"    (\"{s}\", {room}::{ty}::BYTES, {room}::{ty}::FIELDS),")
        files[f"{room}.rs"] = "\n".join(out).rstrip() + "\n"
    mod = [
        "// @generated by hw/ifc/gen/ifcgen.py from reference/mlx5_ifc_offsets.json and reference/ste-v0.json: do not edit.",
        "//! PRM structures as layouts, one module per hardware object (\"room\").",
        "//!",
        "//! Every named field of every structure listed here is a typed constant at its `mlx5_ifc`",
        "//! bit offset and width; `tests/conformance.rs` checks each against the reference facts.",
        "",
    ]
    for room in ROOMS:
        mod.append(f"#[rustfmt::skip]\npub mod {room};")
    mod.append("")
    mod.append("use crate::layout::{FieldInfo, Layout};")
    mod.append("")
    mod.append("/// Every generated layout: `(mlx5_ifc name, size in bytes, fields)`.")
    mod.append("pub const ALL: &[(&str, usize, &[FieldInfo])] = &[")
    mod.extend(all_entries)
    mod.append("];")
    files["mod.rs"] = "\n".join(mod) + "\n"
    stale = []
    os.makedirs(OUT, exist_ok=True)
    for name, text in files.items():
        path = os.path.join(OUT, name)
        old = open(path).read() if os.path.exists(path) else None
        if old != text:
            stale.append(name)
            if not check:
                open(path, "w").write(text)
    if check and stale:
        print("stale generated layouts:", ", ".join(stale))
        sys.exit(1)
    print(("checked" if check else "wrote"), len(files), "files;", len(all_entries), "layouts")


if __name__ == "__main__":
    main()
