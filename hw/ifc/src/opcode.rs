//! Command opcodes (PRM "Command Reference"; `MLX5_CMD_OP_*`).

macro_rules! opcodes {
    ($($name:ident = $val:expr, $text:expr;)*) => {
        /// A firmware command opcode.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        #[non_exhaustive]
        pub enum Opcode {
            $(#[doc = $text] $name = $val,)*
        }

        impl Opcode {
            /// Every opcode this crate names.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$name,)*];

            /// The opcode for a raw value, if this crate names it.
            pub const fn from_u16(v: u16) -> Option<Self> {
                match v {
                    $($val => Some(Opcode::$name),)*
                    _ => None,
                }
            }
            /// The PRM name, e.g. `CREATE_QP`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Opcode::$name => $text,)*
                }
            }
        }
    };
}

opcodes! {
    QueryHcaCap = 0x100, "QUERY_HCA_CAP";
    QueryAdapter = 0x101, "QUERY_ADAPTER";
    InitHca = 0x102, "INIT_HCA";
    TeardownHca = 0x103, "TEARDOWN_HCA";
    EnableHca = 0x104, "ENABLE_HCA";
    DisableHca = 0x105, "DISABLE_HCA";
    QueryPages = 0x107, "QUERY_PAGES";
    ManagePages = 0x108, "MANAGE_PAGES";
    SetHcaCap = 0x109, "SET_HCA_CAP";
    QueryIssi = 0x10a, "QUERY_ISSI";
    SetIssi = 0x10b, "SET_ISSI";
    SetDriverVersion = 0x10d, "SET_DRIVER_VERSION";
    CreateMkey = 0x200, "CREATE_MKEY";
    QueryMkey = 0x201, "QUERY_MKEY";
    DestroyMkey = 0x202, "DESTROY_MKEY";
    QuerySpecialContexts = 0x203, "QUERY_SPECIAL_CONTEXTS";
    PageFaultResume = 0x204, "PAGE_FAULT_RESUME";
    AllocMemic = 0x205, "ALLOC_MEMIC";
    DeallocMemic = 0x206, "DEALLOC_MEMIC";
    CreateEq = 0x301, "CREATE_EQ";
    DestroyEq = 0x302, "DESTROY_EQ";
    QueryEq = 0x303, "QUERY_EQ";
    GenEqe = 0x304, "GEN_EQE";
    CreateCq = 0x400, "CREATE_CQ";
    DestroyCq = 0x401, "DESTROY_CQ";
    QueryCq = 0x402, "QUERY_CQ";
    ModifyCq = 0x403, "MODIFY_CQ";
    CreateQp = 0x500, "CREATE_QP";
    DestroyQp = 0x501, "DESTROY_QP";
    Rst2InitQp = 0x502, "RST2INIT_QP";
    Init2RtrQp = 0x503, "INIT2RTR_QP";
    Rtr2RtsQp = 0x504, "RTR2RTS_QP";
    Rts2RtsQp = 0x505, "RTS2RTS_QP";
    Sqerr2RtsQp = 0x506, "SQERR2RTS_QP";
    Qp2Err = 0x507, "2ERR_QP";
    Qp2Rst = 0x50a, "2RST_QP";
    QueryQp = 0x50b, "QUERY_QP";
    SqdRtsQp = 0x50c, "SQD_RTS_QP";
    MadIfc = 0x50d, "MAD_IFC";
    Init2InitQp = 0x50e, "INIT2INIT_QP";
    CreateSrq = 0x700, "CREATE_SRQ";
    DestroySrq = 0x701, "DESTROY_SRQ";
    QuerySrq = 0x702, "QUERY_SRQ";
    ArmRq = 0x703, "ARM_RQ";
    CreateXrcSrq = 0x705, "CREATE_XRC_SRQ";
    DestroyXrcSrq = 0x706, "DESTROY_XRC_SRQ";
    CreateDct = 0x710, "CREATE_DCT";
    DestroyDct = 0x711, "DESTROY_DCT";
    DrainDct = 0x712, "DRAIN_DCT";
    QueryDct = 0x713, "QUERY_DCT";
    ArmDctForKeyViolation = 0x714, "ARM_DCT_FOR_KEY_VIOLATION";
    QueryVportState = 0x750, "QUERY_VPORT_STATE";
    ModifyVportState = 0x751, "MODIFY_VPORT_STATE";
    QueryNicVportContext = 0x754, "QUERY_NIC_VPORT_CONTEXT";
    ModifyNicVportContext = 0x755, "MODIFY_NIC_VPORT_CONTEXT";
    QueryRoceAddress = 0x760, "QUERY_ROCE_ADDRESS";
    SetRoceAddress = 0x761, "SET_ROCE_ADDRESS";
    QueryHcaVportContext = 0x762, "QUERY_HCA_VPORT_CONTEXT";
    ModifyHcaVportContext = 0x763, "MODIFY_HCA_VPORT_CONTEXT";
    QueryHcaVportGid = 0x764, "QUERY_HCA_VPORT_GID";
    QueryHcaVportPkey = 0x765, "QUERY_HCA_VPORT_PKEY";
    QueryVportCounter = 0x770, "QUERY_VPORT_COUNTER";
    AllocQCounter = 0x771, "ALLOC_Q_COUNTER";
    DeallocQCounter = 0x772, "DEALLOC_Q_COUNTER";
    QueryQCounter = 0x773, "QUERY_Q_COUNTER";
    SetPpRateLimit = 0x780, "SET_PP_RATE_LIMIT";
    AllocPd = 0x800, "ALLOC_PD";
    DeallocPd = 0x801, "DEALLOC_PD";
    AllocUar = 0x802, "ALLOC_UAR";
    DeallocUar = 0x803, "DEALLOC_UAR";
    ConfigIntModeration = 0x804, "CONFIG_INT_MODERATION";
    AccessReg = 0x805, "ACCESS_REG";
    AttachToMcg = 0x806, "ATTACH_TO_MCG";
    DetachFromMcg = 0x807, "DETACH_FROM_MCG";
    Nop = 0x80d, "NOP";
    AllocXrcd = 0x80e, "ALLOC_XRCD";
    DeallocXrcd = 0x80f, "DEALLOC_XRCD";
    AllocTransportDomain = 0x816, "ALLOC_TRANSPORT_DOMAIN";
    DeallocTransportDomain = 0x817, "DEALLOC_TRANSPORT_DOMAIN";
    CreateTir = 0x900, "CREATE_TIR";
    ModifyTir = 0x901, "MODIFY_TIR";
    DestroyTir = 0x902, "DESTROY_TIR";
    QueryTir = 0x903, "QUERY_TIR";
    CreateSq = 0x904, "CREATE_SQ";
    ModifySq = 0x905, "MODIFY_SQ";
    DestroySq = 0x906, "DESTROY_SQ";
    QuerySq = 0x907, "QUERY_SQ";
    CreateRq = 0x908, "CREATE_RQ";
    ModifyRq = 0x909, "MODIFY_RQ";
    DestroyRq = 0x90a, "DESTROY_RQ";
    QueryRq = 0x90b, "QUERY_RQ";
    CreateRmp = 0x90c, "CREATE_RMP";
    ModifyRmp = 0x90d, "MODIFY_RMP";
    DestroyRmp = 0x90e, "DESTROY_RMP";
    QueryRmp = 0x90f, "QUERY_RMP";
    SetDelayDropParams = 0x910, "SET_DELAY_DROP_PARAMS";
    CreateTis = 0x912, "CREATE_TIS";
    ModifyTis = 0x913, "MODIFY_TIS";
    DestroyTis = 0x914, "DESTROY_TIS";
    QueryTis = 0x915, "QUERY_TIS";
    CreateRqt = 0x916, "CREATE_RQT";
    ModifyRqt = 0x917, "MODIFY_RQT";
    DestroyRqt = 0x918, "DESTROY_RQT";
    QueryRqt = 0x919, "QUERY_RQT";
    SetFlowTableRoot = 0x92f, "SET_FLOW_TABLE_ROOT";
    CreateFlowTable = 0x930, "CREATE_FLOW_TABLE";
    DestroyFlowTable = 0x931, "DESTROY_FLOW_TABLE";
    QueryFlowTable = 0x932, "QUERY_FLOW_TABLE";
    CreateFlowGroup = 0x933, "CREATE_FLOW_GROUP";
    DestroyFlowGroup = 0x934, "DESTROY_FLOW_GROUP";
    QueryFlowGroup = 0x935, "QUERY_FLOW_GROUP";
    SetFlowTableEntry = 0x936, "SET_FLOW_TABLE_ENTRY";
    QueryFlowTableEntry = 0x937, "QUERY_FLOW_TABLE_ENTRY";
    DeleteFlowTableEntry = 0x938, "DELETE_FLOW_TABLE_ENTRY";
    AllocFlowCounter = 0x939, "ALLOC_FLOW_COUNTER";
    DeallocFlowCounter = 0x93a, "DEALLOC_FLOW_COUNTER";
    QueryFlowCounter = 0x93b, "QUERY_FLOW_COUNTER";
    ModifyFlowTable = 0x93c, "MODIFY_FLOW_TABLE";
    AllocPacketReformatContext = 0x93d, "ALLOC_PACKET_REFORMAT_CONTEXT";
    DeallocPacketReformatContext = 0x93e, "DEALLOC_PACKET_REFORMAT_CONTEXT";
    AllocModifyHeaderContext = 0x940, "ALLOC_MODIFY_HEADER_CONTEXT";
    DeallocModifyHeaderContext = 0x941, "DEALLOC_MODIFY_HEADER_CONTEXT";
    CreateGeneralObject = 0xa00, "CREATE_GENERAL_OBJECT";
    ModifyGeneralObject = 0xa01, "MODIFY_GENERAL_OBJECT";
    QueryGeneralObject = 0xa02, "QUERY_GENERAL_OBJECT";
    DestroyGeneralObject = 0xa03, "DESTROY_GENERAL_OBJECT";
    CreateUctx = 0xa04, "CREATE_UCTX";
    DestroyUctx = 0xa06, "DESTROY_UCTX";
    CreateUmem = 0xa08, "CREATE_UMEM";
    DestroyUmem = 0xa0a, "DESTROY_UMEM";
    SyncSteering = 0xb00, "SYNC_STEERING";
}

/// The PRM name of a raw opcode, or `"UNKNOWN"`.
pub fn opcode_name(v: u16) -> &'static str {
    Opcode::from_u16(v).map_or("UNKNOWN", Opcode::name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_u16(op as u16), Some(op));
        }
        assert_eq!(opcode_name(0x500), "CREATE_QP");
        assert_eq!(opcode_name(0x7777), "UNKNOWN");
    }
}
