#!/usr/bin/env bash
# A real RoCE peer on the simulated wire (issue #12): a QEMU guest runs Linux's soft-RoCE
# (rdma_rxe, Debian's generic kernel) on an e1000 whose other end is a simulated ConnectX-5's
# port (QEMU `-netdev dgram` unix sockets ↔ `mlx5ctl pingpong|perftest --link`), and
# unmodified rdma-core tools and perftest in the guest talk to `mlx5ctl pingpong` and
# `mlx5ctl perftest` on the host — this driver on the simulated NIC — over RoCE v2, their
# out-of-band TCP exchange through QEMU's slirp (hostfwd, guestfwd). Prints each tool's lines
# from both ends and `N passed, N failed`.
#
#   usage: tests/rxe-qemu/run.sh
#
# Both directions: the guest as server (it listens on 10.0.2.15:18515, the host connects through
# hostfwd once the tool printed "local address:") — ibv_rc_pingpong with 64 B and 4096 B messages
# (1000 iterations each), ibv_ud_pingpong (512 B) — then as client (it connects to
# 10.0.2.100:18515, which guestfwd relays to the host's mlx5ctl pingpong server) — RC 4096 B and
# UD 512 B; then RC 4096 B again with 0.5 % of the frames lost on the simulated wire, and once more
# (guest as client) with 1 % of the frames duplicated and 1 % reordered. Then Debian's perftest
# against mlx5ctl perftest (its exchange, byte for byte): ib_write_bw (4 KiB), ib_read_lat,
# ib_atomic_bw, ib_send_bw (1 KiB), 200 iterations, the guest as server (the host connects once
# perftest printed its "Waiting for client" banner) and as client (with frame loss, duplication
# and reordering on the wire); a run passes on both exit statuses and a result line. The simulated NIC holds
# 198.18.0.1 (GID 1, IPv4-mapped, RoCE v2), the guest 198.18.0.2; the guest resolves the NIC's
# MAC by ARP, answered by the link's address responder, and the host the guest's by ARP.
# Last, plain Ethernet (issue #13): the guest kernel's own IPv4 stack on the same e1000 pings
# `mlx5ctl net` (this driver's Ethernet queues and smoltcp; it pings the guest first) and sends
# it 1 MiB over TCP with busybox nc, which its echo service returns; the guest compares every
# byte (net-check.sh).
#
# Caches under target/rxe-qemu (the kernel, its PVH vmlinux, the user space), QEMU with
# tests/linux-on-sim. Exit status 0 when every check passed, 1 otherwise, 2 if it cannot run
# here (the reason is printed). Knobs: TIMEOUT (default 600 s), SHARED (default ../shared),
# ITERS (default 1000), ONLY (a regex: only the runs whose guest command matches), LINK (dgram,
# the default, or tap: the wire through two TAP devices and a Linux bridge; needs root).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
WORK=$ROOT/target/rxe-qemu
TIMEOUT=${TIMEOUT:-600}
ITERS=${ITERS:-1000}
mkdir -p "$WORK"
cannot() { echo "rxe-qemu: CANNOT RUN here: $*" >&2; exit 2; }
say() { echo "rxe-qemu: $*"; }

# --- QEMU with -netdev dgram (10.2 from ../shared/qemu, shared with linux-on-sim) ----------
[ -f "$SHARED/qemu/get-qemu.sh" ] || cannot "no $SHARED/qemu/get-qemu.sh"
QEMU=$(bash "$SHARED/qemu/get-qemu.sh" "$ROOT/target/linux-on-sim/qemu" | tail -1) || cannot "get-qemu.sh failed"
say "$("$QEMU" --version | head -1)"

# --- the generic kernel (the cloud one has no rdma_rxe), booted as a PVH vmlinux -------------
command -v apt-get >/dev/null || cannot "needs apt-get to download the kernel and rdma-core"
KDEB=$(cat "$WORK/resolved-kernel" 2>/dev/null || true)
# (A cache from before rdma_cm was wanted lacks configfs: extracted again.)
if [ -z "$KDEB" ] || [ ! -f "$WORK/$KDEB/vmlinux" ] ||
   [ -z "$(find "$WORK/$KDEB/lib/modules" -name 'configfs.ko*' 2>/dev/null)" ]; then
  KDEB=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2 }' | sort -V | tail -1)
  [ -n "$KDEB" ] || cannot "apt cannot resolve linux-image-amd64 (no package lists?)"
  say "downloading $KDEB"
  rm -rf "$WORK/dl" "$WORK/$KDEB" && mkdir -p "$WORK/dl" "$WORK/$KDEB"
  (cd "$WORK/dl" && apt-get download -qq -o APT::Sandbox::User=root "$KDEB") || cannot "could not download $KDEB"
  # Only /boot and the modules the guest loads (the whole package unpacks to 400 MB).
  dpkg-deb --fsys-tarfile "$WORK"/dl/*.deb | tar -x -C "$WORK/$KDEB" --wildcards \
    './boot/vmlinuz-*' './lib/modules/*/kernel/drivers/net/ethernet/intel/e1000/*' \
    './lib/modules/*/kernel/net/ipv4/udp_tunnel.ko*' './lib/modules/*/kernel/net/ipv6/ip6_udp_tunnel.ko*' \
    './lib/modules/*/kernel/drivers/infiniband/core/*' './lib/modules/*/kernel/drivers/infiniband/sw/rxe/*' \
    './lib/modules/*/kernel/crypto/crc32_generic.ko*' './lib/modules/*/kernel/fs/configfs/*'
  # The bzImage's XZ payload, decompressed: a PVH-bootable ELF (seconds faster under TCG).
  vz=$(ls "$WORK/$KDEB"/boot/vmlinuz-*)
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vz" | head -1 | cut -d: -f1 || true)
  [ -n "$off" ] || cannot "no XZ payload in $vz"
  tail -c +$((off + 1)) "$vz" | xz -dc 2>/dev/null > "$WORK/$KDEB/vmlinux" || true
  [ "$(head -c 4 "$WORK/$KDEB/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] || cannot "vmlinux extraction failed"
  echo "$KDEB" > "$WORK/resolved-kernel"
  rm -rf "$WORK/dl"
fi
KROOT=$WORK/$KDEB
KVER=$(ls "$KROOT/lib/modules" | head -1)

# --- busybox and rdma-core's user space (Debian's packages, unmodified) ----------------------
BB=$ROOT/target/vfio-qemu/busybox/bin/busybox
if [ ! -x "$BB" ]; then
  mkdir -p "$WORK/bb" && (cd "$WORK/bb" && apt-get download -qq -o APT::Sandbox::User=root busybox-static) ||
    cannot "could not download busybox-static"
  dpkg-deb -x "$WORK"/bb/busybox-static*.deb "$WORK/bb/root"
  BB=$WORK/bb/root/bin/busybox
fi
USR=$WORK/userland
if [ ! -x "$USR/root/usr/bin/ibv_rc_pingpong" ] || [ ! -x "$USR/root/usr/bin/rdma" ] ||
   [ ! -x "$USR/root/usr/bin/ib_write_bw" ] || [ ! -x "$USR/root/usr/bin/rping" ]; then
  rm -rf "$USR" && mkdir -p "$USR/root"
  (cd "$USR" && apt-get download -qq -o APT::Sandbox::User=root \
      ibverbs-utils libibverbs1 ibverbs-providers libnl-3-200 libnl-route-3-200 \
      iproute2 libmnl0 libbsd0 libmd0 libcap2 libelf1 libbpf1 libdb5.3 libselinux1 libpcre2-8-0 zlib1g \
      perftest librdmacm1 libpci3 libudev1 libibumad3 rdmacm-utils libgcc-s1) ||
    cannot "could not download rdma-core's packages"
  for d in "$USR"/*.deb; do dpkg-deb -x "$d" "$USR/root"; done
fi
STAGE=$(mktemp -d)
TAPS=""
cleanup() {
  rm -rf "$STAGE"
  for d in $TAPS; do ip link del "$d" 2>/dev/null || true; done
}
trap cleanup EXIT
mkdir -p "$STAGE"/{bin,dev,proc,sys,tmp,lib/modules,lib/x86_64-linux-gnu,lib64}
cp "$BB" "$STAGE/bin/busybox"
cp "$HERE/guest-init.sh" "$STAGE/init"; chmod 755 "$STAGE/init"
cp "$HERE/net-check.sh" "$STAGE/bin/net-check"; chmod 755 "$STAGE/bin/net-check"
for m in e1000 udp_tunnel ip6_udp_tunnel ib_core ib_uverbs crc32_generic rdma_rxe \
         configfs ib_cm iw_cm rdma_cm rdma_ucm; do
  f=$(find "$KROOT/lib/modules/$KVER/kernel" \( -name "$m.ko" -o -name "$m.ko.xz" \) | head -1)
  [ -n "$f" ] || cannot "module $m not in $KDEB"
  case $f in *.xz) xz -dc "$f" > "$STAGE/lib/modules/$m.ko" ;; *) cp "$f" "$STAGE/lib/modules/$m.ko" ;; esac
  echo "$m" >> "$STAGE/lib/modules/order"
done
cp -a "$USR/root/." "$STAGE/"
for l in $(LD_LIBRARY_PATH="$USR/root/usr/lib/x86_64-linux-gnu:$USR/root/lib/x86_64-linux-gnu" ldd \
             "$USR/root/usr/bin/ibv_rc_pingpong" "$USR/root/usr/bin/rdma" "$USR/root/usr/bin/ib_write_bw" \
             "$USR/root/usr/bin/rping" |
           awk '$3 ~ /^\// && $3 !~ /userland/ { print $3 }' | sort -u); do
  cp -L "$l" "$STAGE/lib/x86_64-linux-gnu/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$STAGE/lib64/"
(cd "$STAGE" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.gz"

# --- the host side: this driver on a simulated ConnectX-5 whose port is the guest's wire -----
cargo build --release --locked -q -p mlx5-tools --bin mlx5ctl
CTL=${CARGO_TARGET_DIR:-$ROOT/target}/release/mlx5ctl
G=$WORK/guest.sock; H=$WORK/host.sock
rm -f "$G" "$H"
# The wire: QEMU's -netdev dgram unix sockets (LINK=dgram, the default), or (LINK=tap) two TAP
# devices on a Linux bridge — the guest's e1000 on one (QEMU -netdev tap), the simulated NIC's
# port on the other (mlx5ctl --tap) — so the host kernel forwards every frame.
if [ "${LINK:-dgram}" = tap ]; then
  command -v ip >/dev/null || cannot "LINK=tap needs iproute2"
  k=$(( $$ % 100000 )); TAPH=m5h$k; TAPG=m5g$k; BR=m5r$k
  ip tuntap add dev "$TAPH" mode tap || cannot "cannot make a TAP device (needs CAP_NET_ADMIN)"
  TAPS="$TAPH"
  ip tuntap add dev "$TAPG" mode tap || cannot "cannot make a TAP device"
  TAPS="$TAPS $TAPG"
  ip link add "$BR" type bridge || cannot "cannot make a bridge"
  TAPS="$BR $TAPS"
  for d in "$TAPH" "$TAPG"; do ip link set "$d" master "$BR"; done
  for d in "$BR" "$TAPH" "$TAPG"; do
    echo 1 > "/proc/sys/net/ipv6/conf/$d/disable_ipv6" 2>/dev/null || true
    ip link set "$d" up
  done
  NETDEV="tap,id=roce,ifname=$TAPG,script=no,downscript=no"
  WIRE=(--tap "$TAPH")
  say "wire: TAP $TAPH (ours) and $TAPG (the guest's) on bridge $BR"
else
  NETDEV="dgram,id=roce,local.type=unix,local.path=$G,remote.type=unix,remote.path=$H"
  WIRE=(--link "$H:$G")
fi
HP=$((20000 + $$ % 10000))
# name:guest args (',' between runs, '+' for spaces) and the host's arguments for each.
# Guest as server (the host connects through hostfwd), then as client (it connects to
# 10.0.2.100:18515, guestfwd's relay to the host's server).
HP2=$((HP + 1))
# The sixth run loses 0.5 % of the frames on the simulated wire (both ways), the seventh
# delivers 1 % twice and lets 1 % be overtaken (both ways): RC recovers on both stacks. Then
# perftest (Debian's, unmodified) against mlx5ctl perftest, the guest as server and as client
# of each: ib_write_bw, ib_read_lat, ib_atomic_bw, ib_send_bw — the four the issue names —
# and the other four mlx5ctl perftest speaks, ib_read_bw, ib_write_lat, ib_send_lat,
# ib_atomic_lat (with frame loss, duplication and reordering on the wire when the guest is the
# client).
RUNS=("ibv_rc_pingpong:-g+1+-n+$ITERS+-s+64+-c" "ibv_rc_pingpong:-g+1+-n+$ITERS+-c" "ibv_ud_pingpong:-g+1+-n+$ITERS+-s+512+-c"
      "ibv_rc_pingpong:-g+1+-n+$ITERS+-c+10.0.2.100" "ibv_ud_pingpong:-g+1+-n+$ITERS+-s+512+-c+10.0.2.100"
      "ibv_rc_pingpong:-g+1+-n+$ITERS+-c" "ibv_rc_pingpong:-g+1+-n+$ITERS+-c+10.0.2.100")
HOST=("pingpong --type rc -n $ITERS -s 64 -c" "pingpong --type rc -n $ITERS -c" "pingpong --type ud -n $ITERS -s 512 -c"
      "pingpong --type rc -n $ITERS -c" "pingpong --type ud -n $ITERS -s 512 -c" "pingpong --type rc -n $ITERS -c --drop-ppm 5000"
      "pingpong --type rc -n $ITERS -c --dup-ppm 10000 --reorder-ppm 10000")
PT=${PT_ITERS:-200}
for t in "ib_write_bw:write-bw:-s 4096" "ib_read_lat:read-lat:" "ib_atomic_bw:atomic-bw:" "ib_send_bw:send-bw:-s 1024" \
         "ib_read_bw:read-bw:-s 4096" "ib_write_lat:write-lat:" "ib_send_lat:send-lat:" "ib_atomic_lat:atomic-lat:"; do
  IFS=: read -r tool test size <<< "$t"
  for guest in server client; do
    g="$tool:-x+1+-n+$PT$(echo " $size" | tr ' ' '+' | sed 's/^+$//')"
    h="perftest $test -n $PT${size:+ $size}"
    # With the guest as client, the wire loses 0.2 %, duplicates 0.5 % and reorders 0.5 %.
    [ "$guest" = client ] && { g="$g+10.0.2.100"; h="$h --drop-ppm 2000 --dup-ppm 5000 --reorder-ppm 5000"; }
    RUNS+=("$g"); HOST+=("$h")
  done
done
# rdma_cm: rping -C 100 -V, its connection made with CM MADs over QP1 (no TCP exchange),
# the guest as server (the host connects to 198.18.0.2:7174) and as client (of 198.18.0.1,
# our simulated NIC, with frame loss, duplication and reordering on the wire).
RUNS+=("rping:-s+-a+198.18.0.2+-C+100+-V" "rping:-c+-a+198.18.0.1+-C+100+-V")
HOST+=("rping -c -a 198.18.0.2 -C 100 -V" "rping -s -C 100 -V --drop-ppm 2000 --dup-ppm 5000 --reorder-ppm 5000")
# perftest -R: ib_write_bw with its exchange over an RC QP and its test QP both connected by
# rdma_cm, the guest as server (we connect to 198.18.0.2:18515) and as client (of us).
RUNS+=("ib_write_bw:-R+-n+$PT+-s+4096" "ib_write_bw:-R+-n+$PT+-s+4096+198.18.0.1")
HOST+=("perftest write-bw -R -n $PT -s 4096 198.18.0.2" "perftest write-bw -R -n $PT -s 4096 --drop-ppm 2000 --dup-ppm 5000 --reorder-ppm 5000")
# Plain Ethernet (issue #13): the guest kernel's own stack pings mlx5ctl net (this driver's
# Ethernet queues and smoltcp) and sends it 1 MiB over TCP, which its echo service returns; the
# guest checks every byte (net-check.sh). mlx5ctl net pings the guest first. (It once failed
# when run after the faulty-wire runs: a strace of QEMU showed the guest's three pings leaving
# before mlx5ctl net was up — the previous run's host side can end more than the 3 s after the
# guest's tool that a client then waited. Guest clients now start when the host says its side
# listens, through 10.0.2.100:18600; see the loop below.)
RUNS=("net-check:198.18.0.1+1048576" "${RUNS[@]}")
HOST=("net --peer 198.18.0.2 --pings 3 --echo 5000 --echo-bytes 1048576 --wait-secs 90" "${HOST[@]}")
# ONLY=REGEX keeps the runs whose guest tool and arguments match (a quicker check while working).
if [ -n "${ONLY:-}" ]; then
  R=(); H=()
  for i in "${!RUNS[@]}"; do
    if [[ ${RUNS[$i]} =~ $ONLY ]]; then R+=("${RUNS[$i]}"); H+=("${HOST[$i]}"); fi
  done
  RUNS=("${R[@]}"); HOST=("${H[@]}")
fi
TOOLS=$(IFS=,; echo "${RUNS[*]}")

say "booting $KVER (PVH vmlinux) with rdma_rxe; runs: ${RUNS[*]}"
: > "$WORK/guest.log"
timeout --kill-after=5 "$TIMEOUT" "$QEMU" -L /usr/share/qemu -L /usr/share/seabios \
  -machine q35,accel=tcg -cpu max -smp 1 -m 512M \
  -netdev "$NETDEV" \
  -device e1000,netdev=roce,mac=52:54:00:00:00:02,romfile= \
  -netdev "user,id=ctl,restrict=on,hostfwd=tcp:127.0.0.1:$HP-10.0.2.15:18515,guestfwd=tcp:10.0.2.100:18515-cmd:bash -c 'exec 3<>/dev/tcp/127.0.0.1/$HP2; cat <&3 & cat >&3',guestfwd=tcp:10.0.2.100:18600-cmd:bash -c 'for _ in \$(seq 1800); do [ -e $WORK/go ] && break; sleep 0.1; done; cat $WORK/go; rm -f $WORK/go'" \
  -device e1000,netdev=ctl,mac=52:54:00:00:01:02,romfile= \
  -kernel "$KROOT/vmlinux" -initrd "$WORK/initramfs.gz" \
  -append "console=ttyS0 loglevel=4 panic=-1 rxe.tools=$TOOLS" \
  -nographic -nodefaults -serial "file:$WORK/guest.log" -monitor none -no-reboot \
  </dev/null > "$WORK/qemu.log" 2>&1 &
QPID=$!

# Each run: wait for the guest tool's "local address:", then our side as the client.
PASS=0; FAIL=0
check() { if eval "$2"; then echo "PASS $1"; PASS=$((PASS + 1)); else echo "FAIL $1"; FAIL=$((FAIL + 1)); fi; }
side() { case ${RUNS[$1]} in *10.0.2.100|*198.18.0.1*) echo client ;; *) echo server ;; esac; }
# Where our side finds the guest's exchange (rping and perftest -R have none over TCP: rdma_cm).
oob() { case ${HOST[$1]} in rping*|net*|*" -R "*) ;; *) echo "$2" ;; esac; }
# rping's runs keep the simulated wire as pcap (target/rxe-qemu/host-N.pcap): Linux's CM MADs
# as Linux sent them.
cap() { case ${HOST[$1]} in rping*|net*) echo "--pcap $WORK/host-$(( $1 + 1 )).pcap" ;; esac; }
# Waits (up to 30 s) until our side of run index $1 (number $2, process $3) listens: its TCP
# port for the tools' exchange, or its own words for rdma_cm servers and net's echo service —
# or it has exited.
listening() {
  for _ in $(seq 300); do
    kill -0 "$3" 2>/dev/null || return 0
    if [ -n "$(oob "$1" x)" ]; then
      [ -n "$(ss -Hltn "sport = :$HP2" 2>/dev/null)" ] && return 0
    else
      grep -aqE 'listening|Waiting for client' "$WORK/host-$2.log" 2>/dev/null && return 0
    fi
    sleep 0.1
  done
}
# Whether run $1 printed a result line (" <bytes> <iterations> ...") on our side or the guest's.
result_line() {
  grep -aqE '^ [0-9]+ +[0-9]+ ' "$WORK/host-$1.log" ||
    awk -v n="$1" '$0 ~ "^RXE-RUN " n " " { f = 1 } $0 ~ "^RXE-EXIT " n " " { f = 0 }
                   f && /^ [0-9]+ +[0-9]+ / { ok = 1 } END { exit !ok }' "$WORK/guest.log"
}
for i in "${!RUNS[@]}"; do
  n=$((i + 1))
  if [ "$(side "$i")" = server ]; then
    # The guest listens once it printed its address; then our side connects.
    # (pingpong prints "local address:" just before it listens — QEMU's hostfwd may accept
    # our connection before then and reset it, and our client then connects again; perftest
    # prints its "Waiting for client" banner — its "local address:" comes only after a client
    # connected; rping prints nothing, it is given 5 s after it started.)
    for _ in $(seq $((TIMEOUT * 10))); do
      awk -v n="$n" '$0 ~ "^RXE-RUN " n " " { f = 1 } f && /local address:|Waiting for client to connect/ { ok = 1 }
                     f && /^RXE-RUN [0-9]+ rping / { ok = 2 } END { exit !ok }' "$WORK/guest.log" && break
      kill -0 $QPID 2>/dev/null || break
      sleep 0.1
    done
    case ${HOST[$i]} in rping*) sleep 5 ;; esac
    # shellcheck disable=SC2086
    RUST_LOG=${RUST_LOG:-warn} timeout 150 "$CTL" ${HOST[$i]} $(oob "$i" "127.0.0.1 -p $HP") $(cap "$i") --ip 198.18.0.1 \
      --mac 02:c5:5a:00:00:01 "${WIRE[@]}" > "$WORK/host-$n.log" 2>&1 && rc=0 || rc=$?
    echo "host-$n exit $rc" >> "$WORK/host-$n.log"
  else
    # Our side listens before the guest's client starts: the guest asks 10.0.2.100:18600
    # (guestfwd) before it starts its client, and the answer comes once $WORK/go exists, which
    # is written when our side listens. (A fixed wait in the guest raced with the previous
    # run's host side, which can end seconds after the guest's tool.)
    for _ in $(seq $((TIMEOUT * 10))); do
      grep -aq "^RXE-RUN $n " "$WORK/guest.log" && break
      kill -0 $QPID 2>/dev/null || break
      sleep 0.1
    done
    rm -f "$WORK/go"
    # shellcheck disable=SC2086
    RUST_LOG=${RUST_LOG:-warn} timeout 150 "$CTL" ${HOST[$i]} $(oob "$i" "-p $HP2") $(cap "$i") --ip 198.18.0.1 \
      --mac 02:c5:5a:00:00:01 "${WIRE[@]}" > "$WORK/host-$n.log" 2>&1 &
    HPID=$!
    listening "$i" "$n" $HPID
    echo "$n" > "$WORK/go.tmp" && mv "$WORK/go.tmp" "$WORK/go"
    wait $HPID && rc=0 || rc=$?
    echo "host-$n exit $rc" >> "$WORK/host-$n.log"
  fi
  for _ in $(seq 600); do grep -aq "^RXE-EXIT $n " "$WORK/guest.log" && break; sleep 0.1; done
done
wait $QPID || true
grep -aE '^RXE|local address|remote address|bytes in|iters in|Failed|Couldn|error|#bytes|^ [0-9]+ +[0-9]+ |^net-check|packets transmitted|round-trip' "$WORK/guest.log" | sed 's/^/guest: /'
for i in "${!RUNS[@]}"; do
  n=$((i + 1)); name=${RUNS[$i]%%:*}; args=$(echo "${RUNS[$i]#*:}" | tr '+' ' ')
  sed "s/^/host-$n: /" "$WORK/host-$n.log"
  if [ "$(side "$i")" = server ]; then us=client; else us=server; fi
  # perftest: a result line too, from either side (a read_lat server prints none).
  summary=true
  case $name in ib_*) summary="result_line $n" ;; esac
  check "$name $args (rxe in the guest, $(side "$i")) with mlx5ctl ${HOST[$i]} (this driver, simulated ConnectX-5, $us)" \
    "grep -aq '^RXE-EXIT $n $name 0' '$WORK/guest.log' && grep -aq '^host-$n exit 0' '$WORK/host-$n.log' && $summary"
done
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
