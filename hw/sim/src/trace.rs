//! The command trace: one record per executed command (delivery status OK).

use std::collections::VecDeque;
use std::fmt::Write as _;

use mlx5_ifc::opcode_name;

/// How many records the trace keeps; older ones are dropped (their `seq` stays unique).
pub const TRACE_CAPACITY: usize = 1 << 16;

/// One executed command as the device saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// Execution number, from 0, in execution order.
    pub seq: u64,
    /// The command's opcode.
    pub opcode: u16,
    /// The command's op_mod.
    pub op_mod: u16,
    /// The command status the device returned.
    pub status: u8,
    /// The syndrome the device returned.
    pub syndrome: u32,
    /// The input: 16 inline bytes and the input mailbox data, truncated to `input_length`.
    pub input: Vec<u8>,
    /// The output the device wrote: 16 inline bytes and the output mailbox data, truncated to
    /// `output_length` — after any injected `CorruptOutput` (while `status` and `syndrome`
    /// are what the firmware decided).
    pub output: Vec<u8>,
    /// The injected faults that acted on this command, one line each (`"CorruptOutput:
    /// output[0x8..0xc] 00000100 -> 00abcdef"`); empty for an honest completion.
    pub faults: Vec<String>,
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl TraceRecord {
    /// The record as one line of JSON (no trailing newline):
    /// `{"seq":N,"opcode":"0x0500","name":"CREATE_QP","op_mod":0,"status":0,"syndrome":"0x00000000","input":"<hex>","output":"<hex>"}`,
    /// with `,"faults":["..."]` before the closing brace when injected faults acted on it.
    pub fn to_json_line(&self) -> String {
        let mut line = format!(
            "{{\"seq\":{},\"opcode\":\"{:#06x}\",\"name\":\"{}\",\"op_mod\":{},\"status\":{},\"syndrome\":\"{:#010x}\",\"input\":\"{}\",\"output\":\"{}\"",
            self.seq,
            self.opcode,
            opcode_name(self.opcode),
            self.op_mod,
            self.status,
            self.syndrome,
            hex(&self.input),
            hex(&self.output)
        );
        if !self.faults.is_empty() {
            let items: Vec<String> = self.faults.iter().map(|f| json_string(f)).collect();
            let _ = write!(line, ",\"faults\":[{}]", items.join(","));
        }
        line.push('}');
        line
    }
}

/// The bounded list of records.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    records: VecDeque<TraceRecord>,
}

impl Trace {
    pub(crate) fn push(&mut self, r: TraceRecord) {
        if self.records.len() == TRACE_CAPACITY {
            self.records.pop_front();
        }
        self.records.push_back(r);
    }

    pub(crate) fn records(&self) -> Vec<TraceRecord> {
        self.records.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_format() {
        let r = TraceRecord {
            seq: 3,
            opcode: 0x500,
            op_mod: 0,
            status: 0,
            syndrome: 0,
            input: vec![0x05, 0x00],
            output: vec![0xab],
            faults: Vec::new(),
        };
        assert_eq!(
            r.to_json_line(),
            r#"{"seq":3,"opcode":"0x0500","name":"CREATE_QP","op_mod":0,"status":0,"syndrome":"0x00000000","input":"0500","output":"ab"}"#
        );
        let r = TraceRecord {
            faults: vec!["CorruptOutput: \"x\"\n".to_string()],
            ..r
        };
        assert!(r
            .to_json_line()
            .ends_with(r#""output":"ab","faults":["CorruptOutput: \"x\"\u000a"]}"#));
    }
}
