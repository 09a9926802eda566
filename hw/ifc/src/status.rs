//! Command status codes, delivery status codes and health syndromes.

macro_rules! code_enum {
    ($(#[$m:meta])* $ty:ident: $int:ty { $($name:ident = $val:expr, $text:expr;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $ty {
            $(#[doc = $text] $name,)*
            /// A code this crate does not name.
            Other($int),
        }

        impl $ty {
            /// The code for a raw value (never fails: unknown codes are kept as `Other`).
            pub const fn from_raw(v: $int) -> Self {
                match v {
                    $($val => $ty::$name,)*
                    other => $ty::Other(other),
                }
            }
            /// The raw value.
            pub const fn raw(self) -> $int {
                match self {
                    $($ty::$name => $val,)*
                    $ty::Other(v) => v,
                }
            }
            /// What the code means.
            pub const fn text(self) -> &'static str {
                match self {
                    $($ty::$name => $text,)*
                    $ty::Other(_) => "unknown",
                }
            }
        }

        impl core::fmt::Display for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{} ({:#x})", self.text(), self.raw())
            }
        }
    };
}

code_enum! {
    /// The `status` byte of every command output (PRM "Command Status").
    CmdStatus: u8 {
        Ok = 0x00, "OK";
        InternalErr = 0x01, "internal error";
        BadOp = 0x02, "bad operation";
        BadParam = 0x03, "bad parameter";
        BadSysState = 0x04, "bad system state";
        BadRes = 0x05, "bad resource";
        ResBusy = 0x06, "resource busy";
        NotReady = 0x07, "FW not ready";
        ExceedLim = 0x08, "limits exceeded";
        BadResState = 0x09, "bad resource state";
        BadIndex = 0x0a, "bad index";
        NoResources = 0x0f, "no resources";
        BadQpState = 0x10, "bad QP state";
        BadPkt = 0x30, "bad packet";
        BadSize = 0x40, "bad size, too many outstanding CQEs";
        BadInputLen = 0x50, "bad input length";
        BadOutputLen = 0x51, "bad output length";
    }
}

code_enum! {
    /// The delivery status of a command queue entry (entry byte 0x3f, bits 7..1).
    DeliveryStatus: u8 {
        Ok = 0x0, "OK";
        Signature = 0x1, "signature error";
        Token = 0x2, "token error";
        BadBlock = 0x3, "bad block number";
        OutPtrAlign = 0x4, "output pointer not aligned to block size";
        InPtrAlign = 0x5, "input pointer not aligned to block size";
        FwInternal = 0x6, "FW internal error";
        InLength = 0x7, "input length error";
        OutLength = 0x8, "output length error";
        ResFlds = 0x9, "reserved fields not cleared";
        CmdDesc = 0x10, "bad command descriptor type";
    }
}

code_enum! {
    /// The firmware health syndrome (health buffer byte 0x3d; 0 = healthy).
    HealthSyndrome: u8 {
        FwInternalErr = 0x1, "FW internal error";
        DeadIrisc = 0x7, "irisc not responding";
        HwUnrecoverableErr = 0x8, "unrecoverable HW error";
        FwCrcErr = 0x9, "FW CRC error";
        FetchPciErr = 0xa, "ICM fetch PCI error";
        HwFtlErr = 0xb, "HW fatal error";
        AsyncEqOverrun = 0xc, "async EQ buffer overrun";
        EqErr = 0xd, "EQ error";
        EqInv = 0xe, "invalid EQ referenced";
        FfserErr = 0xf, "FFSER error";
        HighTemp = 0x10, "high temperature";
        IcmPciPoison = 0x12, "ICM PCI poisoned";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        assert_eq!(CmdStatus::from_raw(0x03), CmdStatus::BadParam);
        assert_eq!(CmdStatus::BadParam.raw(), 3);
        assert_eq!(CmdStatus::from_raw(0x77), CmdStatus::Other(0x77));
        assert_eq!(
            DeliveryStatus::from_raw(0x10).text(),
            "bad command descriptor type"
        );
        assert_eq!(
            std::format!("{}", HealthSyndrome::from_raw(0xa)),
            "ICM fetch PCI error (0xa)"
        );
    }
}
