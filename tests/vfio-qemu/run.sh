#!/usr/bin/env bash
# The VFIO backend on a real Linux kernel, without a NIC: boot a throw-away Debian guest under QEMU
# (software emulation, TCG) on a q35 machine with an emulated Intel VT-d IOMMU, QEMU's `edu`
# device and an emulated Intel NIC with MSI-X (igb; e1000e on a QEMU without igb); the guest binds
# both to vfio-pci and runs tests/vfio-qemu/guest (mlx5-vfio-guest, a static binary built on
# `mlx5-vfio`). Prints the guest's `VFIOTEST:` lines and its `N passed, N failed` line.
#
#   usage: tests/vfio-qemu/run.sh
#
# Installs what it needs: QEMU (qemu-system-x86 from <codename>-backports through a private apt
# state, else the release's own), cpio; downloads (does not install) a Debian cloud kernel and
# busybox-static. Caches them under $WORK. Exit status: the guest test's (0 = all passed), 124 on
# timeout, 2 if the test cannot run here (the reason is printed).
#
# Environment knobs:
#   WORK=dir        cache (default <repo>/target/vfio-qemu)
#   BIN=file        use this static test binary instead of building it
#   KERNEL_PKG=pkg  kernel metapackage (default linux-image-cloud-amd64)
#   NIC=igb|e1000e  the MSI-X NIC (default: igb if this QEMU has it)
#   TIMEOUT=s       limit for the guest run (default 240)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${WORK:-$ROOT/target/vfio-qemu}
KERNEL_PKG=${KERNEL_PKG:-linux-image-cloud-amd64}
TIMEOUT=${TIMEOUT:-240}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
T0=$(date +%s.%N)

say() { printf 'vfio-qemu: [%5.1fs] %s\n' "$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" "$*"; }
cannot() { echo "vfio-qemu: CANNOT RUN the real-kernel VFIO test here: $*" >&2; exit 2; }

# --- 1. the static guest test binary ---------------------------------------------------------
if [ -z "${BIN:-}" ]; then
  cd "$ROOT"
  if rustup target add x86_64-unknown-linux-musl >/dev/null 2>&1 ||
     rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl; then
    TARGET=x86_64-unknown-linux-musl
    cargo build --release --locked -q -p mlx5-vfio-guest --target "$TARGET"
  else
    # No musl target: a static glibc binary works as well.
    TARGET=x86_64-unknown-linux-gnu
    RUSTFLAGS="-C target-feature=+crt-static" \
      cargo build --release --locked -q -p mlx5-vfio-guest --target "$TARGET"
  fi
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/$TARGET/release/mlx5-vfio-guest
  say "built $(basename "$BIN") for $TARGET ($(( $(stat -c %s "$BIN") / 1024 )) KiB)"
fi
[ -x "$BIN" ] || cannot "no test binary at $BIN"

# --- 2. host tools -----------------------------------------------------------------------------
[ "$(uname -m)" = x86_64 ] || cannot "needs an x86_64 host (found $(uname -m))"
command -v apt-get >/dev/null || cannot "needs a Debian-like host with apt-get to install QEMU"
CODENAME=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo

# A private apt state: the system's sources plus <codename>-backports (QEMU 10 has igb; the
# release's QEMU 7.2 may also want to remove a backports qemu-utils), with lists and cache of its
# own, leaving /etc/apt and /var/lib/apt alone.
PRIV=()
MIRROR=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
if [ -n "$MIRROR" ] && [ -n "$CODENAME" ]; then
  mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $CODENAME-backports main" \
    > "$WORK/apt/sources.list"
  PRIV=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o "Dir::State::Lists=$WORK/apt/lists"
        -o "Dir::Cache=$WORK/apt/cache" -o "APT::Sandbox::User=root")
fi

# The kernel package the metapackage resolved to last time (its unpacked tree is the cache).
KCACHE=$WORK/resolved-$KERNEL_PKG
KDEB=""
if [ -s "$KCACHE" ] && [ -d "$WORK/$(cat "$KCACHE")/boot" ]; then KDEB=$(cat "$KCACHE"); fi
apt_lists_fresh() { apt-cache policy "$KERNEL_PKG" 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; }
if [ -z "$KDEB" ] && ! apt_lists_fresh; then
  say "apt-get update"
  $SUDO apt-get update -qq || true
  apt_lists_fresh || cannot "apt cannot find $KERNEL_PKG (no Debian package lists?)"
fi

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v cpio >/dev/null || need+=(cpio)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  ok=0
  if [ ${#PRIV[@]} -gt 0 ] && $SUDO apt-get -qq "${PRIV[@]}" update 2>/dev/null; then
    $SUDO apt-get install -y -qq --no-install-recommends --no-remove "${PRIV[@]}" \
      -t "$CODENAME-backports" "${need[@]}" >/dev/null 2>&1 && ok=1
  fi
  if [ $ok = 0 ]; then
    $SUDO apt-get install -y -qq --no-install-recommends --no-remove "${need[@]}" >/dev/null ||
      cannot "could not install ${need[*]} with apt-get"
  fi
fi
command -v qemu-system-x86_64 >/dev/null || cannot "qemu-system-x86_64 is not installed"
say "$(qemu-system-x86_64 --version | head -1)"

DEVHELP=$(qemu-system-x86_64 -machine q35 -device help 2>&1 || true)
for d in intel-iommu edu; do
  grep -q "\"$d\"" <<<"$DEVHELP" || cannot "this QEMU has no '$d' device"
done
if [ -z "${NIC:-}" ]; then
  if grep -q '"igb"' <<<"$DEVHELP"; then NIC=igb; else NIC=e1000e; fi
fi
case $NIC in
  igb) NIC_ID=8086:10c9 ;;
  e1000e) NIC_ID=8086:10d3 ;;
  *) cannot "NIC must be igb or e1000e" ;;
esac

# --- 3. guest kernel (with its vfio modules) and busybox: downloaded and unpacked only ----------
if [ -z "$KDEB" ]; then
  KDEB=$(apt-cache depends "$KERNEL_PKG" 2>/dev/null | awk '/Depends: linux-image-/ { print $2 }' | sort -V | tail -1)
  [ -n "$KDEB" ] || cannot "cannot resolve $KERNEL_PKG to a kernel package"
fi
KROOT=$WORK/$KDEB
if [ ! -d "$KROOT/boot" ]; then
  say "downloading $KDEB"
  rm -rf "$WORK/dl" && mkdir -p "$WORK/dl"
  (cd "$WORK/dl" && apt-get download -qq -o APT::Sandbox::User=root "$KDEB") ||
    cannot "could not download $KDEB"
  rm -rf "$KROOT.part"
  dpkg-deb -x "$WORK"/dl/*.deb "$KROOT.part"
  mv "$KROOT.part" "$KROOT" && rm -rf "$WORK/dl"
fi
echo "$KDEB" > "$KCACHE"
KVER=$(ls "$KROOT/lib/modules" | head -1)
BUSYBOX=$WORK/busybox/bin/busybox
if [ ! -x "$BUSYBOX" ]; then
  say "downloading busybox-static"
  rm -rf "$WORK/dl" && mkdir -p "$WORK/dl"
  (cd "$WORK/dl" && apt-get download -qq -o APT::Sandbox::User=root busybox-static) ||
    cannot "could not download busybox-static"
  rm -rf "$WORK/busybox" && dpkg-deb -x "$WORK"/dl/*.deb "$WORK/busybox" && rm -rf "$WORK/dl"
fi

# --- 4. initramfs: busybox, /init, the test binary, the vfio modules in load order ------------
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,dev,proc,sys,lib/modules}
cp "$BUSYBOX" "$STAGE/bin/busybox"
cp "$HERE/guest-init.sh" "$STAGE/init" && chmod 755 "$STAGE/init"
cp "$BIN" "$STAGE/vfio-test"
MODDIR=$KROOT/lib/modules/$KVER/kernel
# Dependency order (modinfo depends=); a name that is built in or merged (vfio_virqfd in >= 6.2)
# is simply not found.
for m in iommufd vfio vfio_iommu_type1 vfio_virqfd irqbypass vfio-pci-core vfio-pci; do
  f=$(find "$MODDIR" \( -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" \) 2>/dev/null | head -1)
  [ -n "$f" ] || continue
  case $f in
    *.xz) xz -dc "$f" > "$STAGE/lib/modules/$m.ko" ;;
    *.zst) zstd -qdc "$f" > "$STAGE/lib/modules/$m.ko" ;;
    *) cp "$f" "$STAGE/lib/modules/$m.ko" ;;
  esac
  echo "$m" >> "$STAGE/lib/modules/order"
done
(cd "$STAGE" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.gz"
say "initramfs $(( $(stat -c %s "$WORK/initramfs.gz") / 1024 )) KiB, kernel $KVER, devices edu + $NIC"

# --- 5. boot ---------------------------------------------------------------------------------------
LOG=$WORK/guest.log
say "booting the guest (TCG, q35, intel-iommu)"
set +e
timeout --kill-after=5 "$TIMEOUT" qemu-system-x86_64 \
  -machine q35,accel=tcg -cpu max -smp 1 -m 512M \
  -device intel-iommu,intremap=on \
  -device edu \
  -device "$NIC" \
  -kernel "$KROOT/boot/vmlinuz-$KVER" -initrd "$WORK/initramfs.gz" \
  -append "console=ttyS0 intel_iommu=on loglevel=4 panic=-1 hugepages=16 vfiotest.ids=1234:11e8,$NIC_ID" \
  -nographic -nodefaults -serial stdio -monitor none -no-reboot </dev/null 2>&1 |
  tr -d '\r' | tee "$LOG" |
  grep -aE 'GUEST:|VFIOTEST|DMAR|^\[(WARN|ERROR)\]|^qemu|^[0-9]+ passed, [0-9]+ failed|Kernel panic|hardware error' |
  grep -av 'has no peer' |
  sed -u 's/^.*GUEST:/GUEST:/'
QRC=${PIPESTATUS[0]}
set -e
say "guest finished (qemu exit $QRC)"
if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
  echo "vfio-qemu: TIMEOUT after ${TIMEOUT}s; the guest's console is in $LOG"
  exit 124
fi
RC=$(sed -n 's/^GUEST-RESULT rc=\([0-9]*\).*/\1/p' "$LOG" | tail -1)
if [ -z "$RC" ]; then
  echo "vfio-qemu: the guest gave no result (qemu exit $QRC); its console is in $LOG"
  tail -20 "$LOG"
  exit 1
fi
exit "$RC"
