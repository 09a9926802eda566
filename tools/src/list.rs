//! `mlx5ctl list`: the ConnectX (mlx5) PCI functions of this machine, their driver, IOMMU group,
//! and whether they are ready for `--vfio` (and if not, what to do).

use std::path::PathBuf;

use clap::Args as ClapArgs;
use mlx5_vfio::pci::{mlx5_model, MELLANOX_VENDOR};
use mlx5_vfio::{dma, PciFunction, Sysfs, VfioError};
use serde_json::{json, Value};

/// `mlx5ctl list` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Read this sysfs tree instead of /sys (for testing).
    #[arg(long, value_name = "DIR", hide = true)]
    sysfs: Option<PathBuf>,
    /// Look for /dev/vfio nodes here instead of /dev/vfio (for testing).
    #[arg(long, value_name = "DIR", hide = true)]
    dev_vfio: Option<PathBuf>,
}

/// What the DMA memory of one bring-up needs pinned, roughly (the VFIO backend's default check).
const MEMLOCK_NEEDED: u64 = 64 << 20;

/// One line of the listing.
struct Row {
    f: PciFunction,
    model: String,
    ready: Result<u32, VfioError>,
}

/// A short reason for the table; the full text (with commands) follows it.
fn short(e: &VfioError) -> String {
    match e {
        VfioError::NotBoundToVfio { driver, .. } => {
            format!("no: bound to {}", driver.as_deref().unwrap_or("no driver"))
        }
        VfioError::IommuOff { .. } => "no: IOMMU off".into(),
        VfioError::GroupNotViable { group, .. } => format!("no: group {group} not viable"),
        VfioError::VfioNotLoaded => "no: vfio not loaded".into(),
        VfioError::Permission { path, .. } => format!("no: cannot open {}", path.display()),
        e => format!("no: {e}"),
    }
}

fn rows(sysfs: &Sysfs) -> Result<(Vec<Row>, Vec<PciFunction>), String> {
    let all = sysfs
        .scan_vendor(MELLANOX_VENDOR)
        .map_err(|e| e.to_string())?;
    let (mut rows, mut other) = (Vec::new(), Vec::new());
    for f in all {
        match mlx5_model(f.device) {
            Some((model, _)) => rows.push(Row {
                model: format!("{model} ({:04x})", f.device),
                ready: sysfs.check_ready(&f),
                f,
            }),
            None => other.push(f),
        }
    }
    Ok((rows, other))
}

fn text(rows: &[Row], other: &[PciFunction], memlock: &Result<(), VfioError>) -> String {
    if rows.is_empty() {
        let mut s = String::from(
            "no ConnectX (mlx5) PCI function found (vendor 15b3 under /sys/bus/pci/devices)\n",
        );
        if !other.is_empty() {
            s += &format!(
                "({} other NVIDIA/Mellanox function(s), not mlx5 devices)\n",
                other.len()
            );
        }
        return s;
    }
    let table: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            let vf = mlx5_model(r.f.device).is_some_and(|m| m.1) || r.f.is_vf;
            [
                r.f.addr.to_string(),
                r.model.clone(),
                if vf { "VF" } else { "PF" }.into(),
                r.f.driver.clone().unwrap_or_else(|| "-".into()),
                r.f.iommu_group
                    .map_or_else(|| "-".into(), |g| g.to_string()),
                r.f.numa_node
                    .filter(|&n| n >= 0)
                    .map_or_else(|| "-".into(), |n| n.to_string()),
                match &r.ready {
                    Ok(_) => "ready".into(),
                    Err(e) => short(e),
                },
            ]
        })
        .collect();
    let head = ["BDF", "MODEL", "FN", "DRIVER", "IOMMU", "NUMA", "VFIO"];
    let mut w = head.map(str::len);
    for row in &table {
        for (i, c) in row.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s += c;
            } else {
                s += &format!("{c:<width$}  ", width = w[i]);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut s = line(&head.map(String::from));
    for row in &table {
        s += &line(row);
    }
    for r in rows {
        if let Err(e) = &r.ready {
            s += &format!("\nTo use {} with --vfio: {e}\n", r.f.addr);
        }
    }
    if rows.iter().any(|r| r.ready.is_ok()) {
        if let Err(e) = memlock {
            s += &format!("\nNote: {e}\n");
        }
    }
    s
}

fn json_rows(rows: &[Row]) -> Value {
    Value::Array(
        rows.iter()
            .map(|r| {
                json!({
                    "bdf": r.f.addr.to_string(),
                    "vendor": format!("{:04x}", r.f.vendor),
                    "device": format!("{:04x}", r.f.device),
                    "model": mlx5_model(r.f.device).map(|m| m.0),
                    "vf": mlx5_model(r.f.device).is_some_and(|m| m.1) || r.f.is_vf,
                    "driver": r.f.driver,
                    "iommu_group": r.f.iommu_group,
                    "numa_node": r.f.numa_node,
                    "vfio_ready": r.ready.is_ok(),
                    "problem": r.ready.as_ref().err().map(|e| e.to_string()),
                })
            })
            .collect(),
    )
}

/// Runs `mlx5ctl list`.
pub fn run(a: &Args) -> Result<(), String> {
    let mut sysfs = Sysfs::system();
    if let Some(d) = &a.sysfs {
        sysfs.root = d.clone();
    }
    if let Some(d) = &a.dev_vfio {
        sysfs.dev_vfio = d.clone();
    }
    let (rows, other) = rows(&sysfs)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json_rows(&rows)).map_err(|e| e.to_string())?
        );
    } else {
        print!(
            "{}",
            text(&rows, &other, &dma::check_memlock(MEMLOCK_NEEDED))
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    fn device(root: &Path, bdf: &str, ids: (u16, u16), driver: Option<&str>, group: Option<u32>) {
        let real = root.join("sys/devices/pci0000:00").join(bdf);
        fs::create_dir_all(&real).unwrap();
        fs::write(real.join("vendor"), format!("0x{:04x}\n", ids.0)).unwrap();
        fs::write(real.join("device"), format!("0x{:04x}\n", ids.1)).unwrap();
        fs::write(real.join("numa_node"), "0\n").unwrap();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        symlink(&real, root.join("sys/bus/pci/devices").join(bdf)).unwrap();
        if let Some(d) = driver {
            let dd = root.join("sys/bus/pci/drivers").join(d);
            fs::create_dir_all(&dd).unwrap();
            symlink(&dd, real.join("driver")).unwrap();
        }
        if let Some(g) = group {
            let gd = root.join("sys/kernel/iommu_groups").join(g.to_string());
            fs::create_dir_all(gd.join("devices")).unwrap();
            symlink(&gd, real.join("iommu_group")).unwrap();
            symlink(&real, gd.join("devices").join(bdf)).unwrap();
        }
    }

    #[test]
    fn lists_models_drivers_groups_and_readiness() {
        let root = std::env::temp_dir().join(format!("mlx5ctl-list-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        device(
            &root,
            "0000:3b:00.0",
            (0x15b3, 0x1017),
            Some("vfio-pci"),
            Some(39),
        );
        device(
            &root,
            "0000:3b:00.1",
            (0x15b3, 0x1017),
            Some("mlx5_core"),
            Some(40),
        );
        device(
            &root,
            "0000:3b:00.2",
            (0x15b3, 0x1018),
            Some("mlx5_core"),
            None,
        );
        device(
            &root,
            "0000:5e:00.0",
            (0x15b3, 0x1003),
            Some("mlx4_core"),
            Some(50),
        );
        device(
            &root,
            "0000:00:1f.6",
            (0x8086, 0x15bb),
            Some("e1000e"),
            Some(12),
        );
        fs::create_dir_all(root.join("dev/vfio")).unwrap();
        fs::write(root.join("dev/vfio/vfio"), "").unwrap();
        fs::write(root.join("dev/vfio/39"), "").unwrap();
        let sysfs = Sysfs {
            root: root.join("sys"),
            dev_vfio: root.join("dev/vfio"),
        };
        let (rows, other) = rows(&sysfs).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(other.len(), 1, "the ConnectX-3 is not an mlx5 device");
        let out = text(&rows, &other, &Ok(()));
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("BDF"), "{out}");
        assert!(
            lines[1].starts_with("0000:3b:00.0  ConnectX-5 (1017)"),
            "{out}"
        );
        assert!(lines[1].ends_with("ready"), "{out}");
        assert!(
            lines[2].contains("mlx5_core") && lines[2].ends_with("no: bound to mlx5_core"),
            "{out}"
        );
        assert!(lines[3].contains("ConnectX-5 VF (1018)  VF"), "{out}");
        assert!(lines[3].ends_with("no: IOMMU off"), "{out}");
        assert!(out.contains("To use 0000:3b:00.1 with --vfio"), "{out}");
        assert!(
            out.contains(
                "echo vfio-pci | sudo tee /sys/bus/pci/devices/0000:3b:00.1/driver_override"
            ),
            "{out}"
        );
        assert!(out.contains("intel_iommu=on"), "{out}");
        let j = json_rows(&rows);
        assert_eq!(j[0]["vfio_ready"], true);
        assert_eq!(j[1]["driver"], "mlx5_core");
        assert_eq!(j[2]["vf"], true);
        let none = text(&[], &other, &Ok(()));
        assert!(
            none.starts_with("no ConnectX (mlx5) PCI function found"),
            "{none}"
        );
        fs::remove_dir_all(&root).unwrap();
    }
}
