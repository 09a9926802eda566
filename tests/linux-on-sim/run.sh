#!/usr/bin/env bash
# Linux's own mlx5 drivers on the simulated ConnectX-5: `mlx5ctl sim --vfio-user` serves one or
# more simulated NICs (one fabric) to a QEMU guest (QEMU 10.2 with the vfio-user client, from
# ../shared/qemu), which boots a Debian cloud kernel and loads mlx5_core. Prints what the guest
# saw, the commands Linux sent with the simulator's answers (from its command trace), and
# `N passed, N failed`.
#
#   usage: tests/linux-on-sim/run.sh
#
# Caches the kernel and busybox the way tests/vfio-qemu/run.sh does (shares its cache under
# target/vfio-qemu), and QEMU under target/linux-on-sim. Exit status: 0 when every check
# passed, 1 otherwise, 2 if it cannot run here (the reason is printed).
#
# Then (issue #11 item 5) the guest binds the NICs to vfio-pci behind its emulated VT-d IOMMU
# (`intel_iommu=on iommu=pt`: Linux's drivers get identity maps, vfio-pci a translated domain)
# and runs this project's `mlx5ctl list`, `devinfo --vfio` and `demo --vfio A --vfio B` (rc, uc,
# ud), a static build, through the guest kernel's VFIO; the simulator's accounts are checked at
# the end of every life of every NIC (each reset ends one).
#
# Environment knobs: NICS (default 2), TIMEOUT (default 420 s), WAIT (seconds the guest gives the
# probe, default 20), SHARED (default <repo>/../shared), VFIO (1: the mlx5ctl part, default; 0:
# Linux's drivers only), DEMO (the demo types, default rc,uc,ud), UP (1: ip link set up on each
# netdev, checked for carrier), TRAFFIC (1: the rdma-core pingpongs and perftest between mlx5_0
# and mlx5_1; checked, with the frames on the wire), UMR (0: a cx5 profile with
# umr_modify_entity_size_disabled, so mlx5_ib registers user memory by CREATE_MKEY instead of UMR
# WQEs on its MR cache — how tools/tests/data/rdma-core-pingpong.jsonl was captured), GID (their GID index, default 1, the RoCE v2 GID; 0 is the RoCE v1 GID), PING
# (default TRAFFIC: eth1 in a namespace of its own, ping both ways and a 1 MiB TCP stream), SIM (mlx5ctl sim's profile, default cx5), DBGPAGES (1: mlx5_core's
# debug messages kept from boot and its page lines and debugfs page counters printed; slow),
# PYVERBS (1: rdma-core's own test suite, from Debian's python3-pyverbs of the guest's rdma-core
# version, 44.0-2, run in the guest on mlx5_0 port 1 GID 1 by our pyv_runner.py (a line per test)
# with Debian's Python 3.11, iproute2 and the RDMA CM modules; implies UP=1 VFIO=0 TRAFFIC=0 WAIT=5,
# TIMEOUT 900, 2 GiB guest; checked: the suite ran to its summary, no failure, no error, and every
# skip is one tests/linux-on-sim/pyverbs-expected.txt allows, with its reason; downloads cached
# under target/linux-on-sim/pyv-debs), PYV_TESTS (with PYVERBS=1: only these tests, comma-separated
# unittest names such as test_odp or test_odp.OdpTestCase.test_odp_rc_traffic; the skip and count
# checks then fail, as not every test ran — for a focused look, not for CI), VF (1: the NICs
# are ConnectX-5 virtual functions, 15b3:1018, as a cloud guest gets them — `mlx5ctl sim --vf`;
# checked: Linux probes them as VFs), VF_MAC (with VF=1, `unset`: their hypervisor assigned no
# MAC, so mlx5e picks random ones — checked in dmesg — and programs them into the vports).
#
# CI runs it twice: as is (Linux's probe and unload on the real cx5 profile, then mlx5ctl
# through vfio-pci), and with TRAFFIC=1 UP=1 VFIO=0.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
WORK=$ROOT/target/linux-on-sim
KCACHE_DIR=$ROOT/target/vfio-qemu
mkdir -p "$KCACHE_DIR"
NICS=${NICS:-2}
# PYVERBS=1: rdma-core's pyverbs test suite on Linux's drivers (no mlx5ctl, no pingpongs).
PYVERBS=${PYVERBS:-0}
if [ "$PYVERBS" = 1 ]; then UP=${UP:-1} VFIO=${VFIO:-0} TRAFFIC=${TRAFFIC:-0} WAIT=${WAIT:-5}; fi
TIMEOUT=${TIMEOUT:-$([ "${DBGPAGES:-0}" = 1 ] && echo 1200 || { [ "$PYVERBS" = 1 ] && echo 900; } || echo 420)}
WAIT=${WAIT:-20}
MEM=$([ "$PYVERBS" = 1 ] && echo 2G || echo 1G)
mkdir -p "$WORK"
cannot() { echo "linux-on-sim: CANNOT RUN here: $*" >&2; exit 2; }
say() { echo "linux-on-sim: $*"; }

# --- QEMU with the vfio-user client ------------------------------------------------------
[ -x "$SHARED/qemu/get-qemu.sh" ] || [ -f "$SHARED/qemu/get-qemu.sh" ] || cannot "no $SHARED/qemu/get-qemu.sh"
QEMU=$(bash "$SHARED/qemu/get-qemu.sh" "$WORK/qemu" | tail -1) || cannot "get-qemu.sh failed"
say "$("$QEMU" --version | head -1)"

# --- kernel and busybox: the vfio-qemu cache (its run.sh downloads them; reuse or fetch) -----
KDEB=$(cat "$KCACHE_DIR/resolved-linux-image-cloud-amd64" 2>/dev/null || true)
if [ -z "$KDEB" ] || [ ! -d "$KCACHE_DIR/$KDEB/boot" ] || [ ! -x "$KCACHE_DIR/busybox/bin/busybox" ]; then
  command -v apt-get >/dev/null || cannot "needs apt-get to download a kernel"
  KDEB=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2 }' | sort -V | tail -1)
  [ -n "$KDEB" ] || cannot "apt cannot resolve linux-image-cloud-amd64 (no package lists?)"
  say "downloading $KDEB and busybox-static"
  rm -rf "$KCACHE_DIR/dl" && mkdir -p "$KCACHE_DIR/dl"
  (cd "$KCACHE_DIR/dl" && apt-get download -qq -o APT::Sandbox::User=root "$KDEB" busybox-static) ||
    cannot "could not download $KDEB"
  rm -rf "$KCACHE_DIR/$KDEB" "$KCACHE_DIR/busybox"
  dpkg-deb -x "$KCACHE_DIR"/dl/linux-image-*.deb "$KCACHE_DIR/$KDEB"
  dpkg-deb -x "$KCACHE_DIR"/dl/busybox-static*.deb "$KCACHE_DIR/busybox"
  echo "$KDEB" > "$KCACHE_DIR/resolved-linux-image-cloud-amd64"
  rm -rf "$KCACHE_DIR/dl"
fi
KROOT=$KCACHE_DIR/$KDEB
KVER=$(ls "$KROOT/lib/modules" | head -1)

# --- initramfs: busybox, /init, the mlx5 modules in dependency order -----------------------
STAGE=$(mktemp -d); trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,dev,proc,sys,lib/modules}
cp "$KCACHE_DIR/busybox/bin/busybox" "$STAGE/bin/"
cp "$HERE/guest-init.sh" "$STAGE/init"; chmod 755 "$STAGE/init"
for m in pci-hyperv-intf mlxfw mlx5_core ib_core ib_uverbs mlx5_ib; do
  f=$(find "$KROOT/lib/modules/$KVER/kernel" -name "$m.ko" | head -1)
  [ -n "$f" ] || cannot "module $m not in $KDEB"
  cp "$f" "$STAGE/lib/modules/$m.ko"; echo "$m" >> "$STAGE/lib/modules/order"
done
# rdma-core's user space (Debian's packages, unmodified): libibverbs with its mlx5 provider and
# ibverbs-utils, perftest, and ethtool (the traffic run turns mlx5e's CQE compression on with
# it), with the host's C library and loader (the guest has no other).
RDEBS=$WORK/rdma-debs
if [ ! -x "$RDEBS/root/usr/bin/ibv_devinfo" ] || [ ! -x "$RDEBS/root/usr/bin/ib_write_bw" ] ||
   [ ! -x "$RDEBS/root/sbin/ethtool" ]; then
  command -v apt-get >/dev/null || cannot "needs apt-get to download rdma-core's packages"
  rm -rf "$RDEBS" && mkdir -p "$RDEBS/root"
  (cd "$RDEBS" && apt-get download -qq -o APT::Sandbox::User=root \
      ibverbs-utils libibverbs1 ibverbs-providers libnl-3-200 libnl-route-3-200 \
      perftest librdmacm1 libibumad3 libpci3 ethtool libmnl0) ||
    cannot "could not download rdma-core's packages"
  for d in "$RDEBS"/*.deb; do dpkg-deb -x "$d" "$RDEBS/root"; done
fi
cp -a "$RDEBS/root/." "$STAGE/"
mkdir -p "$STAGE/lib/x86_64-linux-gnu" "$STAGE/lib64"
for l in $(LD_LIBRARY_PATH="$RDEBS/root/usr/lib/x86_64-linux-gnu" ldd "$RDEBS/root/usr/bin/ibv_devinfo" \
           "$RDEBS"/root/usr/bin/ib_write_bw "$RDEBS"/root/sbin/ethtool |
           awk '$3 ~ /^\// && $3 !~ /rdma-debs/ { print $3 }'); do
  cp -L "$l" "$STAGE/lib/x86_64-linux-gnu/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$STAGE/lib64/"
# Item 5 of issue #11: after Linux's drivers leave, the guest binds the NICs to vfio-pci (behind
# the emulated VT-d IOMMU) and runs this project's mlx5ctl through the guest kernel's VFIO: the
# vfio modules and a static mlx5ctl.
if [ "${VFIO:-1}" = 1 ]; then
  for m in iommufd vfio vfio_iommu_type1 vfio_virqfd irqbypass vfio-pci-core vfio-pci; do
    f=$(find "$KROOT/lib/modules/$KVER/kernel" -name "$m.ko" | head -1)
    [ -n "$f" ] || continue
    cp "$f" "$STAGE/lib/modules/$m.ko"; echo "$m" >> "$STAGE/lib/modules/vfio-order"
  done
  (cd "$ROOT" && rustup target add x86_64-unknown-linux-musl >/dev/null 2>&1 || true
   cargo build --release --locked -q -p mlx5-tools --bin mlx5ctl --target x86_64-unknown-linux-musl) ||
    cannot "could not build a static mlx5ctl for the guest"
  cp "${CARGO_TARGET_DIR:-$ROOT/target}/x86_64-unknown-linux-musl/release/mlx5ctl" "$STAGE/bin/mlx5ctl"
  # The VFIO example a user starts from (hw/vfio/examples/vfio_rc_ping.rs), run as they would.
  (cd "$ROOT" && cargo build --release --locked -q -p mlx5-vfio --example vfio_rc_ping --target x86_64-unknown-linux-musl) ||
    cannot "could not build the static vfio_rc_ping example for the guest"
  cp "${CARGO_TARGET_DIR:-$ROOT/target}/x86_64-unknown-linux-musl/release/examples/vfio_rc_ping" "$STAGE/bin/vfio_rc_ping"
fi
# PYVERBS=1: rdma-core's own test suite (pyverbs, unittest) run in the guest against mlx5_0.
# Debian's python3-pyverbs of the same version as the guest's libibverbs1 (it ships the suite,
# gzipped, as documentation), Debian's Python 3.11 (the ABI pyverbs is built for) with its
# standard library less what the suite never imports, iproute2's ip and devlink (the tests run
# `ip -j addr` and `devlink dev eswitch show`), scapy (the raw packet and DevX tests build their
# packets and commands with it), the RDMA CM modules, and our runner
# (pyv_runner.py: one result line per test as it ends).
if [ "$PYVERBS" = 1 ]; then
  PYV=$WORK/pyv-debs
  RVER=$(dpkg-deb -f "$RDEBS"/libibverbs1_*.deb Version)
  if [ ! -x "$PYV/root/usr/bin/python3.11" ] || [ ! -x "$PYV/root/bin/ip" ] ||
     [ ! -d "$PYV/root/usr/lib/python3/dist-packages/scapy" ] ||
     [ "$(cat "$PYV/pyverbs-version" 2>/dev/null)" != "$RVER" ]; then
    command -v apt-get >/dev/null || cannot "needs apt-get to download pyverbs and Python"
    rm -rf "$PYV" && mkdir -p "$PYV/root"
    (cd "$PYV" && apt-get download -qq -o APT::Sandbox::User=root "python3-pyverbs=$RVER" \
        python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libpython3.11 iproute2 \
        python3-scapy) ||
      cannot "could not download python3-pyverbs $RVER (the guest's rdma-core), Python 3.11, iproute2 or scapy"
    for d in "$PYV"/*.deb; do dpkg-deb -x "$d" "$PYV/root"; done
    echo "$RVER" > "$PYV/pyverbs-version"
  fi
  say "pyverbs: $(cd "$PYV" && ls *.deb | sed 's/_amd64.deb//; s/_all.deb//' | tr '\n' ' ')"
  for m in configfs ib_cm iw_cm rdma_cm rdma_ucm; do
    f=$(find "$KROOT/lib/modules/$KVER/kernel" -name "$m.ko" | head -1)
    [ -n "$f" ] || cannot "module $m not in $KDEB"
    cp "$f" "$STAGE/lib/modules/$m.ko"; echo "$m" >> "$STAGE/lib/modules/order"
  done
  P=$PYV/root
  mkdir -p "$STAGE/usr/bin" "$STAGE/usr/lib/python3" "$STAGE/sbin" "$STAGE/tests"
  cp -a "$P/usr/bin/python3.11" "$STAGE/usr/bin/"; ln -sf python3.11 "$STAGE/usr/bin/python3"
  cp -a "$P/usr/lib/python3.11" "$STAGE/usr/lib/"
  cp -a "$P/usr/lib/python3/dist-packages" "$STAGE/usr/lib/python3/"
  cp -a "$P"/usr/lib/x86_64-linux-gnu/libpython3.11.so* "$STAGE/usr/lib/x86_64-linux-gnu/"
  # iproute2's ip and devlink (the guest's busybox sh runs its own ip applet for a bare `ip`;
  # the suite's subprocesses find these through PATH).
  cp -a "$P/bin/ip" "$STAGE/bin/"; cp -a "$P/sbin/devlink" "$STAGE/sbin/"; ln -sf /bin/ip "$STAGE/sbin/ip"
  # The standard library without its tests, IDLE, Tk, 2to3, pip's bootstrap and the modules
  # whose C libraries the suite never needs (curses, readline, dbm, sqlite).
  L=$STAGE/usr/lib/python3.11
  rm -rf "$L"/{test,idlelib,tkinter,turtledemo,lib2to3,ensurepip,pydoc_data,curses,dbm,sqlite3,turtle.py}
  find "$L" -depth -type d \( -name test -o -name tests -o -name idle_test \) -exec rm -rf {} +
  rm -f "$L"/lib-dynload/{_curses,_curses_panel,readline,_dbm,_gdbm,_sqlite3,_tkinter}.*so
  # The suite: gunzipped, as the package's test directory is laid out in rdma-core's tree.
  cp -a "$P/usr/share/doc/rdma-core/tests/." "$STAGE/tests/"
  gunzip -f "$STAGE"/tests/*.gz
  cp "$HERE/pyv_runner.py" "$STAGE/tests/"
  # The C libraries of python3.11, of every extension module (the standard library's and
  # pyverbs') and of ip and devlink that neither package tree holds: the host's.
  LIBS=$(LD_LIBRARY_PATH="$P/usr/lib/x86_64-linux-gnu:$RDEBS/root/usr/lib/x86_64-linux-gnu" ldd \
           "$P/usr/bin/python3.11" "$P/bin/ip" "$P/sbin/devlink" \
           $(find "$L/lib-dynload" "$STAGE/usr/lib/python3/dist-packages" -name '*.so') 2>/dev/null)
  MISSING=$(echo "$LIBS" | awk '/not found/ { print $1 }' | sort -u | tr '\n' ' ')
  [ -z "$MISSING" ] || say "pyverbs: WARNING: libraries ldd cannot find (their modules will not import): $MISSING"
  for l in $(echo "$LIBS" | awk '$3 ~ /^\// { print $3 }' | sort -u | grep -v -e "^$P/" -e "^$RDEBS/"); do
    [ -e "$STAGE/lib/x86_64-linux-gnu/$(basename "$l")" ] || cp -L "$l" "$STAGE/lib/x86_64-linux-gnu/"
  done
  for l in $(echo "$LIBS" | awk '$3 ~ /^\// { print $3 }' | sort -u | grep "^$P/usr/lib/x86_64-linux-gnu/"); do
    cp -L "$l" "$STAGE/usr/lib/x86_64-linux-gnu/"
  done
fi
(cd "$STAGE" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.gz"
say "initramfs: $(du -k "$WORK/initramfs.gz" | cut -f1) KiB gzipped, $(du -sk "$STAGE" | cut -f1) KiB unpacked"

# --- the simulated NICs -------------------------------------------------------------------
cargo build --release --locked -q -p mlx5-tools --bin mlx5ctl
CTL=${CARGO_TARGET_DIR:-$ROOT/target}/release/mlx5ctl
SOCKS=(); DEVS=(); ARGS=()
for i in $(seq 0 $((NICS - 1))); do
  s=$WORK/nic$i.sock; rm -f "$s"; SOCKS+=("$s"); ARGS+=(--vfio-user "$s")
  DEVS+=(-device "{\"driver\":\"vfio-user-pci\",\"socket\":{\"type\":\"unix\",\"path\":\"$s\"}}")
done
# UMR=0: a ConnectX-5 with `umr_modify_entity_size_disabled` = 1, so that mlx5_ib registers user
# memory with CREATE_MKEY and its page list instead of UMR WQEs on its MR cache (how the
# differential's fixture is captured: a UMR is not a command; docs/simulator.md).
if [ "${UMR:-1}" = 0 ] && [ -z "${SIM:-}" ]; then
  echo '{"name": "cx5-no-umr", "umr_modify_entity_size_disabled": 1}' > "$WORK/cx5-no-umr.json"
  SIM=$WORK/cx5-no-umr.json
fi
# VF=1: the NICs as virtual functions (VF_MAC=unset: with no MAC from the hypervisor).
# With UP=1 too (VFLINK): the hypervisor holds NIC 0's vport down and lets it go through
# mlx5ctl sim's control socket while the guest watches eth0's carrier.
VFLINK=0
if [ "${VF:-0}" = 1 ]; then
  ARGS+=(--vf --control "$WORK/control.sock")
  rm -f "$WORK/control.sock"
  [ "${VF_MAC:-}" = unset ] && ARGS+=(--vf-mac-unset)
  [ "${UP:-0}" = 1 ] && VFLINK=1
fi
RUST_LOG=${RUST_LOG:-warn} "$CTL" sim "${ARGS[@]}" --sim "${SIM:-cx5}" --trace "$WORK/trace.jsonl" --pcap "$WORK/wire.pcap" > "$WORK/server.log" 2>&1 &
SERVER=$!
for s in "${SOCKS[@]}"; do for _ in $(seq 100); do [ -S "$s" ] && break; sleep 0.1; done; done

# --- boot -----------------------------------------------------------------------------------
say "booting $KVER with $NICS simulated ConnectX-5 (TCG)"
# VFLINK: the hypervisor's side, driven by the guest's markers in its log.
if [ "$VFLINK" = 1 ]; then
  rm -f "$WORK/vflink.log"
  (
    for step in ready:down release:auto; do
      for _ in $(seq 1200); do grep -aq "^GUEST-VFLINK: ${step%%:*}" "$WORK/guest.log" 2>/dev/null && break; sleep 0.5; done
      python3 - "$WORK/control.sock" "0 link ${step#*:}" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + '\n').encode())
print('linux-on-sim: hypervisor:', sys.argv[2], '->', s.makefile().readline().strip())
PY
    done
  ) > "$WORK/vflink.log" 2>&1 &
fi
set +e
timeout --kill-after=5 "$TIMEOUT" "$QEMU" -L /usr/share/qemu -L /usr/share/seabios \
  -machine q35,accel=tcg,memory-backend=mem -object memory-backend-memfd,id=mem,size=$MEM,share=on \
  -cpu max -smp 1 -m $MEM -device intel-iommu,intremap=on,caching-mode=on "${DEVS[@]}" \
  -kernel "$KROOT/boot/vmlinuz-$KVER" -initrd "$WORK/initramfs.gz" \
  -append "console=ttyS0 loglevel=6 panic=-1 intel_iommu=on iommu=pt linuxsim.wait=$WAIT linuxsim.up=${UP:-0} linuxsim.vfio=${VFIO:-1} linuxsim.traffic=${TRAFFIC:-0} linuxsim.ping=${PING:-${TRAFFIC:-0}} linuxsim.gid=${GID:-1} linuxsim.dbgpages=${DBGPAGES:-0} linuxsim.pyverbs=$PYVERBS${PYV_TESTS:+ linuxsim.pyvtests=$PYV_TESTS} linuxsim.vflink=$VFLINK log_buf_len=16M linuxsim.demo=${DEMO:-rc,uc,ud}" \
  -nographic -nodefaults -serial stdio -monitor none -no-reboot </dev/null 2>&1 |
  stdbuf -oL tr -d '\r' > "$WORK/guest.log"
QRC=${PIPESTATUS[0]}
wait "$SERVER" 2>/dev/null
set -e
grep -aE '^GUEST|^qemu' "$WORK/guest.log" | grep -avE '^GUEST-DMESG: \[ *[0-9.]*\] +(RIP|Code|RSP|RAX|RDX|RBP|R10|R13|FS:|CS:|CR2|DR[0-9]|\? |[a-z_0-9.]+\+0x)' || true

# --- what Linux sent, and the verdict -------------------------------------------------------
python3 - "$WORK/trace.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])] if __import__('os').path.exists(sys.argv[1]) else []
prev, n = None, 0
print("linux-on-sim: commands the guest sent (Linux's drivers, then mlx5ctl through vfio-pci; name op_mod status syndrome), in order:")
for r in rows + [None]:
    name = None if r is None else (r['name'] if r['name'] != 'UNKNOWN' else f"UNKNOWN({r['opcode']})")
    k = None if r is None else (name, r['op_mod'], r['status'], r['syndrome'])
    if k == prev:
        n += 1; continue
    if prev: print("  ", *prev, f"x{n}" if n > 1 else "")
    prev, n = k, 1
PY
pass=0; fail=0
check() { if eval "$2"; then echo "PASS $1"; pass=$((pass+1)); else echo "FAIL $1"; fail=$((fail+1)); fi; }
check "the guest booted and reported" "grep -q '^GUEST-RESULT' '$WORK/guest.log'"
check "mlx5_core probed every simulated NIC" "grep -q 'GUEST-RESULT probe=ok' '$WORK/guest.log'"
check "mlx5e registered a netdev" "grep -aq '^GUEST-NETDEV eth[0-9]* .*driver=mlx5_core' '$WORK/guest.log'"
if [ "$VFLINK" = 1 ]; then
  cat "$WORK/vflink.log" 2>/dev/null
  check "the hypervisor held NIC 0's vport down (mlx5ctl sim --control): Linux saw eth0's carrier drop (PORT_CHANGE, QUERY_VPORT_STATE)" "grep -aq '^GUEST-VFLINK: eth0 carrier 0 with its vport held down' '$WORK/guest.log'"
  check "and come back when the vport follows the uplink again" "grep -aq '^GUEST-VFLINK: eth0 carrier 1 after the vport follows the uplink again' '$WORK/guest.log'"
fi
if [ "${VF:-0}" = 1 ]; then
  check "the guest sees every simulated NIC as a ConnectX-5 VF (PCI 15b3:1018) and mlx5_core drives it as one (no PF-only PCIe link print)" "[ \$(grep -ac 'pci .*\[15b3:1018\] type 00' '$WORK/guest.log') = $NICS ] && ! grep -aq 'PCIe bandwidth' '$WORK/guest.log'"
  if [ "${VF_MAC:-}" = unset ]; then
    check "with no MAC from the hypervisor, mlx5e assigned each VF a random one (dmesg)" "[ \$(grep -ac 'Assigned random MAC address' '$WORK/guest.log') = $NICS ]"
  fi
fi
# mlx5e's receive queue as on a real ConnectX-5 (real-cx5.md row 60): the striding (MPWQE) RQ,
# 128 strides of 2048 bytes per WQE, its pages mapped by UMR WQEs from an ICOSQ.
check "mlx5e takes the striding RQ a real ConnectX-5 gets (dmesg: StrdRq(1) RqSz(8) StrdSz(2048))" "grep -aq 'MLX5E: StrdRq(1) RqSz(8) StrdSz(2048)' '$WORK/guest.log'"
check "mlx5_ib registered an RDMA device" "grep -aq '^GUEST: ibdevs .*mlx5_0' '$WORK/guest.log'"
check "no command failed during the probe (dmesg mlx5_cmd_out_err), no kernel warning" "grep -aq 'GUEST-RESULT .*cmd_errors=0 warnings=0' '$WORK/guest.log'"
# rdma-core's ibv_devinfo in the guest against this project's mlx5ctl devinfo of the same
# profile: every device limit both print must agree (GUIDs follow each NIC's MAC: not compared).
# (VF=1: the VF profile, whose vendor_part_id is the VF's PCI id, as ibv_devinfo's.)
# (VF_MAC=unset: a VF whose hypervisor assigned no MAC, as the guest's.)
if [ "${VF:-0}" = 1 ]; then
  echo "{\"base\": \"cx5-vf\", \"name\": \"cx5-vf\", \"_mac_unset\": $([ "${VF_MAC:-}" = unset ] && echo 1 || echo 0)}" > "$WORK/vf-profile.json"
  "$CTL" devinfo --json --sim "$WORK/vf-profile.json" > "$WORK/devinfo.json"
else "$CTL" devinfo --json > "$WORK/devinfo.json"; fi
check "ibv_devinfo (rdma-core in the guest) lists mlx5_0 with the limits mlx5ctl devinfo shows" "python3 - '$WORK/guest.log' '$WORK/devinfo.json' <<'PY'
import json, re, sys
ibv = {}
for l in open(sys.argv[1], errors='replace'):
    m = re.match(r'GUEST-IBV: \t([a-z_]+):\t+(.*)$', l.rstrip('\n'))
    if m: ibv.setdefault(m.group(1), m.group(2).strip())
ours = json.load(open(sys.argv[2]))
skip = {'hca_id', 'node_guid', 'sys_image_guid', 'board_id', 'ports', 'raw_caps'}
keys = [k for k in ours if k not in skip and k in ibv]
bad = [(k, ours[k], ibv[k]) for k in keys if str(ours[k]) != ibv[k]]
print(f'linux-on-sim: ibv_devinfo vs mlx5ctl devinfo: {len(keys)} fields compared, {len(bad)} differ')
for b in bad: print('  ', *b)
sys.exit(1 if bad or len(keys) < 20 else 0)
PY"
# The real card: `ibv_devinfo -v` in the guest against what public dumps of a real ConnectX-5
# show (tests/linux-on-sim/real-cx5.txt, from ../shared/reference/real-cx5.md; issue #28).
check "ibv_devinfo -v in the guest shows what a real ConnectX-5 shows, row by row (known differences listed with their reasons)" "VF=${VF:-0} python3 - '$WORK/guest.log' '$HERE/real-cx5.txt' <<'PY'
import os, re, sys
ibv, flags, lists = {}, set(), {}
in_flags, in_list = False, None
for l in open(sys.argv[1], errors='replace'):
    if not l.startswith('GUEST-IBV: '): continue
    l = l[len('GUEST-IBV: '):].rstrip('\n')
    m = re.match(r'\s*([A-Za-z_ ]+?):\s+(\S.*)$', l)
    h = re.fullmatch(r'\s*([a-z_ ]+caps):\s*', l)
    if h:
        name = h.group(1).replace(' ', '_')
        in_list = name if name not in lists else None
        if in_list: lists[in_list] = set()
        in_flags = False
        continue
    if in_list and re.fullmatch(r'\s+[A-Z][A-Za-z0-9_ -]+', l):
        if l.strip() != 'NO SUPPORT': lists[in_list].add(l.strip())
        continue
    in_list = None
    if m:
        ibv.setdefault(m.group(1).strip(), m.group(2).strip())
        in_flags = m.group(1).strip() == 'device_cap_flags'
    elif in_flags and l.strip() and re.fullmatch(r'\s*[A-Z0-9_]+', l):
        flags.add(l.strip())
    else:
        in_flags = False
ok, bad, known = 0, [], []
for line in open(sys.argv[2]):
    line = line.strip()
    if not line or line.startswith('#'): continue
    differs = line.startswith('differs ')
    if differs: line = line[len('differs '):]
    if line.startswith('flag '):
        name, _, reason = line[5:].partition(' ')
        have = name in flags
        want, got = name, ('set' if have else 'clear')
        agree = have
    elif line.startswith('caps '):
        # A caps row: the list's entries, as a set (none: NO SUPPORT).
        body, _, reason = line[5:].partition('  ')
        key, _, rest = body.partition(' ')
        names = [n.strip() for n in rest.split('|')] if '|' in rest else rest.split()
        want, got = key, ' '.join(sorted(lists.get(key, {'?'})))
        agree = key in lists and lists[key] == set(names)
        line = key + ' ' + '|'.join(names)
    else:
        key, _, rest = line.partition(' ')
        rest = rest.strip()
        got = ibv.get(key)
        if differs:
            want, _, reason = re.split(r'\s{2,}', rest, maxsplit=1)[0], None, (re.split(r'\s{2,}', rest, maxsplit=1) + [''])[1]
        else:
            want, reason = rest, ''
        # A virtual function reports its own PCI device id (0x1018).
        if key == 'vendor_part_id' and os.environ.get('VF') == '1': want = '4120'
        agree = got == want
    if differs:
        known.append((line.split()[0] if not line.startswith('flag ') else 'flag ' + want, got, reason.strip()))
        if agree: bad.append(f'{line}: now agrees (drop the differs mark)')
    elif agree: ok += 1
    else: bad.append(f'{line}: the guest shows {got!r}')
print(f'linux-on-sim: ibv_devinfo vs a real ConnectX-5: {ok} rows agree, {len(known)} known differences, {len(bad)} unexpected')
for k, got, r in known: print(f'   differs: {k} (here {got}): {r}')
for b in bad: print('  ', b)
sys.exit(1 if bad or ok < 40 else 0)
PY"
check "no command Linux sent was unknown to the simulator (BAD_OP)" "! grep -q '\"syndrome\":\"0x5e020001\"' '$WORK/trace.jsonl'"
check "rmmod tore everything down: no failed command" "grep -aq 'GUEST-UNLOAD cmd_errors=0 ' '$WORK/guest.log'"
# The unload finding (docs/simulator.md): mlx5_core's "FW pages counter is -N after reclaiming
# all pages" came from a Linux 6.1 teardown window (page works reclaiming while the command EQ
# is destroyed), which the simulator's flood of page offers kept open; with one offer outstanding
# at a time no run showed it since.
check "rmmod left no kernel warning (no 'FW pages counter', no 'page not found')" "grep -aq 'GUEST-UNLOAD .* warnings=0' '$WORK/guest.log' && ! grep -aq 'page not found' '$WORK/guest.log'"
if ! grep -aq 'GUEST-UNLOAD .* warnings=0' "$WORK/guest.log"; then
  grep -a 'GUEST-WARN' "$WORK/guest.log" | grep -aE 'counter|not found|WARNING' | sort -u | head -4
fi
# The simulator's accounts at the end of each life of each NIC (a life ends at every reset —
# QEMU's at boot, vfio-pci's when it takes the NIC and at each open and close of the device —
# and when QEMU leaves): what the driver of that life left behind, before the reset wipes it.
if grep -aq '^GUEST-LINK' "$WORK/guest.log"; then
  check "ip link set up: mlx5e brought every netdev up with carrier (PORT_CHANGE, Ethernet SQ completions)" "[ \$(grep -ac '^GUEST-LINK eth[0-9]* operstate=up carrier=1' '$WORK/guest.log') = $NICS ]"
fi
if grep -aq '^GUEST-TRAFFIC:' "$WORK/guest.log"; then
  for t in rc uc ud srq; do
    check "ibv_${t}_pingpong (unmodified rdma-core) between mlx5_0 and mlx5_1: server and client pass" "grep -aq '^GUEST-TRAFFIC: $t server exit 0 client exit 0' '$WORK/guest.log'"
  done
  for t in ib_write_bw ib_read_lat ib_atomic_bw; do
    check "$t (unmodified perftest) between mlx5_0 and mlx5_1: server and client pass" "grep -aq '^GUEST-PERF: $t server exit 0 client exit 0' '$WORK/guest.log'"
  done
  check "their frames on the simulated wire are well-formed RoCE of the GID's type (GID ${GID:-1}: $([ "${GID:-1}" = 0 ] && echo 'RoCE v1' || echo 'RoCE v2'))" "python3 - '$WORK/wire.pcap' '${GID:-1}' <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
at, v1, v2, eth, bad = 24, 0, 0, 0, 0
while at + 16 <= len(d):
    n = struct.unpack_from('<I', d, at + 8)[0]
    f = d[at + 16:at + 16 + n]; at += 16 + n
    et = f[12:14]
    # RoCE v2: UDP to port 4791 over IPv4 (no options) or IPv6.
    l4 = 14 + 20 if et == b'\x08\x00' and f[23] == 17 else 14 + 40 if et == b'\x86\xdd' and f[20] == 17 else None
    if et == b'\x89\x15':
        v1 += 1; bad += f[14] >> 4 != 6 or f[20] != 0x1b
    elif l4 is not None and struct.unpack_from('>H', f, l4 + 2)[0] == 4791:
        v2 += 1
    else:
        eth += 1
print(f'linux-on-sim: the wire: {v1} RoCE v1 frames, {v2} RoCE v2 frames, {bad} malformed GRHs, {eth} other Ethernet frames')
want_v1 = sys.argv[2] == '0'
sys.exit(0 if bad == 0 and ((v1 > 0 and v2 == 0) if want_v1 else (v2 > 0 and v1 == 0)) else 1)
PY"
fi
if grep -aq '^GUEST-PING:' "$WORK/guest.log"; then
  # Issue #11 item 4: the two netdevs (eth1 in a namespace of its own) over the simulated
  # Ethernet: ARP, ICMP both ways, a TCP stream of 1 MiB (mlx5e's checksum offloads and TSO,
  # the simulator's flow tables, TIRs, RSS and RQs).
  check "ping eth0 -> eth1 over the simulated Ethernet (ARP, ICMP; Linux's mlx5e both ends)" "grep -aq '^GUEST-PING: ping eth0 -> eth1 exit 0' '$WORK/guest.log'"
  check "ping eth1 -> eth0" "grep -aq '^GUEST-PING: ping eth1 -> eth0 exit 0' '$WORK/guest.log'"
  check "a TCP stream of 1 MiB (busybox nc) arrives byte for byte" "grep -aqE '^GUEST-PING: tcp 1 MiB sent ([0-9a-f]{32}) received \\1 bytes 1048576' '$WORK/guest.log'"
  # Item 4 of issue #28: CQE compression on, Linux's mlx5e decompressing what the device wrote.
  check "with mlx5e's rx_cqe_compress on, the stream arrives byte for byte again and Linux decompressed sessions the device wrote (rx_cqe_compress_pkts > 0)" "grep -aqE '^GUEST-ZIP: tcp 1 MiB sent ([0-9a-f]{32}) received \\1 bytes 1048576' '$WORK/guest.log' && grep -aqE '^GUEST-ZIP-STATS eth1 .*rx_cqe_compress_pkts: [1-9]' '$WORK/guest.log'"
  check "and a ping with compression on" "grep -aq '^GUEST-ZIP: ping eth1 -> eth0 exit 0' '$WORK/guest.log'"
  # Enhanced multi-packet send: mlx5e's skb_tx_mpwqe is on by default where the device offers it.
  check "mlx5e sends with enhanced multi-packet WQEs (skb_tx_mpwqe on, tx_mpwqe_pkts > 0) and the traffic above went through them" "grep -aqE '^GUEST-ZIP: eth0 skb_tx_mpwqe ?: on' '$WORK/guest.log' && grep -aqE '^GUEST-ZIP-STATS eth[01] .*tx_mpwqe_pkts: [1-9]' '$WORK/guest.log'"
fi
if [ "$PYVERBS" = 1 ]; then
  # rdma-core's pyverbs suite (pyv_runner.py's PYV-RESULT lines) against the skips
  # pyverbs-expected.txt allows, each with its reason. `pyv counts` only prints.
  pyv() { python3 - "$WORK/guest.log" "$HERE/pyverbs-expected.txt" "$1" <<'PY'
import fnmatch, re, sys
log, listing, what = sys.argv[1:4]
res, started, summary, aborted, exit_line = {}, [], None, False, None
player = {}   # what the RDMA CM tests' processes printed of their failure ("Player active got: ...")
for l in open(log, errors='replace'):
    m = re.search(r'PYV-RESULT (ok|fail|error|skip|xfail|xpass) (\S+) ([0-9.]+) (.*)$', l)
    if m: res[m.group(2)] = (m.group(1), float(m.group(3)), m.group(4).strip())
    m = re.search(r'PYV-START (\S+)', l)
    if m: started.append(m.group(1))
    m = re.match(r'Player \w+ got: (.*)', l)
    if m and started: player.setdefault(started[-1], m.group(1).strip())
    m = re.search(r'PYV-SUMMARY (\d+) tests: (\d+) ok, (\d+) failed, (\d+) errors, (\d+) skipped', l)
    if m: summary = tuple(int(x) for x in m.groups())
    aborted |= 'PYV-ABORT' in l
    m = re.match(r'GUEST-PYV: exit (\d+)', l)
    if m: exit_line = int(m.group(1))
entries = []   # (pattern, reason) in file order
for l in open(listing):
    l = l.strip()
    if not l or l.startswith('#'): continue
    pat, reason = (l.split(None, 1) + [''])[:2]
    entries.append((pat, reason.strip()))
# `error:<pattern>` entries: tests whose error has a known cause outside the simulator's
# reach this issue (listed, with the cause, in every run; any other error fails the check).
err_entries = [(p[len('error:'):], r) for p, r in entries if p.startswith('error:')]
entries = [(p, r) for p, r in entries if not p.startswith('error:')]
def matches(pat, name):
    if any(c in pat for c in '*?['): return fnmatch.fnmatchcase(name, pat)
    return name == pat or name.startswith(pat + '.')
def entry(name):
    return next((e for e in entries if matches(e[0], name)), None)
by = lambda *st: sorted(n for n, r in res.items() if r[0] in st)
ok, failed, errors, skipped = by('ok', 'xfail'), by('fail', 'xpass'), by('error'), by('skip')
err_entry = lambda name: next((e for e in err_entries if matches(e[0], name)), None)
known_errors = [n for n in errors if err_entry(n)]
expected = [n for n in skipped if entry(n)]
unexpected = [n for n in skipped if not entry(n)]
if what == 'counts':
    print(f'linux-on-sim: pyverbs: {len(res)} tests, {len(ok)} ok, {len(failed)} failed, {len(errors)} errors, '
          f'{len(skipped)} skipped ({len(expected)} expected skips)')
    groups = {}
    for n in expected: groups.setdefault(entry(n)[1], []).append(n)
    print('linux-on-sim: pyverbs: skips by the reason pyverbs-expected.txt gives:')
    for reason, names in sorted(groups.items(), key=lambda g: -len(g[1])): print(f'   {len(names):3} {reason}')
    if known_errors:
        print(f'linux-on-sim: pyverbs: {len(known_errors)} errors of a known cause (pyverbs-expected.txt, error: entries):')
        for n in known_errors: print(f'   {n}: {err_entry(n)[1]}')
    stale = [e for e in entries if not any(matches(e[0], n) for n in skipped)]
    if stale:
        print(f'linux-on-sim: pyverbs: {len(stale)} entries of pyverbs-expected.txt skipped nothing this run (information):')
        for pat, reason in stale:
            now = sorted({res[n][0] for n in res if matches(pat, n)})
            print(f'   {pat} ({"/".join(now) or "no such test"}): {reason}')
    sys.exit(0)
if what == 'ran':
    mine = (len(res), len(ok), len(failed), len(errors), len(skipped))
    lost = [n for n in started if n not in res]
    print(f'linux-on-sim: pyverbs: summary {summary}, result lines {mine}, guest exit {exit_line}'
          + (', the runner aborted on a hung test' if aborted else ''))
    for n in lost: print(f'   started, no result: {n}')
    sys.exit(0 if summary == mine and not lost and not aborted and exit_line is not None and res else 1)
bad = {'fail': failed, 'error': [n for n in errors if not err_entry(n)], 'skips': unexpected}[what]
def short(t):
    if len(t) <= 200: return t
    dc = re.search(r'DC type\s*:\s*(\w+)', t)   # an mlx5dv QP's attributes: say which DC type
    return t[:90] + (f' ... DC type: {dc.group(1)}' if dc else '') + ' ... ' + t[-60:]
for n in bad:
    print(f'   {n}: {short(res[n][2])}' + (f' [{short(player[n])}]' if n in player else ''))
sys.exit(1 if bad else 0)
PY
  }
  pyv counts
  check "pyverbs: rdma-core's suite ran in the guest to its summary (each test a result line, none hung)" "pyv ran"
  check "pyverbs: no test failed" "pyv fail"
  check "pyverbs: no test ended in an error (but those pyverbs-expected.txt lists with their known cause)" "pyv error"
  check "pyverbs: every test that skipped is one tests/linux-on-sim/pyverbs-expected.txt allows to skip" "pyv skips"
  check "pyverbs: the suite made the kernel warn nowhere (WARNING, BUG, Call Trace)" "grep -aq '^GUEST-PYV-KERNEL cmd_errors=[0-9]* warnings=0' '$WORK/guest.log'"
fi
if grep -aq '^GUEST-TRAFFIC: rc server exit 0' "$WORK/guest.log"; then
  # Issue #11 item 6: rdma-core's commands of this run (the PD-to-PD blocks with a QP on NIC 0:
  # ibv_rc_pingpong's, then ibv_ud_pingpong's, before one per perftest run), compared field by
  # field with this driver's for the same verbs requests (tools/tests/differential.rs,
  # docs/fields.md).
  PERF_RUNS=$(grep -ac '^GUEST-PERF: .* server exit' "$WORK/guest.log" || true)
  PINGPONGS=$(sed -n 's/^GUEST-TRAFFIC: \([a-z]*\) server exit.*/\1/p' "$WORK/guest.log" | tr '\n' ' ')
  python3 - "$WORK/trace.jsonl" "$WORK/rdma-core-pingpong.jsonl" "$PERF_RUNS" "$PINGPONGS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
perf = int(sys.argv[3] or 0)
tags = sys.argv[4].split()
blocks, cur = [], None
for r in rows:
    if r['name'] == 'TEARDOWN_HCA': break  # Linux's life ends; mlx5ctl's (VFIO=1) follow
    if r['name'] == 'ALLOC_PD': cur = [r]
    elif cur is not None:
        cur.append(r)
        if r['name'] == 'DEALLOC_PD':
            if any(x['name'] == 'CREATE_QP' for x in cur): blocks.append(cur)
            cur = None
keep = ('CREATE_MKEY', 'CREATE_CQ', 'CREATE_SRQ', 'CREATE_RMP', 'CREATE_QP', 'RST2INIT_QP', 'INIT2RTR_QP', 'RTR2RTS_QP')
with open(sys.argv[2], 'w') as f:
    for tag, b in zip(tags, blocks[len(blocks) - perf - len(tags):len(blocks) - perf]):
        for r in b:
            if r['name'] in keep and r['status'] == 0:
                f.write(json.dumps({'scenario': tag, 'name': r['name'], 'opcode': r['opcode'], 'op_mod': r['op_mod'], 'input': r['input']}) + '\n')
PY
  if [ "${VF:-0}" = 1 ]; then
    # On VFs: this driver on a VF too, and the VF's table of differences as well (mlx5_ib has
    # no MR cache there: keys made free with no page list, enabled by UMR).
    check "differential on VFs: this driver programs CREATE_MKEY/CQ/RMP/QP and every transition (RC, UC, UD, SRQ) as rdma-core did on these VFs (differences only as docs/fields.md lists them, its VF table too)" "(cd '$ROOT' && MLX5_DIFF_VF=1 MLX5_DIFF_FIXTURE='$WORK/rdma-core-pingpong.jsonl' cargo test --locked -q -p mlx5-tools --test differential 2>&1 | tail -3 | grep -q 'test result: ok')"
  else
  check "differential: this driver programs CREATE_MKEY/CQ/RMP/QP and every transition (RC, UC, UD, SRQ) as rdma-core did in this run (differences only as docs/fields.md lists them)" "(cd '$ROOT' && MLX5_DIFF_FIXTURE='$WORK/rdma-core-pingpong.jsonl' cargo test --locked -q -p mlx5-tools --test differential 2>&1 | tail -3 | grep -q 'test result: ok')"
  fi
fi
IOMMU_IOVA=$(sed -n 's/^GUEST-VFIO-IOMMU: iommu-check: .*command queue at IOVA \(0x[0-9a-f]*\).*/\1/p' "$WORK/guest.log" | head -1)
lives() { python3 - "$WORK/server.log" "$1" "${IOMMU_IOVA:-none}" <<'PY'
import re, sys
rows = [re.match(r'mlx5ctl sim: NIC #(\d+) life (\d+) \(([^)]*)\): accounts: state (\w+), pages held (\d+), live objects (\{.*?\}), DMA faults (\{.*?\}); DMA maps (\d+) made.*?; first fault of each kind (\{.*?\})(?:; page requests .*)?$', l)
        for l in open(sys.argv[1])]
rows = [r.groups() for r in rows if r]
what = sys.argv[2]
if what == 'clean':
    bad = [r for r in rows if (r[3], r[4], r[5]) != ('Disabled', '0', '{}')]
    print(f'linux-on-sim: {len(rows)} lives of the NICs, {len(bad)} left something behind'); [print('  ', *b) for b in bad]
    sys.exit(1 if bad or not rows else 0)
if what == 'faults':
    # mlx5_ib's write-combining self-test makes each BlueFlame copy differ from its ring on
    # purpose (CQ_UPDATE only in the copy): the one kind of DMA fault allowed, in Linux's life.
    nics = {r[0] for r in rows}
    bf = [r for r in rows if r[6] != '{}' and re.fullmatch(r'\{"BlueFlameMismatch": \d+\}', r[6])]
    # mlx5ctl iommu-check's read of the IOVA it reserved and never mapped: expected, once.
    iommu = [r for r in rows if re.fullmatch(r'\{"Read": \d+\}', r[6]) and f'"Read": "{sys.argv[3]} ' in r[8]]
    other = [r for r in rows if r[6] != '{}' and r not in bf and r not in iommu]
    print(f'linux-on-sim: DMA faults: BlueFlame copies in {len(bf)} lives (Linux on {len(nics)} NICs), iommu-check\'s read in {len(iommu)}, others in {len(other)}'); [print('  ', *o) for o in other]
    sys.exit(1 if other or len(bf) > len(nics) or len(iommu) > 1 else 0)
if what == 'iommu':
    hit = [r for r in rows if re.fullmatch(r'\{"Read": \d+\}', r[6]) and f'"Read": "{sys.argv[3]} ' in r[8]]
    for r in hit: print(f'linux-on-sim: NIC #{r[0]} life {r[1]}: DMA faults {r[6]}, first {r[8]}')
    sys.exit(0 if len(hit) == 1 and hit[0][3:6] == ('Disabled', '0', '{}') else 1)
if what == 'vfio':
    # Lives after Linux's in which the guest's vfio_iommu_type1 mapped memory for mlx5ctl.
    after = [r for r in rows if int(r[1]) >= 2 and int(r[7]) > 0]
    print(f'linux-on-sim: {len(after)} lives of mlx5ctl through vfio-pci, {sum(int(r[7]) for r in after)} DMA maps the guest IOMMU made for them')
    sys.exit(0 if after else 1)
PY
}
check "every life of every NIC ended with no page and no object held (Linux's, then each mlx5ctl run's)" "lives clean"
check "no DMA fault but the BlueFlame copies of Linux's write-combining test (and iommu-check's own read)" "lives faults"
if grep -aq '^GUEST-VFIO: bound' "$WORK/guest.log"; then
  check "the guest bound every simulated NIC to vfio-pci behind its IOMMU" "[ \$(grep -ac '^GUEST-VFIO: bound .* driver=vfio-pci iommu_group=[0-9]' '$WORK/guest.log') = $NICS ]"
  check "mlx5ctl devinfo --vfio in the guest (this driver through a real kernel's VFIO) shows what mlx5ctl devinfo shows on the simulator directly" "VF_MAC=${VF_MAC:-} python3 - '$WORK/guest.log' '$WORK/devinfo.json' <<'PY'
import json, os, sys
lines = [l[len('GUEST-VFIO-DEVINFO: '):] for l in open(sys.argv[1], errors='replace') if l.startswith('GUEST-VFIO-DEVINFO: ')]
guest = json.loads(''.join(lines)) if lines else {}
host = json.load(open(sys.argv[2]))
skip = {'hca_id', 'node_guid', 'sys_image_guid', 'bring_up'}
keys = [k for k in host if k not in skip]
# The port's MAC and GID follow each NIC's MAC (mlx5ctl sim gives NIC 0 02:c5:5a:00:01:00):
# those are checked against it, the rest of the port as is.
def port(p): return {k: v for k, v in p.items() if k not in ('mac', 'gids')}
for d in (host, guest):
    d['ports'] = [port(p) for p in d.get('ports', [])]
gp = json.loads(''.join(lines)).get('ports', [{}])[0] if lines else {}
want_gid = 'fe80:0000:0000:0000:00c5:5aff:fe00:0100'
bad = [(k, host[k], guest.get(k)) for k in keys if host[k] != guest.get(k)]
want_mac = '02:c5:5a:00:01:00'
if os.environ.get('VF_MAC') == 'unset':
    # A VF with no MAC from the hypervisor: the driver's random locally administered unicast
    # MAC, its link-local GID the MAC's EUI-64.
    m = gp.get('mac') or '00:00:00:00:00:00'
    b = [int(x, 16) for x in m.split(':')]
    if b[0] & 3 == 2:
        want_mac = m
        e = [b[0] ^ 2, b[1], b[2], 0xff, 0xfe, b[3], b[4], b[5]]
        want_gid = 'fe80:0000:0000:0000:' + ':'.join(f'{e[i]:02x}{e[i+1]:02x}' for i in range(0, 8, 2))
if gp.get('mac') != want_mac or [g.get('gid') for g in gp.get('gids', [])][:1] != [want_gid]:
    bad.append(('port mac/gid', want_mac + ' ' + want_gid, gp.get('mac'), gp.get('gids')))
print(f'linux-on-sim: mlx5ctl devinfo through the guest VFIO vs on the simulator: {len(keys)} fields compared, {len(bad)} differ')
for b in bad: print('  ', *[str(x)[:120] for x in b])
sys.exit(1 if bad or not guest else 0)
PY"
  for t in $(echo "${DEMO:-rc,uc,ud}" | tr ',' ' '); do
    check "mlx5ctl demo --type $t --vfio A --vfio B through the guest's vfio-pci" "grep -aq '^GUEST-VFIO: demo $t exit 0' '$WORK/guest.log'"
  done
  check "the VFIO example (hw/vfio/examples/vfio_rc_ping.rs): 200 RC round trips between the NICs through the guest's vfio-pci, every message checked" "grep -aq '^GUEST-VFIO-EXAMPLE: vfio_rc_ping: 200 round trips, every message checked' '$WORK/guest.log' && grep -aq '^GUEST-VFIO: example exit 0' '$WORK/guest.log'"
  if [ "${NICS:-2}" -ge 2 ]; then
    check "mlx5ctl net --vfio A / --vfio B through the guest's vfio-pci: Ethernet ports under smoltcp ping each other and 256 KiB of TCP come back byte for byte" "grep -aq '^GUEST-VFIO: net exit 0 0' '$WORK/guest.log'"
  fi
  check "mlx5ctl's DMA went through maps the guest's IOMMU made" "lives vfio"
  check "a DMA outside the guest IOMMU's maps (mlx5ctl iommu-check: the command queue at a reserved, never-mapped IOVA) reached nothing and was recorded as a read fault at that IOVA" "grep -aq '^GUEST-VFIO: iommu-check exit 0' '$WORK/guest.log' && lives iommu"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
