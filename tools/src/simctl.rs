//! `mlx5ctl sim --control SOCKET`: the hypervisor's hand on the simulated functions while a
//! guest runs — what `ip link set <pf> vf N state …` and `… vf N mac …` do to a real VF. A UNIX
//! stream socket; each line is one order, answered by one line:
//!
//! ```text
//! 0 link down        → ok: NIC 0 link down    (the vport held down: PORT_CHANGE to its driver)
//! 0 link auto        → ok: NIC 0 link up      (following the uplink again; `up` holds it up)
//! 1 mac 02:11:22:33:44:55 → ok: NIC 1 mac …  (seen by its driver at its next bring-up)
//! 1 mac unset        → ok: NIC 1 mac unset
//! 0 flr now          → ok: NIC 0 reset         (a function-level reset under its driver)
//! ```
//!
//! Anything else is answered `error: …`; a line longer than [`MAX_LINE`] bytes ends the
//! connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use mlx5_sim::{SimDevice, VportAdmin};

/// The longest order line.
pub const MAX_LINE: usize = 128;

/// Serves the control socket at `path` (created) in a thread of its own, for `devs` (NIC `i`
/// is `devs[i]`), until the process ends.
pub fn serve(path: &Path, devs: Vec<SimDevice>) -> Result<(), String> {
    let listener = UnixListener::bind(path).map_err(|e| format!("{}: {e}", path.display()))?;
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            if let Err(e) = session(conn, &devs) {
                eprintln!("mlx5ctl sim: control: {e}");
            }
        }
    });
    Ok(())
}

fn session(conn: UnixStream, devs: &[SimDevice]) -> std::io::Result<()> {
    let mut out = conn.try_clone()?;
    let mut lines = BufReader::new(conn.take(1 << 20));
    let mut line = String::new();
    loop {
        line.clear();
        let n = (&mut lines)
            .take(MAX_LINE as u64 + 1)
            .read_line(&mut line)?;
        if n == 0 {
            return Ok(());
        }
        if n > MAX_LINE {
            writeln!(out, "error: line longer than {MAX_LINE} bytes")?;
            return Ok(());
        }
        let answer = order(line.trim(), devs).unwrap_or_else(|e| format!("error: {e}"));
        eprintln!("mlx5ctl sim: control: {} -> {answer}", line.trim());
        writeln!(out, "{answer}")?;
    }
}

/// Carries out one order: `Ok(answer)`, or why not.
pub fn order(line: &str, devs: &[SimDevice]) -> Result<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let [nic, verb, arg] = words[..] else {
        return Err(
            "expected `<nic> link down|up|auto`, `<nic> mac <mac>|unset` or `<nic> flr now`".into(),
        );
    };
    let i: usize = nic.parse().map_err(|_| format!("no NIC {nic:?}"))?;
    let dev = devs
        .get(i)
        .ok_or_else(|| format!("no NIC {i} (there are {})", devs.len()))?;
    match (verb, arg) {
        ("link", s) => {
            let state = match s {
                "down" => VportAdmin::Down,
                "up" => VportAdmin::Up,
                "auto" => VportAdmin::Auto,
                _ => return Err(format!("link {s:?}: down, up or auto")),
            };
            let up = dev.set_vport_admin(state);
            Ok(format!(
                "ok: NIC {i} link {}",
                if up { "up" } else { "down" }
            ))
        }
        ("mac", "unset") => {
            dev.set_assigned_mac(None);
            Ok(format!("ok: NIC {i} mac unset"))
        }
        ("mac", m) => {
            let mac = crate::link::parse_mac(m)?;
            if mac[0] & 1 != 0 || mac == [0; 6] {
                return Err(format!("mac {m}: not a unicast address"));
            }
            dev.set_assigned_mac(Some(mac));
            Ok(format!("ok: NIC {i} mac {m}"))
        }
        ("flr", "now") => {
            dev.function_level_reset();
            Ok(format!("ok: NIC {i} reset"))
        }
        _ => Err(format!("unknown order {verb:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx5_sim::{Mode, Profile};

    #[test]
    fn orders_and_refusals() {
        let devs = vec![SimDevice::new(
            Profile::connectx5().as_vf(false),
            Mode::Sync,
        )];
        assert_eq!(order("0 link down", &devs).unwrap(), "ok: NIC 0 link down");
        assert_eq!(order("0 link auto", &devs).unwrap(), "ok: NIC 0 link up");
        assert_eq!(order("0 mac unset", &devs).unwrap(), "ok: NIC 0 mac unset");
        assert!(order("0 mac 02:11:22:33:44:55", &devs).is_ok());
        assert_eq!(order("0 link down", &devs).unwrap(), "ok: NIC 0 link down");
        // A function-level reset keeps what the hypervisor set.
        assert_eq!(order("0 flr now", &devs).unwrap(), "ok: NIC 0 reset");
        assert_eq!(order("0 link down", &devs).unwrap(), "ok: NIC 0 link down");
        assert_eq!(order("0 link auto", &devs).unwrap(), "ok: NIC 0 link up");
        for bad in [
            "",
            "0 link",
            "1 link down",
            "x link down",
            "0 link sideways",
            "0 mac 01:00:5e:00:00:01",
            "0 mac zz",
            "0 fly away",
        ] {
            assert!(order(bad, &devs).is_err(), "{bad:?}");
        }
    }
}
