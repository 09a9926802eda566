//! The syndromes the simulated firmware reports with a failed command status.
//!
//! Real firmware syndromes are not publicly decoded; the simulator uses its own, one per reason,
//! so a test can tell *why* a command failed. Every syndrome reads `0x5e SS NNNN`: `0x5e`
//! ("sim"), `SS` = the command status it comes with, `NNNN` = the reason.
//!
//! | syndrome | status | reason |
//! |---|---|---|
//! | `0x5e010001` INTERNAL | INTERNAL_ERR 0x01 | the simulator could not encode its output (a simulator bug) |
//! | `0x5e020001` UNKNOWN_OPCODE | BAD_OP 0x02 | the opcode is not implemented |
//! | `0x5e020002` CREATE_SRQ_AT_ISSI_1 | BAD_OP | CREATE_SRQ at ISSI 1: use CREATE_RMP |
//! | `0x5e020003` CREATE_RMP_AT_ISSI_0 | BAD_OP | CREATE_RMP at ISSI 0 (RMPs need ISSI ≥ 1) |
//! | `0x5e030001` BAD_FUNCTION_ID | BAD_PARAM 0x03 | `function_id`, `embedded_cpu_function` or `other_function` not 0 |
//! | `0x5e030002` BAD_ISSI | BAD_PARAM | SET_ISSI `current_issi` not 0 or 1 |
//! | `0x5e030003` BAD_OP_MOD | BAD_PARAM | `op_mod` not defined for the command |
//! | `0x5e030004` PAS_ZERO | BAD_PARAM | MANAGE_PAGES give: page address 0 |
//! | `0x5e030005` PAS_UNALIGNED | BAD_PARAM | MANAGE_PAGES give: page address not 4 KiB aligned |
//! | `0x5e030006` PAS_UNMAPPED | BAD_PARAM | MANAGE_PAGES give: page not inside a DMA mapping (a `DmaFault` is recorded) |
//! | `0x5e030007` PAS_DUPLICATE | BAD_PARAM | MANAGE_PAGES give: page already held (or listed twice) |
//! | `0x5e030008` BAD_CAP_TYPE | BAD_PARAM | QUERY/SET_HCA_CAP capability type other than general (0) and RoCE (4) |
//! | `0x5e030009` CAP_EXCEEDS_MAX | BAD_PARAM | SET_HCA_CAP: a `log_max_*` field above its MAX |
//! | `0x5e03000a` BAD_CMDIF_CHECKSUM | BAD_PARAM | SET_HCA_CAP: `cmdif_checksum` not 0, 1 or 3 |
//! | `0x5e03000b` BAD_TEARDOWN_PROFILE | BAD_PARAM | TEARDOWN_HCA profile not 0/1 (2 without `fast_teardown`) |
//! | `0x5e03000c` BAD_GID_INDEX | BAD_PARAM | SET/QUERY_ROCE_ADDRESS index ≥ `roce_address_table_size` |
//! | `0x5e03000d` BAD_VHCA_PORT | BAD_PARAM | `vhca_port_num` not 0 or 1 |
//! | `0x5e03000e` BAD_ROCE_ADDRESS | BAD_PARAM | SET_ROCE_ADDRESS: `roce_version` not 0/2 or `roce_l3_type` not 0/1 |
//! | `0x5e03000f` BAD_REGISTER_ID | BAD_PARAM | ACCESS_REG of a register the device does not implement (or DTOR write) |
//! | `0x5e030010` BAD_REGISTER_FIELD | BAD_PARAM | ACCESS_REG write of a bad value (PAOS admin_status, PMTU admin_mtu) |
//! | `0x5e030011` BAD_LOCAL_PORT | BAD_PARAM | ACCESS_REG PAOS/PMTU `local_port` not 1 |
//! | `0x5e030012` BAD_VPORT | BAD_PARAM | `other_vport` set or `vport_number` not 0 |
//! | `0x5e030013` BAD_MTU | BAD_PARAM | MODIFY_NIC_VPORT_CONTEXT mtu 0 or above the port maximum |
//! | `0x5e030014` BAD_UID | BAD_PARAM | `uid` not 0, the shared 0xffff or a live user context (any `uid` ≠ 0 while `log_max_uctx` is 0); CREATE_UMEM with uid 0 |
//! | `0x5e030015` QUEUE_PAGE_SIZE | BAD_PARAM | queue `log_page_size` (`log_wq_pg_sz`) above 31 (wider than the 5-bit field) |
//! | `0x5e030016` QUEUE_PAGE_OFFSET | BAD_PARAM | queue `page_offset` of 64 or more (it counts 64ths of a page; a defensive check, the fields are at most 6 bits) |
//! | `0x5e030017` QUEUE_PAS_MISSING | BAD_PARAM | a needed queue PAS entry is 0 (fewer pages than the queue needs) |
//! | `0x5e030018` QUEUE_PAS_UNALIGNED | BAD_PARAM | a queue PAS entry not aligned to the queue page size |
//! | `0x5e030019` QUEUE_PAS_UNMAPPED | BAD_PARAM | a queue page (its used part) not inside one DMA mapping (a `DmaFault` is recorded) |
//! | `0x5e03001a` DBR_UNALIGNED | BAD_PARAM | `dbr_addr` not 8-byte aligned |
//! | `0x5e03001b` DBR_UNMAPPED | BAD_PARAM | the doorbell record not inside a DMA mapping (a `DmaFault` is recorded) |
//! | `0x5e03001c` EQ_TOO_BIG | BAD_PARAM | CREATE_EQ `log_eq_size` above `log_max_eq_sz` |
//! | `0x5e03001d` BAD_EQ_INTR | BAD_PARAM | CREATE_EQ `intr` not below the 64 MSI-X vectors |
//! | `0x5e03001e` CQ_TOO_BIG | BAD_PARAM | CREATE_CQ `log_cq_size` above `log_max_cq_sz` |
//! | `0x5e03001f` BAD_CQE_SIZE | BAD_PARAM | CREATE_CQ `cqe_sz` not 0 (64 B) or 1 (128 B) |
//! | `0x5e030020` SRQ_TOO_BIG | BAD_PARAM | CREATE_SRQ `log_srq_size` / CREATE_RMP `log_wq_sz` above `log_max_srq_sz` |
//! | `0x5e030021` BAD_SRQ_STRIDE | BAD_PARAM | SRQ / RMP WQE stride below 16 or above `max_wqe_sz_rq` |
//! | `0x5e030022` BAD_RMP_STATE | BAD_PARAM | CREATE_RMP `state` not RDY |
//! | `0x5e030023` BAD_WQ_TYPE | BAD_PARAM | CREATE_RMP `wq_type` not linked list |
//! | `0x5e030024` BAD_QP_ST | BAD_PARAM | CREATE_QP `st` not RC, UC or UD |
//! | `0x5e030025` QP_ST_NOT_SUPPORTED | BAD_PARAM | CREATE_QP `st` whose capability (`rc`, `uc`, `ud`) is 0, or `block_lb_mc` without the `block_lb_mc` capability |
//! | `0x5e030026` BAD_RQ_TYPE | BAD_PARAM | CREATE_QP `rq_type` not 0 (regular), 1 (SRQ/RMP) or 3 (zero-length) |
//! | `0x5e030027` RQ_TOO_BIG | BAD_PARAM | CREATE_QP `log_rq_size` above `log_max_qp_sz` |
//! | `0x5e030028` BAD_RQ_STRIDE | BAD_PARAM | CREATE_QP `log_rq_stride` above 5 or its stride above `max_wqe_sz_rq` |
//! | `0x5e030029` RQ_SIZE_WITHOUT_RQ | BAD_PARAM | CREATE_QP `log_rq_size` not 0 with an SRQ or a zero-length RQ |
//! | `0x5e03002a` SQ_TOO_BIG | BAD_PARAM | CREATE_QP `log_sq_size` above `log_max_qp_sz` |
//! | `0x5e03002b` SQ_SIZE_WITH_NO_SQ | BAD_PARAM | CREATE_QP `no_sq` with a `log_sq_size` not 0 |
//! | `0x5e03002c` BAD_OPT_PARAM_MASK | BAD_PARAM | QP transition: an `opt_param_mask` bit the transition does not take |
//! | `0x5e03002d` BAD_QP_PORT | BAD_PARAM | QP primary path `vhca_port_num` not 1 |
//! | `0x5e03002e` BAD_PKEY_INDEX | BAD_PARAM | QP primary path `pkey_index` out of the P_Key table (not 0 on Ethernet) |
//! | `0x5e03002f` QP_ACCESS_NOT_SUPPORTED | BAD_PARAM | `rre`/`rae` on a UC QP, `rre`/`rwe`/`rae` on a UD QP |
//! | `0x5e030030` BAD_PATH_MTU | BAD_PARAM | INIT2RTR (RC/UC) `mtu` not 1..=5 |
//! | `0x5e030031` BAD_REMOTE_QPN | BAD_PARAM | INIT2RTR (RC/UC) `remote_qpn` 0 or 1 |
//! | `0x5e030032` MISSING_RMAC | BAD_PARAM | INIT2RTR (RC/UC) primary path `rmac` 0; arming (PM_STATE REARM/ARMED) an alternate path whose `rmac` is 0 |
//! | `0x5e030033` QP_GID_INDEX | BAD_PARAM | INIT2RTR (RC/UC) `src_addr_index` not below `roce_address_table_size` |
//! | `0x5e030034` QP_GID_NOT_SET | BAD_PARAM | INIT2RTR (RC/UC) `src_addr_index` names a GID entry SET_ROCE_ADDRESS has not set |
//! | `0x5e030035` RRA_MAX_TOO_BIG | BAD_PARAM | INIT2RTR (RC) `log_rra_max` above `log_max_ra_res_qp` |
//! | `0x5e030036` SRA_MAX_TOO_BIG | BAD_PARAM | RTR2RTS (RC) `log_sra_max` above `log_max_ra_req_qp` |
//! | `0x5e030037` MSG_MAX_TOO_BIG | BAD_PARAM | INIT2RTR (RC/UC) `log_msg_max` above `log_max_msg` |
//! | `0x5e030038` MKEY_ACCESS_MODE | BAD_PARAM | CREATE_MKEY `access_mode` not PA (0) or MTT (1) |
//! | `0x5e030039` MKEY_PAGE_SIZE | BAD_PARAM | CREATE_MKEY (MTT) `log_page_size` (absolute log2) below 12 or above 30 (pages under 4 KiB or above 1 GiB) |
//! | `0x5e03003a` MKEY_MTT_SIZE | BAD_PARAM | CREATE_MKEY (MTT) `translations_octword_size` below the MTT entries `start_addr`/`len` span |
//! | `0x5e03003b` MKEY_MTT_UNALIGNED | BAD_PARAM | CREATE_MKEY (MTT) an MTT entry (low 12 bits masked) not aligned to the page size |
//! | `0x5e03003c` MKEY_MTT_UNMAPPED | BAD_PARAM | CREATE_MKEY (MTT) the used part of an MTT page not inside one DMA mapping (a `DmaFault` is recorded) |
//! | `0x5e03003d` MKEY_LENGTH | BAD_PARAM | CREATE_MKEY `length64` with MTT access, or `start_addr + len` past 2^64 |
//! | `0x5e03003e` PAGES_NOT_REQUESTED | BAD_PARAM | MANAGE_PAGES give of more pages than the firmware asked for (QUERY_PAGES boot/init demand before INIT_HCA, PAGE_REQUEST events after it) |
//! | `0x5e030050` ROCE_NOT_WRITABLE | BAD_PARAM | SET_HCA_CAP (general) changes `roce` while the current `roce_rw_supported` is 0 |
//! | `0x5e030051` BAD_ATOMIC_ENDIANNESS | BAD_PARAM | SET_HCA_CAP (atomic) `atomic_req_8B_endianness_mode` not 0, or 1 without `supported_atomic_req_8B_endianness_mode_1` |
//! | `0x5e030052` SW_OWNER_ID_NOT_SUPPORTED | BAD_PARAM | INIT_HCA with a nonzero `sw_owner_id` while the capability `sw_owner_id` is 0 |
//! | `0x5e030053` VHCA_PORT_NOT_SUPPORTED | BAD_PARAM | SET/QUERY_ROCE_ADDRESS with a nonzero `vhca_port_num` while `num_vhca_ports` is 0 |
//! | `0x5e030054` BAD_PM_STATE | BAD_PARAM | RST2INIT `pm_state` not MIGRATED (3): no alternate path exists to arm |
//! | `0x5e030055` BAD_ATOMIC_MODE | BAD_PARAM | `rae` with `atomic_mode` above 8 (UP_TO_256B) |
//! | `0x5e030056` SRQ_LIMIT | BAD_PARAM | ARM_RQ / MODIFY_RMP `lwm` above the SRQ's size |
//! | `0x5e030057` FT_UNSUPPORTED_TYPE | BAD_PARAM | a flow table type without `ft_support` (or `modify_root`, `flow_modify_en` for what needs them), or a reformat or termination table where the type has no `reformat` / `termination_table` (NIC TX), a decap table |
//! | `0x5e030058` FT_LEVEL | BAD_PARAM | CREATE_FLOW_TABLE `level` above `max_ft_level` |
//! | `0x5e030059` FT_SIZE | BAD_PARAM | CREATE_FLOW_TABLE `log_size` above `log_max_ft_size` |
//! | `0x5e03005a` FT_MISS_ACTION | BAD_PARAM | `table_miss_action` not 0/1, a miss table of another type or not at a higher level, or MODIFY_FLOW_TABLE of another field |
//! | `0x5e03005b` FG_RANGE | BAD_PARAM | CREATE_FLOW_GROUP index range empty, beyond the table, or overlapping another group |
//! | `0x5e03005c` FG_CRITERIA | BAD_PARAM | CREATE_FLOW_GROUP `match_criteria_enable` beyond outer headers and misc, or a `group_type` other than 0 |
//! | `0x5e03005d` FTE_INDEX | BAD_PARAM | SET_FLOW_TABLE_ENTRY `flow_index` outside its group `group_id` of the table |
//! | `0x5e03005e` FTE_ACTION | BAD_PARAM | an entry `action` other than one of ALLOW, DROP, FWD_DEST, or FWD_DEST without destinations (or destinations without it) |
//! | `0x5e03005f` FTE_DEST | BAD_PARAM | an entry destination not a TIR or a higher-level table of the type, counters, extended destinations, or more than `2^log_max_destination` |
//! | `0x5e030060` FTE_EXISTS | BAD_PARAM | SET_FLOW_TABLE_ENTRY op_mod 0 at an index that holds an entry |
//! | `0x5e030061` TIR_DISP | BAD_PARAM | CREATE/MODIFY_TIR `disp_type` not 0/1, `rx_hash_fn` above 2, LRO or TLS |
//! | `0x5e030062` RQT_SIZE | BAD_PARAM | RQT `rqt_max_size` not 1..=`2^log_max_rqt_size`, `rqt_actual_size` not 1..=max, `list_q_type` not 0, or MODIFY_RQT of another field |
//! | `0x5e030063` WQ_SIZE | BAD_PARAM | RQ/SQ `log_wq_sz` above `log_max_wq_sz` or a stride below 16 B or above `max_wqe_sz_rq`/`max_wqe_sz_sq` |
//! | `0x5e030064` WQ_STATE | BAD_PARAM | CREATE_RQ/SQ with a context `state` other than RST |
//! | `0x5e030065` TIS_FIELD | BAD_PARAM | CREATE/MODIFY_TIS with TLS, an underlay QPN or a LAG port affinity |
//! | `0x5e030066` CQ_MODIFY_FIELD | BAD_PARAM | MODIFY_CQ: op_mod other than 0 (moderation) and 1 (resize); moderation: a `modify_field_select` bit other than period and count, or no `cq_moderation`; resize: a `resize_field_select` bit other than log size, page offset and page size, log size not selected, or no `cq_resize` |
//! | `0x5e030067` CQ_RESIZE_TOO_SMALL | BAD_PARAM | MODIFY_CQ resize to fewer entries than the CQ holds unpolled, plus one for the resize CQE |
//! | `0x5e030068` MCG_QP_TYPE | BAD_PARAM | ATTACH_TO_MCG / DETACH_FROM_MCG of a QP that is not UD (or is QP1 or a UMR QP) |
//! | `0x5e030069` MCG_GID | BAD_PARAM | ATTACH_TO_MCG / DETACH_FROM_MCG `multicast_gid` not a multicast address (0xff…, or IPv4-mapped 224.0.0.0/4) |
//! | `0x5e03006a` MCG_NOT_ATTACHED | BAD_PARAM | DETACH_FROM_MCG of a QP not attached to that group |
//! | `0x5e03006b` PAGE_FAULT_UNKNOWN | BAD_PARAM | PAGE_FAULT_RESUME naming no outstanding page fault (queue, type, token) |
//! | `0x5e03006c` PP_RATE_INDEX | BAD_PARAM | SET_PP_RATE_LIMIT index 0 or past `packet_pacing_rate_table_size`; an SQ's rate index not set (or no packet pacing) |
//! | `0x5e03006e` MEMIC_PARAM | BAD_PARAM | ALLOC_MEMIC of size 0 or above `max_memic_size`, an alignment above `log_max_memic_addr_alignment`, a range outside the MEMIC window (or no `memic`) |
//! | `0x5e030070` DELAY_DROP_NOT_SUPPORTED | BAD_PARAM | SET_DELAY_DROP_PARAMS without `rq_delay_drop` |
//! | `0x5e030073` UCTX_CAP | BAD_PARAM | CREATE_UCTX asking for a `cap` bit `uctx_cap` does not offer |
//! | `0x5e030074` UMEM_PARAM | BAD_PARAM | CREATE_UMEM: `log_page_size` above 18, `page_offset` not inside the first page, `num_of_mtt` 0 or above 2^18 |
//! | `0x5e030075` UMEM_RANGE | BAD_PARAM | a queue or doorbell record in a umem (`*_umem_valid`) past its end, a queue not starting on a 64th of a umem page (or in pages over 2 MiB), a doorbell record across a page |
//! | `0x5e030076` BAD_CS_RES | BAD_PARAM | CREATE_DCT `cs_res` (responder scatter to CQE) not 0, 1 or 2 |
//! | `0x5e030077` COUNTER_BULK | BAD_PARAM | ALLOC_FLOW_COUNTER of a bulk (`flow_counter_bulk`, `flow_counter_bulk_log_size`): the device offers single counters (`flow_counter_bulk_alloc` 0) |
//! | `0x5e030078` BAD_REFORMAT | BAD_PARAM | ALLOC_PACKET_REFORMAT_CONTEXT of a type the device does not offer, or data beyond `max_encap_header_size` or the input |
//! | `0x5e030079` BAD_ADDRESS_LIST | BAD_PARAM | MODIFY_NIC_VPORT_CONTEXT of a unicast address list longer than `2^log_max_current_uc_list` |
//! | `0x5e03007a` NOT_VPORT_MANAGER | BAD_PARAM | MODIFY_VPORT_STATE from a function that manages no vport (`vport_group_manager` and `eswitch_manager` 0: a VF, and the simulated PF): a vport's admin state is the e-switch manager's to set |
//! | `0x5e03007b` FORCE_LOOPBACK | BAD_PARAM | INIT2RTR with the primary path's `fl` (force loopback) on a QP that is not RC, or on a device whose `roce_cap` does not offer it for the current `roce_en` (`fl_rc_qp_when_roce_enabled` / `_disabled`) |
//! | `0x5e03007c` GENERAL_OBJ_TYPE | BAD_PARAM | CREATE/QUERY/DESTROY_GENERAL_OBJECT of an `obj_type` the device does not offer in `general_obj_types` (it offers SW_ICM and FLOW_SAMPLER) |
//! | `0x5e03007d` SW_ICM_PARAM | BAD_PARAM | CREATE_GENERAL_OBJECT SW_ICM: a size below the granularity (`2^log_sw_icm_alloc_granularity`), a start not aligned to it, or a range not inside the steering or the header-modify SW ICM region |
//! | `0x5e03007e` SW_ICM_OVERLAP | BAD_PARAM | CREATE_GENERAL_OBJECT SW_ICM of a range overlapping a live SW ICM object |
//! | `0x5e03007f` FT_SW_OWNER_ROOT | BAD_PARAM | CREATE_FLOW_TABLE of a software-owned table (`sw_owner`) whose `sw_owner_icm_root_0` (or a non-zero `_root_1`) is not 64-byte aligned inside a live SW ICM object |
//! | `0x5e030080` FT_SW_OWNED | BAD_PARAM | CREATE_FLOW_GROUP in a software-owned table (its entries are STEs in ICM, software's to write) |
//! | `0x5e030082` BAD_SAMPLER | BAD_PARAM | CREATE_GENERAL_OBJECT FLOW_SAMPLER: a `table_type` other than NIC RX (0), `sample_ratio` 0, or (without `ignore_flow_level`) a default table not above the sampler's `level` |
//! | `0x5e030081` BAD_MODIFY_HEADER | BAD_PARAM | ALLOC_MODIFY_HEADER_CONTEXT: `table_type` not NIC RX (0) or NIC TX (1), `num_of_actions` 0 or above `max_modify_header_actions`, an action whose type is not SET/ADD/COPY, whose field is not one the device rewrites, or whose offset + length pass the field |
//! | `0x5e030072` CQE_COMPRESSION | BAD_PARAM | CREATE_CQ with `cqe_comp_en` and no `cqe_compression`; a `mini_cqe_res_format` of 2, or 3 (CSUM_STRIDX) without `mini_cqe_resp_stride_index`; 128-byte CQEs without `cqe_compression_128`; a `cqe_compression_layout` other than 0 (basic) |
//! | `0x5e030071` STRIDING_RQ | BAD_PARAM | CREATE_RQ of a striding RQ (`wq_type` 2 or 3) without `striding_rq`, a `log_wqe_num_of_strides` that encodes no stride count (an extended one without `ext_stride_num_range`), or a WQE stride below 32 bytes |
//! | `0x5e03006f` MEMIC_UNKNOWN | BAD_PARAM | DEALLOC_MEMIC of an address and size not handed out |
//! | `0x5e03006d` PP_RATE_RANGE | BAD_PARAM | SET_PP_RATE_LIMIT rate outside `packet_pacing_min_rate`..`_max_rate`, or a burst bound / typical size the device does not offer |
//! | `0x5e040001` NOT_ENABLED | BAD_SYS_STATE 0x04 | a command other than ENABLE_HCA before ENABLE_HCA |
//! | `0x5e040002` ALREADY_ENABLED | BAD_SYS_STATE | ENABLE_HCA while enabled |
//! | `0x5e040003` NOT_INITIALIZED | BAD_SYS_STATE | a command that needs INIT_HCA before it (or after TEARDOWN_HCA) |
//! | `0x5e040004` ALREADY_INITIALIZED | BAD_SYS_STATE | INIT_HCA while initialized |
//! | `0x5e040005` INSUFFICIENT_PAGES | BAD_SYS_STATE | INIT_HCA with fewer than boot + init pages held |
//! | `0x5e040006` SET_CAP_AFTER_INIT | BAD_SYS_STATE | SET_HCA_CAP after INIT_HCA |
//! | `0x5e040007` DISABLE_WHILE_INITIALIZED | BAD_SYS_STATE | DISABLE_HCA before TEARDOWN_HCA |
//! | `0x5e050001` UNKNOWN_UAR | BAD_RES 0x05 | a UAR not allocated (DEALLOC_UAR, `uar_page` of CREATE_EQ/CQ/QP) |
//! | `0x5e050002` UNKNOWN_PD | BAD_RES | a PD not allocated (DEALLOC_PD, `pd` of CREATE_SRQ/RMP/QP) |
//! | `0x5e050003` UNKNOWN_EQ | BAD_RES | an EQ number that is not a live EQ (DESTROY/QUERY_EQ, CREATE_CQ `c_eqn`) |
//! | `0x5e050004` UNKNOWN_CQ | BAD_RES | a CQ number that is not a live CQ (DESTROY/QUERY_CQ, CREATE_QP `cqn_snd`/`cqn_rcv`) |
//! | `0x5e050005` UNKNOWN_SRQ | BAD_RES | an SRQ / RMP number that is not live (DESTROY/QUERY_SRQ/RMP, CREATE_QP `srqn_rmpn_xrqn`) |
//! | `0x5e050006` UNKNOWN_QP | BAD_RES | a QP number that is not a live QP (every QP command) |
//! | `0x5e050007` UNKNOWN_MKEY | BAD_RES | DESTROY/QUERY_MKEY of an index that is not a live mkey |
//! | `0x5e050008` UNKNOWN_TD | BAD_RES | a transport domain that is not allocated |
//! | `0x5e050009` UNKNOWN_TIS | BAD_RES | a TIS that is not live |
//! | `0x5e05000a` UNKNOWN_TIR | BAD_RES | a TIR that is not live |
//! | `0x5e05000b` UNKNOWN_RQT | BAD_RES | an RQT that is not live |
//! | `0x5e05000c` UNKNOWN_RQ | BAD_RES | an RQ that is not live |
//! | `0x5e05000d` UNKNOWN_SQ | BAD_RES | an SQ that is not live |
//! | `0x5e05000e` UNKNOWN_FLOW_TABLE | BAD_RES | a flow table that is not live (or of another `table_type`) |
//! | `0x5e05000f` UNKNOWN_FLOW_GROUP | BAD_RES | a flow group that is not live in that table |
//! | `0x5e050010` UNKNOWN_FTE | BAD_RES | no flow table entry at that index |
//! | `0x5e050011` UNKNOWN_Q_COUNTER | BAD_RES | a Q counter that is not allocated |
//! | `0x5e050012` UNKNOWN_XRCD | BAD_RES | an XRC domain that is not allocated |
//! | `0x5e050013` UNKNOWN_UCTX | BAD_RES | DESTROY_UCTX of a uid that is no user context |
//! | `0x5e050014` UNKNOWN_UMEM | BAD_RES | a umem that is not registered (or another context's) |
//! | `0x5e050015` UNKNOWN_DCT | BAD_RES | a DCT number that is not a live DCT (DESTROY/DRAIN/QUERY_DCT, ARM_DCT_FOR_KEY_VIOLATION) |
//! | `0x5e050016` UNKNOWN_FLOW_COUNTER | BAD_RES | a flow counter that is not allocated (DEALLOC/QUERY_FLOW_COUNTER, an FTE's counter list) |
//! | `0x5e050018` UNKNOWN_GENERAL_OBJECT | BAD_RES | QUERY/DESTROY_GENERAL_OBJECT of an `obj_id` that is no live object of its type (or another context's) |
//! | `0x5e050017` UNKNOWN_PACKET_REFORMAT | BAD_RES | a packet reformat context that is not allocated (DEALLOC, an FTE's `packet_reformat_id`) |
//! | `0x5e050019` UNKNOWN_MODIFY_HEADER | BAD_RES | a modify header context that is not allocated (or another context's: DEALLOC), or an FTE's `modify_header_id` of another table type |
//! | `0x5e060001` UAR_IN_USE | RES_BUSY 0x06 | DEALLOC_UAR of a UAR an EQ, CQ or QP uses |
//! | `0x5e060002` PD_IN_USE | RES_BUSY | DEALLOC_PD of a PD an SRQ, RMP or QP uses |
//! | `0x5e060003` EQ_IN_USE | RES_BUSY | DESTROY_EQ of an EQ a CQ reports to |
//! | `0x5e060004` CQ_IN_USE | RES_BUSY | DESTROY_CQ of a CQ a QP uses (either `cqn`) |
//! | `0x5e060005` SRQ_IN_USE | RES_BUSY | DESTROY_SRQ/RMP of an SRQ/RMP a QP uses |
//! | `0x5e060006` TD_IN_USE | RES_BUSY | DEALLOC_TRANSPORT_DOMAIN of a domain a TIS or TIR uses |
//! | `0x5e060007` TIS_IN_USE | RES_BUSY | DESTROY_TIS of a TIS an SQ uses |
//! | `0x5e060008` WQ_IN_USE | RES_BUSY | DESTROY_RQ of an RQ a TIR or RQT uses (DESTROY_SQ, DEALLOC_Q_COUNTER likewise) |
//! | `0x5e060009` RQT_IN_USE | RES_BUSY | DESTROY_RQT of an RQT a TIR uses |
//! | `0x5e06000a` TIR_IN_USE | RES_BUSY | DESTROY_TIR of a TIR a flow table entry forwards to |
//! | `0x5e06000b` FLOW_TABLE_IN_USE | RES_BUSY | DESTROY_FLOW_TABLE of a table with groups, or one an entry or a table miss forwards to |
//! | `0x5e06000c` FLOW_GROUP_IN_USE | RES_BUSY | DESTROY_FLOW_GROUP of a group with entries |
//! | `0x5e06000d` XRCD_IN_USE | RES_BUSY | DEALLOC_XRCD of a domain an XRC SRQ uses |
//! | `0x5e06000e` GSI_QP_EXISTS | RES_BUSY | CREATE_QP of a second QP1 (GSI QP) |
//! | `0x5e06000f` MEMIC_IN_USE | RES_BUSY | DEALLOC_MEMIC of device memory a MEMIC key reaches |
//! | `0x5e060010` UCTX_IN_USE | RES_BUSY | DESTROY_UCTX of a context that still owns objects |
//! | `0x5e060011` UMEM_IN_USE | RES_BUSY | DESTROY_UMEM of a umem an object lives in |
//! | `0x5e060012` FLOW_COUNTER_IN_USE | RES_BUSY | DEALLOC_FLOW_COUNTER of a counter a flow table entry counts in |
//! | `0x5e060014` SW_ICM_IN_USE | RES_BUSY | DESTROY_GENERAL_OBJECT of a SW ICM object a SW_ICM mkey reaches |
//! | `0x5e060013` PACKET_REFORMAT_IN_USE | RES_BUSY | DEALLOC_PACKET_REFORMAT_CONTEXT of a context an entry uses |
//! | `0x5e060015` MODIFY_HEADER_IN_USE | RES_BUSY | DEALLOC_MODIFY_HEADER_CONTEXT of a context an entry uses |
//! | `0x5e080001` UAR_EXHAUSTED | EXCEED_LIM 0x08 | every UAR page of BAR0 is allocated |
//! | `0x5e080002` PD_EXHAUSTED | EXCEED_LIM | `2^log_max_pd - 1` PDs allocated |
//! | `0x5e080003` EQ_EXHAUSTED | EXCEED_LIM | `2^log_max_eq - 1` EQs live |
//! | `0x5e080004` CQ_EXHAUSTED | EXCEED_LIM | `2^log_max_cq - 1` CQs live |
//! | `0x5e080005` SRQ_EXHAUSTED | EXCEED_LIM | `2^log_max_srq - 1` SRQs + RMPs live (RMP: or `2^log_max_rmp - 1` RMPs) |
//! | `0x5e080006` QP_EXHAUSTED | EXCEED_LIM | `2^log_max_qp - 1` QPs live |
//! | `0x5e080007` MKEY_EXHAUSTED | EXCEED_LIM | `2^log_max_mkey - 1` mkeys live (the reserved lkey and null mkey included) |
//! | `0x5e080008` NET_EXHAUSTED | EXCEED_LIM | `2^log_max_*` transport domains, TISes, TIRs, RQTs, RQs or SQs live, or `max_qp_cnt` Q counters |
//! | `0x5e080009` FLOW_TABLE_EXHAUSTED | EXCEED_LIM | `2^log_max_ft_num` flow tables live (or no handle left for a group or an entry) |
//! | `0x5e08000a` MCG_EXHAUSTED | EXCEED_LIM | ATTACH_TO_MCG beyond `2^log_max_mcg` groups or `max_qp_mcg` QPs in the group |
//! | `0x5e08000b` UCTX_EXHAUSTED | EXCEED_LIM | `2^log_max_uctx - 1` user contexts live |
//! | `0x5e08000c` UMEM_EXHAUSTED | EXCEED_LIM | `2^log_max_umem - 1` umems registered |
//! | `0x5e08000d` FLOW_COUNTER_EXHAUSTED | EXCEED_LIM | `max_flow_counter` counters allocated |
//! | `0x5e08000f` SW_ICM_EXHAUSTED | EXCEED_LIM | no general object handle left for a SW ICM object |
//! | `0x5e08000e` PACKET_REFORMAT_EXHAUSTED | EXCEED_LIM | `2^log_max_packet_reformat_context - 1` reformat contexts allocated |
//! | `0x5e080010` MODIFY_HEADER_EXHAUSTED | EXCEED_LIM | `2^log_max_modify_header_context - 1` modify header contexts allocated |
//! | `0x5e080011` FLOW_SAMPLER_EXHAUSTED | EXCEED_LIM | no general object handle left for a flow sampler (2^24 − 1 live) |
//! | `0x5e090001` QP_WRONG_STATE | BAD_RES_STATE 0x09 | a QP transition from a state it does not start from |
//! | `0x5e090002` WQ_WRONG_STATE | BAD_RES_STATE | MODIFY_RQ/SQ from a state the queue is not in, or to one it cannot reach |
//! | `0x5e090003` DCT_NOT_ACTIVE | BAD_RES_STATE | DRAIN_DCT or ARM_DCT_FOR_KEY_VIOLATION of a DCT draining or drained |
//! | `0x5e0f0002` MEMIC_NO_ROOM | NO_RESOURCES | ALLOC_MEMIC with no free place of that size and alignment in its range (Linux tries its next page) |
//! | `0x5e0f0001` PAGES_ALLOC_FAIL | NO_RESOURCES 0x0f | a command waiting for firmware pages when the driver answered MANAGE_PAGES op_mod 0 (it cannot give them) |
//! | `0x5e500001` INLEN_BELOW_HEADER | BAD_INPUT_LEN 0x50 | `input_length` < 8 |
//! | `0x5e500002` INLEN_BELOW_LAYOUT | BAD_INPUT_LEN | `input_length` < the command's `*_in` size |
//! | `0x5e500003` INLEN_PAS | BAD_INPUT_LEN | MANAGE_PAGES give: `input_length` does not cover `input_num_entries` |
//! | `0x5e500004` INLEN_REGISTER | BAD_INPUT_LEN | ACCESS_REG: `input_length` does not cover the register |
//! | `0x5e500005` INLEN_QUEUE_PAS | BAD_INPUT_LEN | CREATE_EQ/CQ/SRQ/RMP/QP: `input_length` does not cover the PAS entries the queue needs |
//! | `0x5e500006` INLEN_MKEY_MTT | BAD_INPUT_LEN | CREATE_MKEY (MTT): `input_length` does not cover the MTT entries |
//! | `0x5e510001` OUTLEN_BELOW_LAYOUT | BAD_OUTPUT_LEN 0x51 | `output_length` < the command's `*_out` size |
//! | `0x5e510002` OUTLEN_REGISTER | BAD_OUTPUT_LEN | ACCESS_REG: `output_length` does not cover the register |

macro_rules! syndromes {
    ($($(#[doc = $doc:literal])* $name:ident = $val:expr;)*) => {
        $($(#[doc = $doc])* pub const $name: u32 = $val;)*

        /// Every syndrome, for the table check below.
        #[cfg(test)]
        const ALL: &[(&str, u32)] = &[$((stringify!($name), $val),)*];

        /// The name of a simulator syndrome (`"PD_EXHAUSTED"`), if it is one.
        pub fn name(syndrome: u32) -> Option<&'static str> {
            match syndrome {
                $($val => Some(stringify!($name)),)*
                _ => None,
            }
        }
    };
}

syndromes! {
    /// INTERNAL_ERR: the simulator could not encode its output (a simulator bug).
    INTERNAL = 0x5e01_0001;
    /// BAD_OP: the opcode is not implemented.
    UNKNOWN_OPCODE = 0x5e02_0001;
    /// BAD_OP: CREATE_SRQ at ISSI 1: use CREATE_RMP.
    CREATE_SRQ_AT_ISSI_1 = 0x5e02_0002;
    /// BAD_OP: CREATE_RMP at ISSI 0.
    CREATE_RMP_AT_ISSI_0 = 0x5e02_0003;
    /// BAD_PARAM: `function_id`, `embedded_cpu_function` or `other_function` not 0.
    BAD_FUNCTION_ID = 0x5e03_0001;
    /// BAD_PARAM: SET_ISSI `current_issi` not 0 or 1.
    BAD_ISSI = 0x5e03_0002;
    /// BAD_PARAM: `op_mod` not defined for the command.
    BAD_OP_MOD = 0x5e03_0003;
    /// BAD_PARAM: MANAGE_PAGES give of page address 0.
    PAS_ZERO = 0x5e03_0004;
    /// BAD_PARAM: MANAGE_PAGES give of a page address not 4 KiB aligned.
    PAS_UNALIGNED = 0x5e03_0005;
    /// BAD_PARAM: MANAGE_PAGES give of a page not inside a DMA mapping.
    PAS_UNMAPPED = 0x5e03_0006;
    /// BAD_PARAM: MANAGE_PAGES give of a page already held or listed twice.
    PAS_DUPLICATE = 0x5e03_0007;
    /// BAD_PARAM: capability type other than general and RoCE.
    BAD_CAP_TYPE = 0x5e03_0008;
    /// BAD_PARAM: SET_HCA_CAP sets a `log_max_*` field above its MAX.
    CAP_EXCEEDS_MAX = 0x5e03_0009;
    /// BAD_PARAM: SET_HCA_CAP `cmdif_checksum` not 0, 1 or 3.
    BAD_CMDIF_CHECKSUM = 0x5e03_000a;
    /// BAD_PARAM: TEARDOWN_HCA profile not supported.
    BAD_TEARDOWN_PROFILE = 0x5e03_000b;
    /// BAD_PARAM: RoCE address index out of the table.
    BAD_GID_INDEX = 0x5e03_000c;
    /// BAD_PARAM: `vhca_port_num` not 0 or 1.
    BAD_VHCA_PORT = 0x5e03_000d;
    /// BAD_PARAM: RoCE address with a bad version or L3 type.
    BAD_ROCE_ADDRESS = 0x5e03_000e;
    /// BAD_PARAM: ACCESS_REG of a register the device does not implement.
    BAD_REGISTER_ID = 0x5e03_000f;
    /// BAD_PARAM: ACCESS_REG write of a bad register value.
    BAD_REGISTER_FIELD = 0x5e03_0010;
    /// BAD_PARAM: ACCESS_REG `local_port` not 1.
    BAD_LOCAL_PORT = 0x5e03_0011;
    /// BAD_PARAM: `other_vport` set or `vport_number` not 0.
    BAD_VPORT = 0x5e03_0012;
    /// BAD_PARAM: NIC vport MTU 0 or above the port maximum.
    BAD_MTU = 0x5e03_0013;
    /// BAD_PARAM: `uid` not 0, 0xffff or a live user context.
    BAD_UID = 0x5e03_0014;
    /// BAD_PARAM: queue page size above 2 MiB.
    QUEUE_PAGE_SIZE = 0x5e03_0015;
    /// BAD_PARAM: queue `page_offset` not 0.
    QUEUE_PAGE_OFFSET = 0x5e03_0016;
    /// BAD_PARAM: a needed queue PAS entry is 0.
    QUEUE_PAS_MISSING = 0x5e03_0017;
    /// BAD_PARAM: a queue PAS entry not aligned to the queue page size.
    QUEUE_PAS_UNALIGNED = 0x5e03_0018;
    /// BAD_PARAM: a queue page not inside a DMA mapping.
    QUEUE_PAS_UNMAPPED = 0x5e03_0019;
    /// BAD_PARAM: `dbr_addr` not 8-byte aligned.
    DBR_UNALIGNED = 0x5e03_001a;
    /// BAD_PARAM: the doorbell record not inside a DMA mapping.
    DBR_UNMAPPED = 0x5e03_001b;
    /// BAD_PARAM: `log_eq_size` above `log_max_eq_sz`.
    EQ_TOO_BIG = 0x5e03_001c;
    /// BAD_PARAM: EQ `intr` not below 64.
    BAD_EQ_INTR = 0x5e03_001d;
    /// BAD_PARAM: `log_cq_size` above `log_max_cq_sz`.
    CQ_TOO_BIG = 0x5e03_001e;
    /// BAD_PARAM: `cqe_sz` not 0 or 1.
    BAD_CQE_SIZE = 0x5e03_001f;
    /// BAD_PARAM: SRQ / RMP size above `log_max_srq_sz`.
    SRQ_TOO_BIG = 0x5e03_0020;
    /// BAD_PARAM: SRQ / RMP stride below 16 or above `max_wqe_sz_rq`.
    BAD_SRQ_STRIDE = 0x5e03_0021;
    /// BAD_PARAM: CREATE_RMP `state` not RDY.
    BAD_RMP_STATE = 0x5e03_0022;
    /// BAD_PARAM: CREATE_RMP `wq_type` not linked list.
    BAD_WQ_TYPE = 0x5e03_0023;
    /// BAD_PARAM: QP `st` not RC, UC or UD.
    BAD_QP_ST = 0x5e03_0024;
    /// BAD_PARAM: QP `st` the device's capabilities do not offer.
    QP_ST_NOT_SUPPORTED = 0x5e03_0025;
    /// BAD_PARAM: QP `rq_type` not 0, 1 or 3.
    BAD_RQ_TYPE = 0x5e03_0026;
    /// BAD_PARAM: QP `log_rq_size` above `log_max_qp_sz`.
    RQ_TOO_BIG = 0x5e03_0027;
    /// BAD_PARAM: QP RQ stride above 512 or `max_wqe_sz_rq`.
    BAD_RQ_STRIDE = 0x5e03_0028;
    /// BAD_PARAM: QP `log_rq_size` not 0 without an RQ of its own.
    RQ_SIZE_WITHOUT_RQ = 0x5e03_0029;
    /// BAD_PARAM: QP `log_sq_size` above `log_max_qp_sz`.
    SQ_TOO_BIG = 0x5e03_002a;
    /// BAD_PARAM: QP `no_sq` with `log_sq_size` not 0.
    SQ_SIZE_WITH_NO_SQ = 0x5e03_002b;
    /// BAD_PARAM: an `opt_param_mask` bit the QP transition does not take.
    BAD_OPT_PARAM_MASK = 0x5e03_002c;
    /// BAD_PARAM: QP `vhca_port_num` not 1.
    BAD_QP_PORT = 0x5e03_002d;
    /// BAD_PARAM: QP `pkey_index` out of the P_Key table.
    BAD_PKEY_INDEX = 0x5e03_002e;
    /// BAD_PARAM: remote access flags the QP's service type does not have.
    QP_ACCESS_NOT_SUPPORTED = 0x5e03_002f;
    /// BAD_PARAM: INIT2RTR `mtu` not 1..=5.
    BAD_PATH_MTU = 0x5e03_0030;
    /// BAD_PARAM: INIT2RTR `remote_qpn` 0 or 1.
    BAD_REMOTE_QPN = 0x5e03_0031;
    /// BAD_PARAM: INIT2RTR `rmac` 0.
    MISSING_RMAC = 0x5e03_0032;
    /// BAD_PARAM: INIT2RTR `src_addr_index` out of the RoCE address table.
    QP_GID_INDEX = 0x5e03_0033;
    /// BAD_PARAM: INIT2RTR `src_addr_index` names an unset GID entry.
    QP_GID_NOT_SET = 0x5e03_0034;
    /// BAD_PARAM: INIT2RTR `log_rra_max` above `log_max_ra_res_qp`.
    RRA_MAX_TOO_BIG = 0x5e03_0035;
    /// BAD_PARAM: RTR2RTS `log_sra_max` above `log_max_ra_req_qp`.
    SRA_MAX_TOO_BIG = 0x5e03_0036;
    /// BAD_PARAM: INIT2RTR `log_msg_max` above `log_max_msg`.
    MSG_MAX_TOO_BIG = 0x5e03_0037;
    /// BAD_PARAM: CREATE_MKEY access mode not PA or MTT.
    MKEY_ACCESS_MODE = 0x5e03_0038;
    /// BAD_PARAM: CREATE_MKEY MTT page size above 1 GiB.
    MKEY_PAGE_SIZE = 0x5e03_0039;
    /// BAD_PARAM: CREATE_MKEY `translations_octword_size` too small.
    MKEY_MTT_SIZE = 0x5e03_003a;
    /// BAD_PARAM: an MTT entry not aligned to the mkey page size.
    MKEY_MTT_UNALIGNED = 0x5e03_003b;
    /// BAD_PARAM: an MTT page not inside a DMA mapping.
    MKEY_MTT_UNMAPPED = 0x5e03_003c;
    /// BAD_PARAM: CREATE_MKEY `length64` with MTT, or the range overflows.
    MKEY_LENGTH = 0x5e03_003d;
    /// BAD_PARAM: MANAGE_PAGES give of more pages than the firmware asked for.
    PAGES_NOT_REQUESTED = 0x5e03_003e;
    /// BAD_PARAM: SET_HCA_CAP changes `roce` while `roce_rw_supported` is 0.
    ROCE_NOT_WRITABLE = 0x5e03_0050;
    /// BAD_PARAM: SET_HCA_CAP (atomic) with an unsupported requester endianness mode.
    BAD_ATOMIC_ENDIANNESS = 0x5e03_0051;
    /// BAD_PARAM: INIT_HCA `sw_owner_id` without the `sw_owner_id` capability.
    SW_OWNER_ID_NOT_SUPPORTED = 0x5e03_0052;
    /// BAD_PARAM: RoCE address `vhca_port_num` nonzero while `num_vhca_ports` is 0.
    VHCA_PORT_NOT_SUPPORTED = 0x5e03_0053;
    /// BAD_PARAM: RST2INIT `pm_state` not MIGRATED.
    BAD_PM_STATE = 0x5e03_0054;
    /// BAD_PARAM: `atomic_mode` above 8 with `rae`.
    BAD_ATOMIC_MODE = 0x5e03_0055;
    /// BAD_PARAM: ARM_RQ / MODIFY_RMP `lwm` above the SRQ's size.
    SRQ_LIMIT = 0x5e03_0056;
    /// BAD_PARAM: a flow table type without `ft_support` (or `modify_root`, `flow_modify_en` for what needs them), or a reformat / termination table the type does not offer, or a decap table.
    FT_UNSUPPORTED_TYPE = 0x5e03_0057;
    /// BAD_PARAM: CREATE_FLOW_TABLE `level` above `max_ft_level`.
    FT_LEVEL = 0x5e03_0058;
    /// BAD_PARAM: CREATE_FLOW_TABLE `log_size` above `log_max_ft_size`.
    FT_SIZE = 0x5e03_0059;
    /// BAD_PARAM: `table_miss_action` not 0/1, a miss table of another type or not at a higher level, or MODIFY_FLOW_TABLE of another field.
    FT_MISS_ACTION = 0x5e03_005a;
    /// BAD_PARAM: CREATE_FLOW_GROUP index range empty, beyond the table, or overlapping another group.
    FG_RANGE = 0x5e03_005b;
    /// BAD_PARAM: CREATE_FLOW_GROUP `match_criteria_enable` beyond outer headers and misc, or a `group_type` other than 0.
    FG_CRITERIA = 0x5e03_005c;
    /// BAD_PARAM: SET_FLOW_TABLE_ENTRY `flow_index` outside its group `group_id` of the table.
    FTE_INDEX = 0x5e03_005d;
    /// BAD_PARAM: an entry `action` other than one of ALLOW, DROP, FWD_DEST, or FWD_DEST without destinations (or destinations without it).
    FTE_ACTION = 0x5e03_005e;
    /// BAD_PARAM: an entry destination not a TIR or a higher-level table of the type, counters, extended destinations, or more than `2^log_max_destination`.
    FTE_DEST = 0x5e03_005f;
    /// BAD_PARAM: SET_FLOW_TABLE_ENTRY op_mod 0 at an index that holds an entry.
    FTE_EXISTS = 0x5e03_0060;
    /// BAD_PARAM: CREATE/MODIFY_TIR `disp_type` not 0/1, `rx_hash_fn` above 2, LRO or TLS.
    TIR_DISP = 0x5e03_0061;
    /// BAD_PARAM: RQT `rqt_max_size` not 1..=`2^log_max_rqt_size`, `rqt_actual_size` not 1..=max, `list_q_type` not 0, or MODIFY_RQT of another field.
    RQT_SIZE = 0x5e03_0062;
    /// BAD_PARAM: RQ/SQ `log_wq_sz` above `log_max_wq_sz` or a stride below 16 B or above `max_wqe_sz_rq`/`max_wqe_sz_sq`.
    WQ_SIZE = 0x5e03_0063;
    /// BAD_PARAM: CREATE_RQ/SQ with a context `state` other than RST.
    WQ_STATE = 0x5e03_0064;
    /// BAD_PARAM: CREATE/MODIFY_TIS with TLS, an underlay QPN or a LAG port affinity.
    TIS_FIELD = 0x5e03_0065;
    /// BAD_PARAM: MODIFY_CQ op_mod, a field select it does not take, or no `cq_moderation` / `cq_resize`.
    CQ_MODIFY_FIELD = 0x5e03_0066;
    /// BAD_PARAM: MODIFY_CQ resize to fewer entries than unpolled CQEs plus the resize CQE.
    CQ_RESIZE_TOO_SMALL = 0x5e03_0067;
    /// BAD_PARAM: a multicast attach / detach of a QP that is not UD (or QP1, a UMR QP).
    MCG_QP_TYPE = 0x5e03_0068;
    /// BAD_PARAM: `multicast_gid` not a multicast address.
    MCG_GID = 0x5e03_0069;
    /// BAD_PARAM: DETACH_FROM_MCG of a QP not in the group.
    MCG_NOT_ATTACHED = 0x5e03_006a;
    /// PAGE_FAULT_RESUME names no outstanding page fault.
    PAGE_FAULT_UNKNOWN = 0x5e03_006b;
    /// BAD_PARAM: a packet pacing rate index outside the table or not set.
    PP_RATE_INDEX = 0x5e03_006c;
    /// BAD_PARAM: a packet pacing rate outside the device's range, or a burst bound it lacks.
    PP_RATE_RANGE = 0x5e03_006d;
    /// BAD_PARAM: ALLOC_MEMIC's size, alignment or range.
    MEMIC_PARAM = 0x5e03_006e;
    /// BAD_PARAM: DEALLOC_MEMIC of no allocation.
    MEMIC_UNKNOWN = 0x5e03_006f;
    /// BAD_PARAM: SET_DELAY_DROP_PARAMS on a device without delay drop.
    DELAY_DROP_NOT_SUPPORTED = 0x5e03_0070;
    /// BAD_PARAM: a striding RQ the device does not take (no `striding_rq`, a stride count
    /// that is not encoded, a WQE stride below 32 bytes).
    STRIDING_RQ = 0x5e03_0071;
    /// BAD_PARAM: CQE compression the device does not offer (no `cqe_compression`, a mini CQE
    /// format it lacks, 128-byte CQEs without `cqe_compression_128`, the enhanced layout).
    CQE_COMPRESSION = 0x5e03_0072;
    /// BAD_PARAM: CREATE_UCTX `cap` beyond `uctx_cap`.
    UCTX_CAP = 0x5e03_0073;
    /// BAD_PARAM: CREATE_UMEM page size, offset or page count.
    UMEM_PARAM = 0x5e03_0074;
    /// BAD_PARAM: a queue or doorbell record that a umem does not hold as asked.
    UMEM_RANGE = 0x5e03_0075;
    /// BAD_PARAM: CREATE_DCT `cs_res` not 0, 1 or 2.
    BAD_CS_RES = 0x5e03_0076;
    /// BAD_PARAM: a bulk of flow counters; the device offers single ones.
    COUNTER_BULK = 0x5e03_0077;
    /// BAD_PARAM: a packet reformat type or size the device does not offer.
    BAD_REFORMAT = 0x5e03_0078;
    /// BAD_PARAM: a unicast address list longer than the function's.
    BAD_ADDRESS_LIST = 0x5e03_0079;
    /// BAD_PARAM: MODIFY_VPORT_STATE from a function that manages no vport.
    NOT_VPORT_MANAGER = 0x5e03_007a;
    /// BAD_PARAM: force loopback (`fl`) on a QP that is not RC, or not offered.
    FORCE_LOOPBACK = 0x5e03_007b;
    /// BAD_PARAM: a general object type the device does not offer.
    GENERAL_OBJ_TYPE = 0x5e03_007c;
    /// BAD_PARAM: a SW ICM range of a bad size or alignment, or outside the regions.
    SW_ICM_PARAM = 0x5e03_007d;
    /// BAD_PARAM: a SW ICM range overlapping a live object.
    SW_ICM_OVERLAP = 0x5e03_007e;
    /// BAD_PARAM: a software-owned table's root not in a live SW ICM object.
    FT_SW_OWNER_ROOT = 0x5e03_007f;
    /// BAD_PARAM: a flow group in a software-owned table.
    FT_SW_OWNED = 0x5e03_0080;
    /// BAD_PARAM: ALLOC_MODIFY_HEADER_CONTEXT of a table type other than NIC RX/TX, no actions
    /// or more than `max_modify_header_actions`, or an action of a type, field, offset or length
    /// the device does not take.
    BAD_MODIFY_HEADER = 0x5e03_0081;
    /// BAD_PARAM: a flow sampler of a table type other than NIC RX, a sample ratio of 0, or a
    /// default table not above its level (without `ignore_flow_level`).
    BAD_SAMPLER = 0x5e03_0082;
    /// BAD_SYS_STATE: command before ENABLE_HCA.
    NOT_ENABLED = 0x5e04_0001;
    /// BAD_SYS_STATE: ENABLE_HCA while enabled.
    ALREADY_ENABLED = 0x5e04_0002;
    /// BAD_SYS_STATE: command needs INIT_HCA.
    NOT_INITIALIZED = 0x5e04_0003;
    /// BAD_SYS_STATE: INIT_HCA while initialized.
    ALREADY_INITIALIZED = 0x5e04_0004;
    /// BAD_SYS_STATE: INIT_HCA with fewer than boot + init pages held.
    INSUFFICIENT_PAGES = 0x5e04_0005;
    /// BAD_SYS_STATE: SET_HCA_CAP after INIT_HCA.
    SET_CAP_AFTER_INIT = 0x5e04_0006;
    /// BAD_SYS_STATE: DISABLE_HCA while initialized.
    DISABLE_WHILE_INITIALIZED = 0x5e04_0007;
    /// BAD_RES: a UAR that is not allocated.
    UNKNOWN_UAR = 0x5e05_0001;
    /// BAD_RES: a PD that is not allocated.
    UNKNOWN_PD = 0x5e05_0002;
    /// BAD_RES: not a live EQ.
    UNKNOWN_EQ = 0x5e05_0003;
    /// BAD_RES: not a live CQ.
    UNKNOWN_CQ = 0x5e05_0004;
    /// BAD_RES: not a live SRQ / RMP.
    UNKNOWN_SRQ = 0x5e05_0005;
    /// BAD_RES: not a live QP.
    UNKNOWN_QP = 0x5e05_0006;
    /// BAD_RES: not a live mkey.
    UNKNOWN_MKEY = 0x5e05_0007;
    /// BAD_RES: a transport domain that is not allocated.
    UNKNOWN_TD = 0x5e05_0008;
    /// BAD_RES: a TIS that is not live.
    UNKNOWN_TIS = 0x5e05_0009;
    /// BAD_RES: a TIR that is not live.
    UNKNOWN_TIR = 0x5e05_000a;
    /// BAD_RES: an RQT that is not live.
    UNKNOWN_RQT = 0x5e05_000b;
    /// BAD_RES: an RQ that is not live.
    UNKNOWN_RQ = 0x5e05_000c;
    /// BAD_RES: an SQ that is not live.
    UNKNOWN_SQ = 0x5e05_000d;
    /// BAD_RES: a flow table that is not live (or of another `table_type`).
    UNKNOWN_FLOW_TABLE = 0x5e05_000e;
    /// BAD_RES: a flow group that is not live in that table.
    UNKNOWN_FLOW_GROUP = 0x5e05_000f;
    /// BAD_RES: no flow table entry at that index.
    UNKNOWN_FTE = 0x5e05_0010;
    /// BAD_RES: a Q counter that is not allocated.
    UNKNOWN_Q_COUNTER = 0x5e05_0011;
    /// BAD_RES: an XRC domain that is not allocated.
    UNKNOWN_XRCD = 0x5e05_0012;
    /// BAD_RES: no such user context.
    UNKNOWN_UCTX = 0x5e05_0013;
    /// BAD_RES: no such umem (for this context).
    UNKNOWN_UMEM = 0x5e05_0014;
    /// BAD_RES: no such DCT.
    UNKNOWN_DCT = 0x5e05_0015;
    /// BAD_RES: no such flow counter.
    UNKNOWN_FLOW_COUNTER = 0x5e05_0016;
    /// BAD_RES: no such packet reformat context.
    UNKNOWN_PACKET_REFORMAT = 0x5e05_0017;
    /// BAD_RES: no such general object.
    UNKNOWN_GENERAL_OBJECT = 0x5e05_0018;
    /// BAD_RES: no such modify header context (or one of another table type, for an FTE).
    UNKNOWN_MODIFY_HEADER = 0x5e05_0019;
    /// RES_BUSY: DEALLOC_UAR of a UAR in use.
    UAR_IN_USE = 0x5e06_0001;
    /// RES_BUSY: DEALLOC_PD of a PD in use.
    PD_IN_USE = 0x5e06_0002;
    /// RES_BUSY: DESTROY_EQ of an EQ with CQs.
    EQ_IN_USE = 0x5e06_0003;
    /// RES_BUSY: DESTROY_CQ of a CQ a QP uses.
    CQ_IN_USE = 0x5e06_0004;
    /// RES_BUSY: DESTROY_SRQ/RMP of an SRQ/RMP a QP uses.
    SRQ_IN_USE = 0x5e06_0005;
    /// RES_BUSY: DEALLOC_TRANSPORT_DOMAIN of a domain a TIS or TIR uses.
    TD_IN_USE = 0x5e06_0006;
    /// RES_BUSY: DESTROY_TIS of a TIS an SQ uses.
    TIS_IN_USE = 0x5e06_0007;
    /// RES_BUSY: DESTROY_RQ of an RQ a TIR or RQT uses (DESTROY_SQ, DEALLOC_Q_COUNTER likewise).
    WQ_IN_USE = 0x5e06_0008;
    /// RES_BUSY: DESTROY_RQT of an RQT a TIR uses.
    RQT_IN_USE = 0x5e06_0009;
    /// RES_BUSY: DESTROY_TIR of a TIR a flow table entry forwards to.
    TIR_IN_USE = 0x5e06_000a;
    /// RES_BUSY: DESTROY_FLOW_TABLE of a table with groups, or one an entry or a table miss forwards to.
    FLOW_TABLE_IN_USE = 0x5e06_000b;
    /// RES_BUSY: DESTROY_FLOW_GROUP of a group with entries.
    FLOW_GROUP_IN_USE = 0x5e06_000c;
    /// RES_BUSY: DEALLOC_XRCD of a domain an XRC SRQ uses.
    XRCD_IN_USE = 0x5e06_000d;
    /// RES_BUSY: CREATE_QP of a second QP1 (GSI QP).
    GSI_QP_EXISTS = 0x5e06_000e;
    /// RES_BUSY: DEALLOC_MEMIC of device memory a MEMIC key still reaches.
    MEMIC_IN_USE = 0x5e06_000f;
    /// RES_BUSY: DESTROY_UCTX of a context that owns objects.
    UCTX_IN_USE = 0x5e06_0010;
    /// RES_BUSY: DESTROY_UMEM of a umem in use.
    UMEM_IN_USE = 0x5e06_0011;
    /// RES_BUSY: DEALLOC_FLOW_COUNTER of a counter an entry counts in.
    FLOW_COUNTER_IN_USE = 0x5e06_0012;
    /// RES_BUSY: DEALLOC_PACKET_REFORMAT_CONTEXT of a context an entry uses.
    PACKET_REFORMAT_IN_USE = 0x5e06_0013;
    /// RES_BUSY: a SW ICM object a SW_ICM key reaches.
    SW_ICM_IN_USE = 0x5e06_0014;
    /// RES_BUSY: DEALLOC_MODIFY_HEADER_CONTEXT of a context an entry uses.
    MODIFY_HEADER_IN_USE = 0x5e06_0015;
    /// EXCEED_LIM: no UAR page left.
    UAR_EXHAUSTED = 0x5e08_0001;
    /// EXCEED_LIM: no PD number left.
    PD_EXHAUSTED = 0x5e08_0002;
    /// EXCEED_LIM: EQ limit reached.
    EQ_EXHAUSTED = 0x5e08_0003;
    /// EXCEED_LIM: CQ limit reached.
    CQ_EXHAUSTED = 0x5e08_0004;
    /// EXCEED_LIM: SRQ / RMP limit reached.
    SRQ_EXHAUSTED = 0x5e08_0005;
    /// EXCEED_LIM: QP limit reached.
    QP_EXHAUSTED = 0x5e08_0006;
    /// EXCEED_LIM: mkey limit reached.
    MKEY_EXHAUSTED = 0x5e08_0007;
    /// EXCEED_LIM: `2^log_max_*` transport domains, TISes, TIRs, RQTs, RQs or SQs live, or `max_qp_cnt` Q counters.
    NET_EXHAUSTED = 0x5e08_0008;
    /// EXCEED_LIM: `2^log_max_ft_num` flow tables live (or no handle left for a group or an entry).
    FLOW_TABLE_EXHAUSTED = 0x5e08_0009;
    /// EXCEED_LIM: `2^log_max_mcg` groups, or `max_qp_mcg` QPs in the group.
    MCG_EXHAUSTED = 0x5e08_000a;
    /// EXCEED_LIM: every user context uid is taken.
    UCTX_EXHAUSTED = 0x5e08_000b;
    /// EXCEED_LIM: every umem id is taken.
    UMEM_EXHAUSTED = 0x5e08_000c;
    /// EXCEED_LIM: every flow counter is allocated.
    FLOW_COUNTER_EXHAUSTED = 0x5e08_000d;
    /// EXCEED_LIM: every packet reformat context is allocated.
    PACKET_REFORMAT_EXHAUSTED = 0x5e08_000e;
    /// EXCEED_LIM: no general object handle left for a SW ICM object.
    SW_ICM_EXHAUSTED = 0x5e08_000f;
    /// EXCEED_LIM: `2^log_max_modify_header_context - 1` modify header contexts allocated.
    MODIFY_HEADER_EXHAUSTED = 0x5e08_0010;
    /// EXCEED_LIM: no general object handle left for a flow sampler.
    FLOW_SAMPLER_EXHAUSTED = 0x5e08_0011;
    /// BAD_RES_STATE: QP transition from the wrong state.
    QP_WRONG_STATE = 0x5e09_0001;
    /// BAD_RES_STATE: MODIFY_RQ/SQ from a state the queue is not in, or to one it cannot reach.
    WQ_WRONG_STATE = 0x5e09_0002;
    /// BAD_RES_STATE: DRAIN_DCT or ARM_DCT_FOR_KEY_VIOLATION of a DCT that is not active.
    DCT_NOT_ACTIVE = 0x5e09_0003;
    /// NO_RESOURCES: a command waiting for pages the driver said it cannot give.
    PAGES_ALLOC_FAIL = 0x5e0f_0001;
    /// NO_RESOURCES: ALLOC_MEMIC found no room in its range.
    MEMIC_NO_ROOM = 0x5e0f_0002;
    /// BAD_INPUT_LEN: `input_length` < 8.
    INLEN_BELOW_HEADER = 0x5e50_0001;
    /// BAD_INPUT_LEN: `input_length` < the `*_in` size.
    INLEN_BELOW_LAYOUT = 0x5e50_0002;
    /// BAD_INPUT_LEN: MANAGE_PAGES entries not covered by `input_length`.
    INLEN_PAS = 0x5e50_0003;
    /// BAD_INPUT_LEN: ACCESS_REG register not covered by `input_length`.
    INLEN_REGISTER = 0x5e50_0004;
    /// BAD_INPUT_LEN: the queue's PAS entries not covered by `input_length`.
    INLEN_QUEUE_PAS = 0x5e50_0005;
    /// BAD_INPUT_LEN: CREATE_MKEY MTT entries not covered by `input_length`.
    INLEN_MKEY_MTT = 0x5e50_0006;
    /// BAD_OUTPUT_LEN: `output_length` < the `*_out` size.
    OUTLEN_BELOW_LAYOUT = 0x5e51_0001;
    /// BAD_OUTPUT_LEN: ACCESS_REG register not covered by `output_length`.
    OUTLEN_REGISTER = 0x5e51_0002;
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_and_status_bytes() {
        assert_eq!(super::name(super::PD_EXHAUSTED), Some("PD_EXHAUSTED"));
        assert_eq!(super::name(0), None);
        assert_eq!((super::BAD_UID >> 16) & 0xff, 0x03);
    }

    #[test]
    fn every_syndrome_is_distinct_and_in_the_table() {
        let doc = include_str!("syndrome.rs");
        let mut seen = std::collections::BTreeSet::new();
        for &(name, value) in super::ALL {
            assert!(seen.insert(value), "{name} reuses {value:#x}");
            assert_eq!(value >> 24, 0x5e, "{name}");
            let row = format!("//! | `{value:#010x}` {name} |");
            assert!(
                doc.contains(&row),
                "{name} is missing from the module table"
            );
        }
    }
}
