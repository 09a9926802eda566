#!/usr/bin/env bash
# The bootable unikernel (tools/unikernel, `mlx5-unikernel`: this driver with no OS, booted by
# QEMU -kernel through PVH) on simulated ConnectX-5s served by `mlx5ctl sim --vfio-user` (QEMU
# 10.2 with the vfio-user client, from ../shared/qemu). Prints `PASS name` / `FAIL name: why`,
# each CHECK line of the image (they count too), its FIGURE lines, and `N passed, N failed`.
#
#   usage: tests/unikernel-qemu/run.sh
#
# demo:  the release image (--locked) links no allocator (nm), its size is a figure; it boots
#        with two simulated NICs on one fabric and runs every transport between them. Passes
#        on QEMU's isa-debug-exit status 33, `unikernel: N passed, 0 failed` (N > 0, no CHECK
#        FAIL) and the simulator's accounts at the end of every life of both NICs: no page, no
#        object, no DMA fault left (the criteria of tests/linux-on-sim).
# linux: (LINUX=1, the default) two QEMUs on one `mlx5ctl sim`: the unikernel on NIC A
#        (`mlx5.mode=peer`, 198.18.0.1) and a Debian cloud kernel (Linux's mlx5_core/mlx5_ib,
#        rdma-core's ibverbs-utils, busybox) on NIC B, 198.18.0.2, whose /init
#        (linux-guest-init.sh) pings the unikernel, runs ibv_rc_pingpong as client of it
#        (port 18515) and as server for it (18516), sends it 1 MiB over TCP (its echo on 5001)
#        and checks what came back; each `GUEST PASS|FAIL` line counts. SKIPPED when the kernel
#        or rdma-core's packages cannot be had.
#
# Caches the kernel and busybox with tests/vfio-qemu (target/vfio-qemu), rdma-core's packages
# with tests/linux-on-sim (target/linux-on-sim/rdma-debs), its logs under target/unikernel-qemu.
# Exit status: 0 when every check passed, 1 otherwise, 2 if it cannot run here (reason printed).
# Knobs: TIMEOUT (the demo's QEMU, default 300 s), UK_TIMEOUT and LINUX_TIMEOUT (the linux
# phase's two QEMUs, default 400 s each), LINUX (0: demo only), PEER (0: the linux phase boots
# the Linux guest alone, NIC A served to nobody — to test the guest side), PEER_WAIT (how long
# each guest step waits for the unikernel, default 120 s), SHARED (default <repo>/../shared), VF
# (1: the NICs are ConnectX-5 virtual functions with no MAC from the hypervisor — the image
# brings them up as VFs, each with a random MAC).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
WORK=$ROOT/target/unikernel-qemu
KCACHE_DIR=$ROOT/target/vfio-qemu
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
TIMEOUT=${TIMEOUT:-300}; UK_TIMEOUT=${UK_TIMEOUT:-400}; LINUX_TIMEOUT=${LINUX_TIMEOUT:-400}
mkdir -p "$WORK" "$KCACHE_DIR"
cannot() { echo "unikernel-qemu: CANNOT RUN here: $*" >&2; exit 2; }
say() { echo "unikernel-qemu: $*"; }
PASSED=0; FAILED=0
pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
# check NAME WHY COMMAND...: PASS NAME when COMMAND succeeds, else FAIL NAME: WHY.
check() { local n=$1 w=$2; shift 2; if "$@"; then pass "$n"; else fail "$n" "$w"; fi; }
SIM_PID=""; UK_PID=""; LX_PID=""; STAGE=""
cleanup() {
  for p in $UK_PID $LX_PID $SIM_PID; do kill "$p" 2>/dev/null || true; done
  [ -z "$STAGE" ] || rm -rf "$STAGE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- QEMU with the vfio-user client -------------------------------------------------------
[ -f "$SHARED/qemu/get-qemu.sh" ] || cannot "no $SHARED/qemu/get-qemu.sh"
QEMU=$(bash "$SHARED/qemu/get-qemu.sh" "$WORK/qemu" | tail -1) || cannot "get-qemu.sh failed"
say "$("$QEMU" --version | head -1)"
QARGS=(-L /usr/share/qemu -L /usr/share/seabios -machine "q35,accel=tcg,memory-backend=mem"
       -object "memory-backend-memfd,id=mem,size=1G,share=on" -cpu max -smp 1 -m 1G
       -nographic -nodefaults -monitor none -no-reboot)
nic() { echo "{\"driver\":\"vfio-user-pci\",\"socket\":{\"type\":\"unix\",\"path\":\"$1\"}}"; }
UKDEV=(-device "isa-debug-exit,iobase=0xf4,iosize=0x04")
status() {
  case $1 in 33) echo "33 (pass)" ;; 35) echo "35 (a check failed)" ;; 37) echo "37 (panic)" ;;
    39) echo "39 (CPU exception)" ;; 0) echo "0 (a silent triple fault)" ;;
    124|137) echo "$1 (timed out)" ;; *) echo "$1" ;; esac
}
# sim PREFIX: `mlx5ctl sim` serving PREFIX-a.sock and PREFIX-b.sock (one fabric) in the background.
sim() {
  rm -f "$1"-[ab].sock
  RUST_LOG=${RUST_LOG:-warn} "$CTL" sim --vfio-user "$1-a.sock" --vfio-user "$1-b.sock" \
    $([ "${VF:-0}" = 1 ] && echo --vf --vf-mac-unset) --trace "$1-trace.jsonl" --pcap "$1-wire.pcap" > "$1-sim.log" 2>&1 &
  SIM_PID=$!
  for s in "$1-a.sock" "$1-b.sock"; do for _ in $(seq 100); do [ -S "$s" ] && break; sleep 0.1; done; done
}
# sim_end PREFIX: waits (10 s at most) for the simulator to leave once its clients have gone.
sim_end() {
  for _ in $(seq 100); do kill -0 "$SIM_PID" 2>/dev/null || break; sleep 0.1; done
  kill "$SIM_PID" 2>/dev/null && echo "mlx5ctl sim: still serving after its clients left: stopped" >> "$1-sim.log"
  wait "$SIM_PID" 2>/dev/null || true; SIM_PID=""
}
# lives LOG LINUX_NIC NICS: every life of the NICs ended Disabled with no page, no object and no
# DMA fault held, the client of each of NICS (e.g. "0 1") came and went; as in tests/linux-on-sim,
# mlx5_ib's write-combining self-test may leave BlueFlame mismatches in one life of the Linux NIC.
lives() { python3 - "$1" "$2" "$3" <<'PY'
import re, sys
rows = [re.match(r'mlx5ctl sim: NIC #(\d+) life (\d+) \(([^)]*)\): accounts: state (\w+), pages held (\d+), live objects (\{.*?\}), DMA faults (\{.*?\});', l)
        for l in open(sys.argv[1], errors='replace')]
rows = [r.groups() for r in rows if r]
bad = [r for r in rows if (r[3], r[4], r[5]) != ('Disabled', '0', '{}')]
bf = [r for r in rows if r[0] == sys.argv[2] and re.fullmatch(r'\{"BlueFlameMismatch": \d+\}', r[6])]
faults = [r for r in rows if r[6] != '{}' and r not in bf]
gone = sorted({r[0] for r in rows if r[2] == 'client gone'})
print(f'unikernel-qemu: {len(rows)} lives of the NICs, {len(bad)} left something behind, {len(faults)} with DMA faults'
      + (f', BlueFlame copies in {len(bf)} of Linux\'s' if bf else '') + f'; clients gone from NICs {gone}')
for r in bad + faults: print('  ', *r)
sys.exit(0 if rows and not bad and not faults and len(bf) <= 1 and gone == sys.argv[3].split() else 1)
PY
}
# verdict SERIAL: the image's tally says N passed (N > 0, as many as its CHECK ok lines), 0 failed.
verdict() {
  local v; v=$(grep -aoE 'unikernel: [0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
  [ -n "$v" ] && ! grep -aq 'CHECK FAIL' "$1" && [[ $v =~ ^unikernel:\ ([1-9][0-9]*)\ passed,\ 0\ failed$ ]] &&
    [ "${BASH_REMATCH[1]}" = "$(grep -ac 'CHECK ok ' "$1")" ]
}
# checks SERIAL: prints the image's CHECK and FIGURE lines; each CHECK counts in the tally.
checks() {
  grep -aoE '(\[ *[0-9.]+\] )?CHECK (ok|FAIL) .*|FIGURE .*' "$1" | sed 's/^/  /' || true
  PASSED=$((PASSED + $(grep -ac 'CHECK ok ' "$1" || true)))
  FAILED=$((FAILED + $(grep -ac 'CHECK FAIL ' "$1" || true)))
}
dump() { echo "--- $1"; sed "s/^/$2| /" "$1"; echo "--- end of $1"; }

# === demo: the image alone on two simulated NICs ===========================================
T=$SECONDS
cd "$ROOT"
if ! cargo build --release --locked -q -p mlx5-unikernel-example --target x86_64-unknown-none --bin mlx5-unikernel ||
   ! cargo build --release --locked -q -p mlx5-tools --bin mlx5ctl; then
  fail demo-build "cargo build of the image or of mlx5ctl failed"; echo "$PASSED passed, $FAILED failed"; exit 1
fi
CTL=$TGT/release/mlx5ctl
IMG=$TGT/x86_64-unknown-none/release/mlx5-unikernel
nm "$IMG" > "$WORK/image.nm" 2>&1 || true
ALLOC=$(grep -oE '\b(__rust_alloc|__rg_alloc|__rust_alloc_zeroed|__rdl_alloc|__rust_realloc)\b' "$WORK/image.nm" | sort -u | tr '\n' ' ' || true)
check demo-no-allocator "nm found ${ALLOC:-no symbols at all}" \
  test -z "$ALLOC" -a "$(grep -c ' [TtDdBbRr] ' "$WORK/image.nm")" -gt 0
strip -o "$WORK/image.stripped" "$IMG"
say "FIGURE image: $(stat -c %s "$IMG") bytes, $(stat -c %s "$WORK/image.stripped") bytes stripped"
P=$WORK/demo
sim "$P"
say "demo: booting the image with two simulated ConnectX-5s (TCG)"
set +e
timeout --kill-after=5 "$TIMEOUT" "$QEMU" "${QARGS[@]}" -device "$(nic "$P-a.sock")" -device "$(nic "$P-b.sock")" \
  "${UKDEV[@]}" -kernel "$IMG" -serial "file:$P-serial.log" </dev/null > "$P-qemu.log" 2>&1 &
UK_PID=$!
wait "$UK_PID"
QRC=$?
set -e
UK_PID=""
sim_end "$P"
tr -d '\r' < "$P-serial.log" > "$P-serial.txt"
F0=$FAILED
checks "$P-serial.txt"
check demo-exit "QEMU exit status $(status $QRC), not 33" test "$QRC" = 33
check demo-verdict "no 'unikernel: N passed, 0 failed' with N > 0 matching its CHECK ok lines" verdict "$P-serial.txt"
check demo-accounts "the simulator's accounts are not clean ($P-sim.log)" lives "$P-sim.log" none "0 1"
if [ "${VF:-0}" = 1 ]; then
  check demo-vf "the image did not bring both NICs up as VFs with random MACs" \
    test "$(grep -c 'CHECK ok device-up: .* (a VF; no MAC assigned: a random one)' "$P-serial.txt")" = 2
fi
if [ "$FAILED" != "$F0" ]; then dump "$P-serial.txt" serial; dump "$P-qemu.log" qemu; dump "$P-sim.log" sim; fi
say "demo: $((SECONDS - T)) s"

# === linux: the unikernel and Linux's mlx5 drivers on two NICs of one fabric ==================
linux_prep() {
  KDEB=$(cat "$KCACHE_DIR/resolved-linux-image-cloud-amd64" 2>/dev/null || true)
  if [ -z "$KDEB" ] || [ ! -d "$KCACHE_DIR/$KDEB/boot" ] || [ ! -x "$KCACHE_DIR/busybox/bin/busybox" ]; then
    command -v apt-get >/dev/null || { WHY="no apt-get to download a kernel"; return 1; }
    KDEB=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2 }' | sort -V | tail -1)
    [ -n "$KDEB" ] || { WHY="apt cannot resolve linux-image-cloud-amd64"; return 1; }
    say "downloading $KDEB and busybox-static"
    rm -rf "$KCACHE_DIR/dl" && mkdir -p "$KCACHE_DIR/dl"
    (cd "$KCACHE_DIR/dl" && apt-get download -qq -o APT::Sandbox::User=root "$KDEB" busybox-static) ||
      { WHY="could not download $KDEB"; return 1; }
    rm -rf "$KCACHE_DIR/${KDEB:?}" "$KCACHE_DIR/busybox"
    dpkg-deb -x "$KCACHE_DIR"/dl/linux-image-*.deb "$KCACHE_DIR/$KDEB"
    dpkg-deb -x "$KCACHE_DIR"/dl/busybox-static*.deb "$KCACHE_DIR/busybox"
    echo "$KDEB" > "$KCACHE_DIR/resolved-linux-image-cloud-amd64"
    rm -rf "$KCACHE_DIR/dl"
  fi
  KROOT=$KCACHE_DIR/$KDEB
  KVER=$(basename "$(find "$KROOT/lib/modules" -mindepth 1 -maxdepth 1 | head -1)")
  # rdma-core's user space, the same packages and cache as tests/linux-on-sim's.
  RDEBS=$ROOT/target/linux-on-sim/rdma-debs
  if [ ! -x "$RDEBS/root/usr/bin/ibv_devinfo" ] || [ ! -x "$RDEBS/root/usr/bin/ib_write_bw" ]; then
    command -v apt-get >/dev/null || { WHY="no apt-get to download rdma-core's packages"; return 1; }
    rm -rf "$RDEBS" && mkdir -p "$RDEBS/root"
    (cd "$RDEBS" && apt-get download -qq -o APT::Sandbox::User=root \
        ibverbs-utils libibverbs1 ibverbs-providers libnl-3-200 libnl-route-3-200 \
        perftest librdmacm1 libibumad3 libpci3) || { WHY="could not download rdma-core's packages"; return 1; }
    for d in "$RDEBS"/*.deb; do dpkg-deb -x "$d" "$RDEBS/root"; done
  fi
  command -v cpio >/dev/null || { WHY="no cpio to pack the initramfs"; return 1; }
  STAGE=$(mktemp -d)
  mkdir -p "$STAGE"/{bin,dev,proc,sys,tmp,lib/modules,lib/x86_64-linux-gnu,lib64}
  cp "$KCACHE_DIR/busybox/bin/busybox" "$STAGE/bin/"
  cp "$HERE/linux-guest-init.sh" "$STAGE/init"; chmod 755 "$STAGE/init"
  for m in pci-hyperv-intf mlxfw mlx5_core ib_core ib_uverbs mlx5_ib; do
    f=$(find "$KROOT/lib/modules/$KVER/kernel" -name "$m.ko" | head -1)
    [ -n "$f" ] || { WHY="module $m not in $KDEB"; return 1; }
    cp "$f" "$STAGE/lib/modules/$m.ko"; echo "$m" >> "$STAGE/lib/modules/order"
  done
  cp -a "$RDEBS/root/." "$STAGE/"
  for l in $(LD_LIBRARY_PATH="$RDEBS/root/usr/lib/x86_64-linux-gnu" ldd "$RDEBS/root/usr/bin/ibv_devinfo" \
             "$RDEBS/root/usr/bin/ibv_rc_pingpong" | awk '$3 ~ /^\// && $3 !~ /rdma-debs/ { print $3 }' | sort -u); do
    cp -L "$l" "$STAGE/lib/x86_64-linux-gnu/"
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$STAGE/lib64/"
  (cd "$STAGE" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.gz"
}
GUEST_STEPS="netdev carrier rdma-port ping rc_pingpong-client rc_pingpong-server tcp-echo unload"
if [ "${LINUX:-1}" = 1 ]; then
  T=$SECONDS
  WHY=""
  if ! linux_prep; then
    say "linux: SKIPPED: ${WHY:-the guest could not be prepared}"
  else
    P=$WORK/linux
    rm -f "$P"-*.log "$P"-*.txt
    sim "$P"
    say "linux: booting the unikernel on NIC A and $KVER on NIC B (TCG)"
    if [ "${PEER:-1}" = 1 ]; then
      timeout --kill-after=5 "$UK_TIMEOUT" "$QEMU" "${QARGS[@]}" -device "$(nic "$P-a.sock")" "${UKDEV[@]}" \
        -kernel "$IMG" -append "mlx5.mode=peer mlx5.ip=198.18.0.1/24 mlx5.peer=198.18.0.2" \
        -serial "file:$P-uk-serial.log" </dev/null > "$P-uk-qemu.log" 2>&1 &
      UK_PID=$!
    fi
    timeout --kill-after=5 "$LINUX_TIMEOUT" "$QEMU" "${QARGS[@]}" -device "$(nic "$P-b.sock")" \
      -kernel "$KROOT/boot/vmlinuz-$KVER" -initrd "$WORK/initramfs.gz" \
      -append "console=ttyS0 loglevel=3 panic=-1 ukpeer.wait=${PEER_WAIT:-120}" \
      -serial "file:$P-linux-serial.log" </dev/null > "$P-linux-qemu.log" 2>&1 &
    LX_PID=$!
    # Each side needs the other: once one QEMU has ended, the other gets 60 s more, not 400.
    URC=none; LRC=none; GRACE=0
    until [ "$LRC" != none ] && { [ -z "$UK_PID" ] || [ "$URC" != none ]; }; do
      sleep 1
      if [ -n "$UK_PID" ] && [ "$URC" = none ] && ! kill -0 "$UK_PID" 2>/dev/null; then
        wait "$UK_PID" && URC=0 || URC=$?
        say "linux: the unikernel's QEMU ended at $((SECONDS - T)) s: $(status "$URC")"
      fi
      if [ "$LRC" = none ] && ! kill -0 "$LX_PID" 2>/dev/null; then
        wait "$LX_PID" && LRC=0 || LRC=$?
        say "linux: the Linux guest's QEMU ended at $((SECONDS - T)) s: status $LRC"
      fi
      if [ -n "$UK_PID" ] && { [ "$URC" != none ] || [ "$LRC" != none ]; } && [ $((GRACE += 1)) -eq 60 ]; then
        say "linux: the other QEMU still runs 60 s after the first ended: stopped"
        kill "$UK_PID" "$LX_PID" 2>/dev/null || true
      fi
    done
    UK_PID=""; LX_PID=""
    sim_end "$P"
    touch "$P-uk-serial.log" "$P-linux-serial.log"
    tr -d '\r' < "$P-uk-serial.log" > "$P-uk-serial.txt"
    tr -d '\r' < "$P-linux-serial.log" > "$P-linux-serial.txt"
    F0=$FAILED
    grep -aE '^GUEST' "$P-linux-serial.txt" | grep -avE '^GUEST (PASS|FAIL) ' | sed 's/^/  /' || true
    for s in $GUEST_STEPS; do
      l=$(grep -aE "^GUEST (PASS|FAIL) $s(:|$)" "$P-linux-serial.txt" | head -1 || true)
      case $l in
        "GUEST PASS "*) pass "linux-guest ${l#GUEST PASS }" ;;
        "GUEST FAIL "*) l=${l#"GUEST FAIL $s"}; fail "linux-guest $s" "${l#: }" ;;
        *) fail "linux-guest $s" "no result from the guest" ;;
      esac
    done
    check linux-guest-done "the guest did not reach GUEST DONE (QEMU status $LRC)" grep -aq '^GUEST DONE' "$P-linux-serial.txt"
    if [ "${PEER:-1}" = 1 ]; then
      checks "$P-uk-serial.txt"
      check linux-unikernel-exit "the unikernel's QEMU exit status $(status "$URC"), not 33" test "$URC" = 33
      check linux-unikernel-verdict "no 'unikernel: N passed, 0 failed' with N > 0 matching its CHECK ok lines" verdict "$P-uk-serial.txt"
    fi
    check linux-accounts "the simulator's accounts are not clean ($P-sim.log)" lives "$P-sim.log" 1 "$([ "${PEER:-1}" = 1 ] && echo 0) 1"
    if [ "$FAILED" != "$F0" ]; then
      [ "${PEER:-1}" = 1 ] && { dump "$P-uk-serial.txt" unikernel; dump "$P-uk-qemu.log" uk-qemu; }
      dump "$P-linux-serial.txt" linux; dump "$P-linux-qemu.log" linux-qemu; dump "$P-sim.log" sim
    fi
    say "linux: $((SECONDS - T)) s"
  fi
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
