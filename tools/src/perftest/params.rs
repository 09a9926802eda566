//! What a perftest run is: its test (verb, bandwidth or latency) and the parameters settled from
//! the command line, with perftest's defaults.

/// The operation of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Write,
    Read,
    Send,
    Atomic,
}

/// One of perftest's tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Test {
    pub(super) verb: Verb,
    pub(super) lat: bool,
}

/// Our OUT in read and atomic tests: the reads and atomics we let the peer have outstanding
/// (our responder depth) and the most we issue.
const OUR_OUT: u16 = 16;

impl Test {
    pub(super) fn parse(s: &str) -> Result<Test, String> {
        let (v, kind) = s.split_once('-').ok_or_else(|| {
            format!(
                "{s}: write-bw|write-lat|read-bw|read-lat|send-bw|send-lat|atomic-bw|atomic-lat"
            )
        })?;
        let verb = match v {
            "write" => Verb::Write,
            "read" => Verb::Read,
            "send" => Verb::Send,
            "atomic" => Verb::Atomic,
            _ => return Err(format!("{s}: the operation is write, read, send or atomic")),
        };
        let lat = match kind {
            "bw" => false,
            "lat" => true,
            _ => return Err(format!("{s}: bw or lat")),
        };
        Ok(Test { verb, lat })
    }

    /// perftest's title line.
    pub(super) fn title(self) -> &'static str {
        match (self.verb, self.lat) {
            (Verb::Write, false) => "RDMA_Write BW Test",
            (Verb::Write, true) => "RDMA_Write Latency Test",
            (Verb::Read, false) => "RDMA_Read BW Test",
            (Verb::Read, true) => "RDMA_Read Latency Test",
            (Verb::Send, false) => "Send BW Test",
            (Verb::Send, true) => "Send Latency Test",
            (Verb::Atomic, false) => "Atomic FETCH_AND_ADD BW Test",
            (Verb::Atomic, true) => "Atomic FETCH_AND_ADD Latency Test",
        }
    }

    pub(super) fn default_size(self) -> u32 {
        match (self.verb, self.lat) {
            (Verb::Atomic, _) => 8,
            (_, true) => 2,
            (_, false) => 65536,
        }
    }

    pub(super) fn default_iters(self) -> u32 {
        if self
            == (Test {
                verb: Verb::Write,
                lat: false,
            })
        {
            5000
        } else {
            1000
        }
    }

    /// Our OUT: what the key messages carry.
    pub(super) fn out(self) -> u16 {
        match self.verb {
            Verb::Read | Verb::Atomic => OUR_OUT,
            Verb::Write | Verb::Send => 1,
        }
    }

    /// Key exchanges before the test runs.
    pub(super) fn exchanges_before(self) -> u32 {
        if !self.lat && self.verb != Verb::Send {
            3
        } else {
            4
        }
    }

    /// The key exchange after which both sides connect their QPs (1 or 2).
    pub(super) fn connect_after(self) -> u32 {
        if self.lat && self.verb != Verb::Send {
            2
        } else {
            1
        }
    }
}

/// The parameters of a run, settled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub(super) test: Test,
    pub(super) client: bool,
    pub(super) size: u32,
    pub(super) iters: u32,
    pub(super) tx_depth: u32,
    pub(super) rx_depth: u32,
    pub(super) cq_mod: u32,
}
