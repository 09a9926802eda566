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
//! | `0x5e030014` BAD_UID | BAD_PARAM | `uid` not 0 while `log_max_uctx` is 0 |
//! | `0x5e040001` NOT_ENABLED | BAD_SYS_STATE 0x04 | a command other than ENABLE_HCA before ENABLE_HCA |
//! | `0x5e040002` ALREADY_ENABLED | BAD_SYS_STATE | ENABLE_HCA while enabled |
//! | `0x5e040003` NOT_INITIALIZED | BAD_SYS_STATE | a command that needs INIT_HCA before it (or after TEARDOWN_HCA) |
//! | `0x5e040004` ALREADY_INITIALIZED | BAD_SYS_STATE | INIT_HCA while initialized |
//! | `0x5e040005` INSUFFICIENT_PAGES | BAD_SYS_STATE | INIT_HCA with fewer than boot + init pages held |
//! | `0x5e040006` SET_CAP_AFTER_INIT | BAD_SYS_STATE | SET_HCA_CAP after INIT_HCA |
//! | `0x5e040007` DISABLE_WHILE_INITIALIZED | BAD_SYS_STATE | DISABLE_HCA before TEARDOWN_HCA |
//! | `0x5e050001` UNKNOWN_UAR | BAD_RES 0x05 | DEALLOC_UAR of a UAR not allocated |
//! | `0x5e050002` UNKNOWN_PD | BAD_RES | DEALLOC_PD of a PD not allocated |
//! | `0x5e080001` UAR_EXHAUSTED | EXCEED_LIM 0x08 | every UAR page of BAR0 is allocated |
//! | `0x5e080002` PD_EXHAUSTED | EXCEED_LIM | `2^log_max_pd - 1` PDs allocated |
//! | `0x5e500001` INLEN_BELOW_HEADER | BAD_INPUT_LEN 0x50 | `input_length` < 8 |
//! | `0x5e500002` INLEN_BELOW_LAYOUT | BAD_INPUT_LEN | `input_length` < the command's `*_in` size |
//! | `0x5e500003` INLEN_PAS | BAD_INPUT_LEN | MANAGE_PAGES give: `input_length` does not cover `input_num_entries` |
//! | `0x5e500004` INLEN_REGISTER | BAD_INPUT_LEN | ACCESS_REG: `input_length` does not cover the register |
//! | `0x5e510001` OUTLEN_BELOW_LAYOUT | BAD_OUTPUT_LEN 0x51 | `output_length` < the command's `*_out` size |
//! | `0x5e510002` OUTLEN_REGISTER | BAD_OUTPUT_LEN | ACCESS_REG: `output_length` does not cover the register |

macro_rules! syndromes {
    ($($(#[doc = $doc:literal])* $name:ident = $val:expr;)*) => {
        $($(#[doc = $doc])* pub const $name: u32 = $val;)*

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
    /// BAD_PARAM: `uid` not 0 while the device has no user contexts.
    BAD_UID = 0x5e03_0014;
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
    /// BAD_RES: DEALLOC_UAR of an unknown UAR.
    UNKNOWN_UAR = 0x5e05_0001;
    /// BAD_RES: DEALLOC_PD of an unknown PD.
    UNKNOWN_PD = 0x5e05_0002;
    /// EXCEED_LIM: no UAR page left.
    UAR_EXHAUSTED = 0x5e08_0001;
    /// EXCEED_LIM: no PD number left.
    PD_EXHAUSTED = 0x5e08_0002;
    /// BAD_INPUT_LEN: `input_length` < 8.
    INLEN_BELOW_HEADER = 0x5e50_0001;
    /// BAD_INPUT_LEN: `input_length` < the `*_in` size.
    INLEN_BELOW_LAYOUT = 0x5e50_0002;
    /// BAD_INPUT_LEN: MANAGE_PAGES entries not covered by `input_length`.
    INLEN_PAS = 0x5e50_0003;
    /// BAD_INPUT_LEN: ACCESS_REG register not covered by `input_length`.
    INLEN_REGISTER = 0x5e50_0004;
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
}
