//! The head every command input and output shares (PRM "Command Input/Output Structure").

use crate::layout::{Field, FieldInfo, Layout};

/// The first 8 bytes of every `*_in`: `opcode`, `uid`, `op_mod`.
#[derive(Debug, Clone, Copy)]
pub struct CmdInHeader;

impl CmdInHeader {
    /// `opcode`: bit 0x0, width 16.
    pub const OPCODE: Field<Self> = Field::new("opcode", 0x0, 16);
    /// `uid`: bit 0x10, width 16 (0 for kernel-owned objects).
    pub const UID: Field<Self> = Field::new("uid", 0x10, 16);
    /// `op_mod`: bit 0x30, width 16.
    pub const OP_MOD: Field<Self> = Field::new("op_mod", 0x30, 16);
}

impl Layout for CmdInHeader {
    const NAME: &'static str = "cmd_in_header";
    const BYTES: usize = 8;
    const FIELDS: &'static [FieldInfo] = &[Self::OPCODE.info, Self::UID.info, Self::OP_MOD.info];
}

/// The first 8 bytes of every `*_out`: `status`, `syndrome`.
#[derive(Debug, Clone, Copy)]
pub struct CmdOutHeader;

impl CmdOutHeader {
    /// `status`: bit 0x0, width 8 ([`crate::CmdStatus`]).
    pub const STATUS: Field<Self> = Field::new("status", 0x0, 8);
    /// `syndrome`: bit 0x20, width 32 (firmware-specific failure reason).
    pub const SYNDROME: Field<Self> = Field::new("syndrome", 0x20, 32);
}

impl Layout for CmdOutHeader {
    const NAME: &'static str = "cmd_out_header";
    const BYTES: usize = 8;
    const FIELDS: &'static [FieldInfo] = &[Self::STATUS.info, Self::SYNDROME.info];
}
