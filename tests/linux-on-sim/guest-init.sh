#!/bin/busybox sh
# /init of the linux-on-sim guest: load the mlx5 modules in dependency order, give the probe
# time, then report what the kernel made of the simulated ConnectX-5s and power off.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp
echo "GUEST: up"
# linuxsim.dbgpages=1: keep every kernel message (the ring buffer drops the oldest).
grep -q 'linuxsim.dbgpages=1' /proc/cmdline && { cat /proc/kmsg > /tmp/kmsg & }
for m in $(cat /lib/modules/order); do
  # linuxsim.dbgpages=1: mlx5_core's page accounting messages (pagealloc.c) into dmesg.
  args=""
  if [ "$m" = mlx5_core ] && grep -q 'linuxsim.dbgpages=1' /proc/cmdline; then
    args='dyndbg=+p'
  fi
  if insmod "/lib/modules/$m.ko" ${args:+"$args"}; then echo "GUEST: insmod $m"; else echo "GUEST: insmod $m FAILED"; fi
done
wait_s=$(sed -n 's/.*linuxsim.wait=\([0-9]*\).*/\1/p' /proc/cmdline)
sleep "${wait_s:-20}"
for d in /sys/bus/pci/devices/*; do
  [ "$(cat "$d/vendor")" = 0x15b3 ] || continue
  drv=$(basename "$(readlink "$d/driver" 2>/dev/null)" 2>/dev/null)
  echo "GUEST: device $(basename "$d") $(cat "$d/vendor"):$(cat "$d/device") driver=${drv:-none}"
done
echo "GUEST: netdevs $(ls /sys/class/net | tr '\n' ' ')"
for n in /sys/class/net/*; do
  [ "$(basename "$n")" = lo ] && continue
  echo "GUEST-NETDEV $(basename "$n") address=$(cat "$n/address") mtu=$(cat "$n/mtu") driver=$(basename "$(readlink "$n/device/driver" 2>/dev/null)" 2>/dev/null)"
done
if [ -n "$(sed -n 's/.*linuxsim.up=\(1\).*/\1/p' /proc/cmdline)" ]; then
  for n in /sys/class/net/eth*; do
    [ -e "$n" ] || continue
    ip link set "$(basename "$n")" up && echo "GUEST: link up $(basename "$n") requested"
  done
  sleep "${wait_s:-20}"
  # linuxsim.pyverbs=1 (a short linuxsim.wait): the suite needs every port's carrier; up to
  # 60 s more for it.
  if grep -q 'linuxsim.pyverbs=1' /proc/cmdline; then
    for _ in $(seq 60); do
      down=0
      for n in /sys/class/net/eth*; do [ "$(cat "$n/carrier" 2>/dev/null)" = 1 ] || down=1; done
      [ "$down" = 0 ] && break
      sleep 1
    done
  fi
  for n in /sys/class/net/eth*; do
    [ -e "$n" ] && echo "GUEST-LINK $(basename "$n") operstate=$(cat "$n/operstate") carrier=$(cat "$n/carrier" 2>/dev/null)"
  done
fi
# linuxsim.vflink=1 (VF=1 UP=1): the hypervisor holds eth0's vport down when it reads "ready"
# and lets it follow the uplink again at "release"; the carrier must follow.
if grep -q 'linuxsim.vflink=1' /proc/cmdline && [ -e /sys/class/net/eth0 ]; then
  echo "GUEST-VFLINK: ready"
  c=1
  for _ in $(seq 300); do c=$(cat /sys/class/net/eth0/carrier 2>/dev/null); [ "$c" = 0 ] && break; sleep 0.2; done
  echo "GUEST-VFLINK: eth0 carrier $c with its vport held down"
  echo "GUEST-VFLINK: release"
  for _ in $(seq 300); do c=$(cat /sys/class/net/eth0/carrier 2>/dev/null); [ "$c" = 1 ] && break; sleep 0.2; done
  echo "GUEST-VFLINK: eth0 carrier $c after the vport follows the uplink again"
fi
echo "GUEST: ibdevs $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"
dmesg | grep -E "mlx5|15b3" | sed 's/^/GUEST-DMESG: /'
probe=fail
dmesg | grep -q "probe of .* failed\|mlx5_init_one failed" || { ls /sys/bus/pci/drivers/mlx5_core/ 2>/dev/null | grep -q ":" && probe=ok; }
if [ -x /usr/bin/ibv_devinfo ]; then
  ibv_devinfo -v > /tmp/ibv 2>&1; echo "GUEST: ibv_devinfo exit $?"
  sed 's/^/GUEST-IBV: /' /tmp/ibv
fi
# Issue #11 item 4: rdma-core's mlx5 provider moving traffic between the two simulated NICs
# (one fabric): unmodified ibv_*_pingpong, server on mlx5_0, client on mlx5_1, their exchange
# over the loopback interface, RoCE v2 GID index 1.
# pair TAG NAME SERVER-ARGS -- CLIENT-ARGS: NAME as server on mlx5_0, then as client on mlx5_1
# against 127.0.0.1; prints both outputs as TAG-NAME-server/client and "TAG: NAME server exit N
# client exit N".
pair() {
  tag=$1 name=$2 cmd=$3 srvargs=$4 cliargs=$5
  $cmd $srvargs > /tmp/srv 2>&1 &
  srv=$!
  sleep 2
  timeout 120 $cmd $cliargs 127.0.0.1 > /tmp/cli 2>&1
  crc=$?
  for _ in $(seq 30); do kill -0 $srv 2>/dev/null || break; sleep 1; done
  kill $srv 2>/dev/null; wait $srv; src=$?
  sed "s/^/$tag-$name-server: /" /tmp/srv; sed "s/^/$tag-$name-client: /" /tmp/cli
  echo "$tag: $name server exit $src client exit $crc"
}
if grep -q 'linuxsim.traffic=1' /proc/cmdline && [ -e /sys/class/infiniband/mlx5_1 ]; then
  ip link set lo up
  gid=$(sed -n "s/.*linuxsim.gid=\([0-9]*\).*/\1/p" /proc/cmdline)
  # rc, uc, ud and srq (an SRQ shared by two RC QPs); uc's 16 KiB buffer makes a multi-page MR.
  for t in rc uc ud srq; do
    opts="-g ${gid:-1} -n 20"
    case $t in ud) opts="$opts -s 512" ;; uc) opts="$opts -s 16384" ;; srq) opts="$opts -q 2" ;; esac
    pair GUEST-TRAFFIC "$t" "ibv_${t}_pingpong" "-d mlx5_0 $opts" "-d mlx5_1 $opts"
  done
  # perftest (unmodified, Debian's): RDMA WRITE bandwidth, READ latency, atomics bandwidth.
  for t in "ib_write_bw -n 200 -s 4096" "ib_read_lat -n 100" "ib_atomic_bw -n 200"; do
    name=${t%% *}
    [ -x "/usr/bin/$name" ] || { echo "GUEST-PERF: $name missing"; continue; }
    pair GUEST-PERF "$name" "$t -F -x ${gid:-1}" "-d mlx5_0" "-d mlx5_1"
  done
fi
# Issue #11 item 4's ping, over the two netdevs through the simulated fabric: eth1 moves into a
# network namespace of its own (else the kernel would deliver locally), each side gets an IPv4
# address; ping both ways (ARP first), then a TCP stream of 1 MiB through busybox nc, compared
# byte for byte (mlx5e's checksum offloads and TSO against the model).
if grep -q 'linuxsim.ping=1' /proc/cmdline && [ -e /sys/class/net/eth1 ]; then
  unshare -n sleep 600 &
  ns=$!
  sleep 1
  in_b() { nsenter -t "$ns" -n "$@"; }
  ip link set eth1 netns "$ns" && echo "GUEST-PING: eth1 in namespace $ns"
  in_b ip link set lo up; in_b ip link set eth1 up; in_b ip addr add 10.11.0.2/24 dev eth1
  ip link set eth0 up; ip addr add 10.11.0.1/24 dev eth0
  sleep 2
  ping -c 5 -W 5 10.11.0.2 > /tmp/ping 2>&1; echo "GUEST-PING: ping eth0 -> eth1 exit $?"
  sed 's/^/GUEST-PING-OUT: /' /tmp/ping
  in_b ping -c 5 -W 5 10.11.0.1 > /tmp/ping 2>&1; echo "GUEST-PING: ping eth1 -> eth0 exit $?"
  sed 's/^/GUEST-PING-OUT: /' /tmp/ping
  # A TCP stream of 1 MiB from eth0 to eth1, its result on a line tagged $1.
  stream() {
    dd if=/dev/urandom of=/tmp/stream bs=1024 count=1024 2>/dev/null
    rm -f /tmp/stream.rx
    # busybox nc quits when the other side closes: the receiver's stdin stays open (sleep 61)
    # so it does not half-close the connection before the data is in.
    in_b sh -c 'sleep 61 | nc -l -p 5001 > /tmp/stream.rx' &
    lsn=$!
    sleep 1
    timeout 120 nc 10.11.0.2 5001 < /tmp/stream; echo "$1: nc send exit $?"
    for _ in $(seq 30); do kill -0 $lsn 2>/dev/null || break; sleep 1; done
    pkill -f 'sleep 61'; kill $lsn 2>/dev/null
    a=$(md5sum < /tmp/stream | cut -d' ' -f1); b=$(md5sum < /tmp/stream.rx 2>/dev/null | cut -d' ' -f1)
    echo "$1: tcp 1 MiB sent $a received $b bytes $(wc -c < /tmp/stream.rx 2>/dev/null)"
  }
  stream GUEST-PING
  # mlx5e's CQE compression (its rx_cqe_compress private flag, off by default as on a real
  # card in a VM): the same stream again, Linux decompressing the sessions the device writes;
  # its counters of compressed completions.
  if command -v ethtool >/dev/null; then
    ethtool --set-priv-flags eth0 rx_cqe_compress on; in_b ethtool --set-priv-flags eth1 rx_cqe_compress on
    echo "GUEST-ZIP: eth0 $(ethtool --show-priv-flags eth0 | grep rx_cqe_compress | tr -s ' ')"
    echo "GUEST-ZIP: eth1 $(in_b ethtool --show-priv-flags eth1 | grep rx_cqe_compress | tr -s ' ')"
    sleep 1
    stream GUEST-ZIP
    in_b ping -c 3 -W 5 10.11.0.1 > /dev/null 2>&1; echo "GUEST-ZIP: ping eth1 -> eth0 exit $?"
    echo "GUEST-ZIP-STATS eth0 $(ethtool -S eth0 | grep -E '(rx_cqe_compress|tx_mpwqe)_(blks|pkts):' | tr -s ' \n' ' ')"
    echo "GUEST-ZIP-STATS eth1 $(in_b ethtool -S eth1 | grep -E '(rx_cqe_compress|tx_mpwqe)_(blks|pkts):' | tr -s ' \n' ' ')"
    echo "GUEST-ZIP: eth0 $(ethtool --show-priv-flags eth0 | grep skb_tx_mpwqe | tr -s ' ')"
  fi
  echo "GUEST-PING-STATS $(grep eth0 /proc/net/dev)"
  echo "GUEST-PING-STATS $(in_b grep eth1 /proc/net/dev)"
  kill $ns; wait $ns 2>/dev/null
  sleep 1
fi
echo "GUEST-RESULT probe=$probe cmd_errors=$(dmesg | grep -c 'mlx5_cmd_out_err') warnings=$(dmesg | grep -c -E 'WARNING:|BUG:|Call Trace')"
if grep -q 'linuxsim.dbgpages=1' /proc/cmdline; then
  mkdir -p /sys/kernel/debug && mount -t debugfs none /sys/kernel/debug 2>/dev/null
  for f in /sys/kernel/debug/mlx5/*/pages/*; do [ -f "$f" ] && echo "GUEST-PAGESTAT: $f $(cat "$f")"; done
fi
# linuxsim.pyverbs=1: rdma-core's pyverbs test suite (its tests/, with our pyv_runner.py) on
# mlx5_0, port 1, GID 1 (RoCE v2): both ends of every traffic test are QPs of that one port.
# The RDMA CM tests take their address from eth0; the huge-page tests want 2 MiB pages. The
# console shows only urgent kernel messages meanwhile (a message printed in the middle of a
# result line would break it); the suite's kernel messages follow as GUEST-PYV-DMESG, and its
# failed commands do not count in the unload's line below.
pyv_errs=0 pyv_warns=0
if grep -q 'linuxsim.pyverbs=1' /proc/cmdline && [ -x /usr/bin/python3 ]; then
  ip link set lo up
  ip addr add 10.11.0.1/24 dev eth0 && echo "GUEST-PYV: eth0 10.11.0.1/24"
  echo 128 > /proc/sys/vm/nr_hugepages
  echo "GUEST-PYV: huge pages $(cat /proc/sys/vm/nr_hugepages) x 2 MiB"
  mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
  echo "GUEST-PYV: $(/bin/ip -V 2>&1); $(/sbin/devlink -V 2>&1)"
  /bin/ip -br addr show eth0 | sed 's/^/GUEST-PYV: /'
  for d in /sys/bus/pci/devices/*/infiniband/mlx5_0; do
    p=$(echo "$d" | cut -d/ -f6)
    echo "GUEST-PYV: devlink eswitch of $p: $(/sbin/devlink dev eswitch show "pci/$p" 2>&1; echo "(exit $?)")" | tr '\n' ' '; echo
  done
  g=/sys/class/infiniband/mlx5_0/ports/1
  echo "GUEST-PYV: mlx5_0 port 1 $(cat $g/state) gid 1 $(cat $g/gids/1 2>/dev/null) $(cat $g/gid_attrs/types/1 2>/dev/null)"
  errs0=$(dmesg | grep -c 'mlx5_cmd_out_err') warns0=$(dmesg | grep -c -E 'WARNING:|BUG:|Call Trace')
  lines0=$(dmesg | wc -l)
  level=$(cut -f1 /proc/sys/kernel/printk)
  echo 1 > /proc/sys/kernel/printk
  # (busybox sh prefers its own applets, ip among them; the suite's subprocesses look iproute2's
  # ip and devlink up in PATH.)
  # linuxsim.pyvtests=a,b: only these tests (unittest names under tests., for a focused run).
  only=$(sed -n 's/.*linuxsim.pyvtests=\([A-Za-z0-9_.,]*\).*/\1/p' /proc/cmdline | tr ',' ' ')
  (cd /tests && PATH=/usr/sbin:/usr/bin:/sbin:/bin python3 pyv_runner.py --dev mlx5_0 --port 1 --gid 1 $only) 2>&1
  rc=$?
  echo "$level" > /proc/sys/kernel/printk
  echo "GUEST-PYV: exit $rc"
  # The suite's kernel messages, each distinct one once with its count (timestamps dropped).
  dmesg | tail -n +$((lines0 + 1)) | sed 's/^\[[ 0-9.]*\] //; s/(pid [0-9]*)/(pid)/' | sort | uniq -c | sort -rn | head -200 |
    sed 's/^/GUEST-PYV-DMESG: /'
  pyv_errs=$(($(dmesg | grep -c 'mlx5_cmd_out_err') - errs0))
  pyv_warns=$(($(dmesg | grep -c -E 'WARNING:|BUG:|Call Trace') - warns0))
  echo "GUEST-PYV-KERNEL cmd_errors=$pyv_errs warnings=$pyv_warns"
fi
# Unload: Linux tears the device down (objects, pages, TEARDOWN_HCA, DISABLE_HCA); the simulator
# reports its accounts when the guest is gone.
for m in mlx5_ib mlx5_core; do
  grep -q "^$m " /proc/modules && { rmmod "$m" && echo "GUEST: rmmod $m" || echo "GUEST: rmmod $m FAILED"; }
done
dmesg | grep -B3 -A4 -E 'WARNING:|BUG:' | sed 's/^/GUEST-WARN: /'
if grep -q 'linuxsim.dbgpages=1' /proc/cmdline; then
  grep -aE 'pagealloc|give_pages|reclaim|free_4k|npages|pages counter|fail' /tmp/kmsg > /tmp/pages
  # Messages the kernel could not keep (the reader fell behind): the counts above are then short.
  grep -aiE 'messages dropped|callbacks suppressed' /tmp/kmsg | sed 's/^/GUEST-PAGES-LOST: /' | head -20
  echo "GUEST-PAGES: $(wc -l < /tmp/pages) page lines"
  sed 's/^/GUEST-PAGES: /' /tmp/pages
fi
# (Without the pyverbs suite's own, counted in GUEST-PYV-KERNEL above.)
echo "GUEST-UNLOAD cmd_errors=$(($(dmesg | grep -c 'mlx5_cmd_out_err') - pyv_errs)) warnings=$(($(dmesg | grep -c -E 'WARNING:|BUG:|Call Trace') - pyv_warns))"
# Issue #11 item 5: the same NICs through the guest kernel's VFIO, behind its (emulated VT-d)
# IOMMU, driven by this project's mlx5ctl: every DMA address it gives the device is an IOVA the
# guest's vfio_iommu_type1 mapped, and the simulator reaches nothing else.
if [ -x /bin/mlx5ctl ] && grep -q 'linuxsim.vfio=1' /proc/cmdline; then
  for m in $(cat /lib/modules/vfio-order); do
    insmod "/lib/modules/$m.ko" || echo "GUEST-VFIO: insmod $m FAILED"
  done
  BDFS=""
  for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor")" = 0x15b3 ] || continue
    bdf=${d##*/}
    [ -e "$d/driver" ] && echo "$bdf" > "$d/driver/unbind"
    echo vfio-pci > "$d/driver_override"
    echo "$bdf" > /sys/bus/pci/drivers_probe
    echo "GUEST-VFIO: bound $bdf driver=$(basename "$(readlink "$d/driver")") iommu_group=$(basename "$(readlink "$d/iommu_group")") domain=$(cat "$d/iommu_group/type" 2>/dev/null)"
    BDFS="$BDFS $bdf"
  done
  set -- $BDFS
  echo "GUEST-VFIO: mlx5ctl list"; mlx5ctl list 2>&1 | sed 's/^/GUEST-VFIO-LIST: /'
  mlx5ctl devinfo --vfio "$1" --json > /tmp/devinfo.json 2> /tmp/devinfo.err
  echo "GUEST-VFIO: devinfo exit $?"
  sed 's/^/GUEST-VFIO-DEVINFO: /' /tmp/devinfo.json; sed 's/^/GUEST-VFIO-ERR: /' /tmp/devinfo.err
  for t in $(sed -n 's/.*linuxsim.demo=\([a-z,]*\).*/\1/p' /proc/cmdline | tr ',' ' '); do
    if [ -n "$2" ]; then
      mlx5ctl demo --type "$t" --vfio "$1" --vfio "$2" --messages 2000 --pings 200 > /tmp/demo 2>&1
    else
      mlx5ctl demo --type "$t" --vfio "$1" --messages 2000 --pings 200 > /tmp/demo 2>&1
    fi
    rc=$?
    sed "s/^/GUEST-VFIO-DEMO-$t: /" /tmp/demo
    echo "GUEST-VFIO: demo $t exit $rc"
  done
  # The VFIO example, as a user runs it: an RC ping between the NICs (one: in loopback).
  vfio_rc_ping $1 $2 200 > /tmp/example 2>&1
  rc=$?
  sed 's/^/GUEST-VFIO-EXAMPLE: /' /tmp/example
  echo "GUEST-VFIO: example exit $rc"
  # mlx5ctl net through the guest's vfio-pci: each NIC an Ethernet port under smoltcp; A serves
  # TCP echo, B pings A and sends 256 KiB through it, every byte checked; A pings B.
  if [ -n "$2" ]; then
    mlx5ctl net --vfio "$1" --ip 10.9.0.1 --peer 10.9.0.2 --pings 3 --echo 5000 \
      --echo-bytes 262144 --linger 2 --wait-secs 60 > /tmp/netA 2>&1 &
    pa=$!
    mlx5ctl net --vfio "$2" --ip 10.9.0.2 --peer 10.9.0.1 --pings 3 --echo-to 5000 \
      --echo-bytes 262144 --linger 2 --wait-secs 60 > /tmp/netB 2>&1
    rb=$?
    wait $pa
    ra=$?
    sed 's/^/GUEST-VFIO-NET-A: /' /tmp/netA
    sed 's/^/GUEST-VFIO-NET-B: /' /tmp/netB
    echo "GUEST-VFIO: net exit $ra $rb"
  fi
  # A DMA outside every map the guest's IOMMU holds for the process: the command queue pointed
  # at a reserved, never-mapped IOVA.
  mlx5ctl iommu-check --vfio "$1" > /tmp/iommu 2>&1
  rc=$?
  sed 's/^/GUEST-VFIO-IOMMU: /' /tmp/iommu
  echo "GUEST-VFIO: iommu-check exit $rc"
  dmesg | grep -iE 'DMAR|vfio' | tail -20 | sed 's/^/GUEST-VFIO-DMESG: /'
fi
poweroff -f
