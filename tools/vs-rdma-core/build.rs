//! Builds rdma-core's mlx5 provider (`providers/mlx5/qp.c`, `cq.c`), unchanged, from the source
//! tree or tarball named by `MLX5_RDMA_CORE_SRC`, with our shim (`csrc/shim.c`), into a static
//! library for the side-by-side bench. Nothing of theirs is in this crate: a tarball is unpacked
//! into `OUT_DIR`, and the headers their build generates are made there too.
//!
//! Without `MLX5_RDMA_CORE_SRC` (or if something is missing) nothing is built and the library's
//! `Theirs::new` says why; the bench then skips.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's compiler flags for rdma-core (dpkg-buildflags and rdma-core's own CMake flags).
const FLAGS: &[&str] = &[
    "-std=gnu11",
    "-O2",
    "-g",
    "-fno-strict-aliasing",
    "-fstack-protector-strong",
    "-D_FORTIFY_SOURCE=2",
    "-fPIC",
    "-D_GNU_SOURCE",
];

/// The headers rdma-core's build publishes as `<infiniband/…>`: (directory in their tree, file).
const INFINIBAND: &[(&str, &str)] = &[
    ("libibverbs", "arch.h"),
    ("libibverbs", "opcode.h"),
    ("libibverbs", "verbs.h"),
    ("libibverbs", "verbs_api.h"),
    ("libibverbs", "tm_types.h"),
    ("libibverbs", "cmd_ioctl.h"),
    ("libibverbs", "cmd_write.h"),
    ("libibverbs", "driver.h"),
    ("libibverbs", "kern-abi.h"),
    ("libibverbs", "marshall.h"),
    ("kernel-headers/rdma", "mlx5_user_ioctl_verbs.h"),
    ("providers/mlx5", "mlx5_api.h"),
    ("providers/mlx5", "mlx5dv.h"),
];

/// Kernel ABI headers their build turns into `<kernel-abi/…>` (one `_STRUCT_x` define per struct).
const KERNEL_ABI: &[&str] = &["ib_user_verbs.h", "mlx5-abi.h"];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(rdma_core)");
    println!("cargo::rerun-if-env-changed=MLX5_RDMA_CORE_SRC");
    println!("cargo::rerun-if-changed=csrc/shim.c");
    println!("cargo::rerun-if-changed=build.rs");
    let status = match build() {
        Ok(version) => {
            println!("cargo::rustc-cfg=rdma_core");
            format!("rdma-core {version}")
        }
        Err(why) => {
            if env::var_os("MLX5_RDMA_CORE_SRC").is_some() {
                println!("cargo::warning=rdma-core's mlx5 provider not built: {why}");
            }
            why
        }
    };
    println!("cargo::rustc-env=MLX5_RDMA_CORE_STATUS={status}");
}

fn build() -> Result<String, String> {
    let src = env::var_os("MLX5_RDMA_CORE_SRC")
        .map(PathBuf::from)
        .ok_or("MLX5_RDMA_CORE_SRC is not set (point it at rdma-core 56.1's source tarball or tree, e.g. ../shared/rdma-core/rdma-core_56.1.orig.tar.gz)")?;
    println!("cargo::rerun-if-changed={}", src.display());
    let out = PathBuf::from(env::var_os("OUT_DIR").ok_or("no OUT_DIR")?);
    let root = if src.is_dir() {
        src.clone()
    } else if src.is_file() {
        unpack(&src, &out)?
    } else {
        return Err(format!(
            "MLX5_RDMA_CORE_SRC={}: no such file or directory",
            src.display()
        ));
    };
    let root = find_root(&root)
        .ok_or_else(|| format!("no providers/mlx5/qp.c under {}", root.display()))?;
    let version = version(&root);
    if version != "56.1" {
        println!("cargo::warning=rdma-core {version}: the shim was written against 56.1");
    }

    // The include tree their build would make: <config.h>, <infiniband/…>, <kernel-abi/…>.
    let inc = out.join("include");
    fs::create_dir_all(inc.join("infiniband")).map_err(|e| e.to_string())?;
    fs::create_dir_all(inc.join("kernel-abi")).map_err(|e| e.to_string())?;
    fs::write(inc.join("config.h"), CONFIG_H).map_err(|e| e.to_string())?;
    for (dir, file) in INFINIBAND {
        let from = root.join(dir).join(file);
        fs::copy(&from, inc.join("infiniband").join(file))
            .map_err(|e| format!("{}: {e}", from.display()))?;
    }
    for file in KERNEL_ABI {
        let script = root.join("buildlib/make_abi_structs.py");
        let from = root.join("kernel-headers/rdma").join(file);
        let to = inc.join("kernel-abi").join(file);
        let ok = Command::new("python3")
            .arg(&script)
            .arg(&from)
            .arg(&to)
            .status()
            .map_err(|e| format!("python3 (for their make_abi_structs.py): {e}"))?;
        if !ok.success() {
            return Err(format!("make_abi_structs.py {file}: {ok}"));
        }
    }

    let mut b = cc::Build::new();
    b.no_default_flags(true)
        .warnings(false)
        .include(&inc)
        .include(&root)
        .include(root.join("kernel-headers"))
        .include(root.join("providers/mlx5"))
        .file(root.join("providers/mlx5/qp.c"))
        .file(root.join("providers/mlx5/cq.c"))
        .file("csrc/shim.c");
    for f in FLAGS {
        b.flag(f);
    }
    b.try_compile("mlx5_theirs").map_err(|e| e.to_string())?;
    Ok(version)
}

/// Unpacks a tarball into `out/src` (once per tarball path) and returns that directory.
fn unpack(tarball: &Path, out: &Path) -> Result<PathBuf, String> {
    let dir = out.join("src");
    let stamp = out.join("src.stamp");
    let id = format!("{}", tarball.display());
    if fs::read_to_string(&stamp).ok().as_deref() == Some(id.as_str()) {
        return Ok(dir);
    }
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let ok = Command::new("tar")
        .arg("-xzf")
        .arg(tarball)
        .arg("-C")
        .arg(&dir)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if !ok.success() {
        return Err(format!("tar -xzf {}: {ok}", tarball.display()));
    }
    fs::write(&stamp, id).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// The directory holding `providers/mlx5/qp.c`: `dir` itself or one level down (a tarball's
/// top directory).
fn find_root(dir: &Path) -> Option<PathBuf> {
    let has = |d: &Path| d.join("providers/mlx5/qp.c").is_file();
    if has(dir) {
        return Some(dir.to_path_buf());
    }
    fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|d| has(d))
}

/// `PACKAGE_VERSION` from their top-level CMakeLists.txt ("unknown" if not found).
fn version(root: &Path) -> String {
    let text = fs::read_to_string(root.join("CMakeLists.txt")).unwrap_or_default();
    text.lines()
        .find_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("set(PACKAGE_VERSION")?;
            Some(
                rest.trim()
                    .trim_end_matches(')')
                    .trim_matches('"')
                    .to_string(),
            )
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The `config.h` their CMake would generate on x86-64 Linux (Debian's configuration: no
/// LTTng, ioctl and write verbs both), reduced to what the provider's post and poll paths read.
const CONFIG_H: &str = "\
#ifndef CONFIG_H_IN
#define CONFIG_H_IN
#define HAVE_STATEMENT_EXPR 1
#define HAVE_BUILTIN_TYPES_COMPATIBLE_P 1
#define HAVE_TYPEOF 1
#define HAVE_ISBLANK 1
#define HAVE_BUILTIN_CLZ 1
#define HAVE_BUILTIN_CLZL 1
#define PACKAGE_VERSION \"56.1\"
#define STREAM_CLOEXEC \"e\"
#define RDMA_CDEV_DIR \"/dev/infiniband\"
#define HAVE_FUNC_ATTRIBUTE_ALWAYS_INLINE 1
#define HAVE_FUNC_ATTRIBUTE_IFUNC 1
#define HAVE_FUNC_ATTRIBUTE_SYMVER 1
#define HAVE_WORKING_IF_H 1
#define HAVE_FULL_SYMBOL_VERSIONS 1
#define SIZEOF_LONG 8
#define VERBS_IOCTL_ONLY 0
#define VERBS_WRITE_ONLY 0
#endif
";
