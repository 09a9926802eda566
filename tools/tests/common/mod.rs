//! A process under test whose output is read as it comes, so a test can wait until the
//! process says it is ready (a server "listening") before starting its peer — instead of
//! racing it, which a busy machine loses now and then.

#![allow(dead_code)]

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A spawned process and what it has printed so far (stdout and stderr, each in order).
pub struct Spawned {
    child: Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

fn reader(mut r: impl Read + Send + 'static, into: Arc<Mutex<String>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
}

impl Spawned {
    /// Spawns `cmd` with its stdout and stderr captured.
    pub fn new(cmd: &mut Command) -> Spawned {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (out, err) = (Arc::default(), Arc::default());
        let readers = vec![
            reader(child.stdout.take().unwrap(), Arc::clone(&out)),
            reader(child.stderr.take().unwrap(), Arc::clone(&err)),
        ];
        Spawned {
            child,
            out,
            err,
            readers,
        }
    }

    /// Everything printed so far.
    pub fn text(&self) -> String {
        format!("{}{}", self.out.lock().unwrap(), self.err.lock().unwrap())
    }

    /// Waits until the output holds `needle`; panics (with the output) after `limit` or if
    /// the process ends first. The limit bounds a hang; it is not a timing check.
    pub fn wait_for(&mut self, needle: &str, limit: Duration) {
        let end = Instant::now() + limit;
        loop {
            if self.text().contains(needle) {
                return;
            }
            if let Ok(Some(s)) = self.child.try_wait() {
                panic!("ended ({s}) before printing {needle:?}: {}", self.text());
            }
            assert!(
                Instant::now() < end,
                "no {needle:?} within {limit:?}: {}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to end: its status and everything it printed.
    pub fn finish(mut self) -> (ExitStatus, String) {
        let status = self.child.wait().unwrap();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        (status, self.text())
    }
}
