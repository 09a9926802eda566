#!/bin/busybox sh
# /init of the unikernel-qemu Linux guest: Linux's mlx5 drivers on a simulated ConnectX-5 (NIC B)
# whose fabric peer is the unikernel (NIC A, 198.18.0.1, in another QEMU). This guest is
# 198.18.0.2. Prints `GUEST PASS name: what` or `GUEST FAIL name: why` for each step, then
# `GUEST DONE`, and powers off. Steps: netdev, carrier, rdma-port (mlx5_0 ACTIVE with its RoCE v2
# IPv4-mapped GID), ping, rc_pingpong-client (of the unikernel's server, port 18515),
# rc_pingpong-server (port 18516, the unikernel its client), tcp-echo (1 MiB to the unikernel's
# echo on 5001, compared), unload (rmmod: Linux gives the NIC back clean for the accounts).
# ukpeer.wait=S on the kernel command line: how long each step waits for the unikernel (120).
# shellcheck shell=dash
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp
echo "GUEST: up"
while read -r m; do
  insmod "/lib/modules/$m.ko" || echo "GUEST: insmod $m FAILED"
done < /lib/modules/order
PEER=198.18.0.1; ME=198.18.0.2
WAIT=$(sed -n 's/.*ukpeer.wait=\([0-9]*\).*/\1/p' /proc/cmdline); WAIT=${WAIT:-120}
# now: the uptime in whole seconds; since T0: seconds since the uptime was T0.
now() { cut -d. -f1 /proc/uptime; }
since() { echo $(( $(now) - $1 )); }
ok() { echo "GUEST PASS $1: $2 (uptime $(now) s)"; }
bad() { echo "GUEST FAIL $1: $2 (uptime $(now) s)"; FAILED=1; }
FAILED=0

# --- the mlx5 netdev up with our address, its carrier, mlx5_0's port and RoCE v2 GID ----------
t0=$(now); dev=""
while [ -z "$dev" ] && [ "$(since "$t0")" -lt 60 ]; do
  for n in /sys/class/net/*; do
    [ "$(cat "$n/device/vendor" 2>/dev/null)" = 0x15b3 ] && dev=${n##*/}
  done
  [ -n "$dev" ] || sleep 1
done
if [ -n "$dev" ]; then
  ok netdev "$dev ($(cat "/sys/class/net/$dev/address"), driver $(basename "$(readlink "/sys/class/net/$dev/device/driver")"))"
  ip link set "$dev" up
  ip addr add "$ME/24" dev "$dev"
  t0=$(now)
  while [ "$(cat "/sys/class/net/$dev/carrier" 2>/dev/null)" != 1 ] && [ "$(since "$t0")" -lt 60 ]; do sleep 1; done
  if [ "$(cat "/sys/class/net/$dev/carrier" 2>/dev/null)" = 1 ]; then
    ok carrier "$dev operstate $(cat "/sys/class/net/$dev/operstate") after $(since "$t0") s"
  else
    bad carrier "$dev has no carrier after 60 s (operstate $(cat "/sys/class/net/$dev/operstate"))"
  fi
else
  bad netdev "no netdev of a 15b3 device after 60 s: $(cd /sys/class/net && echo *)"
  bad carrier "no netdev"
fi
# The RoCE v2 GID of 198.18.0.2 (IPv4-mapped), found by its type and value, not assumed at an
# index (Linux puts the MAC-derived link-local GIDs first: v1 at 0, v2 at 1).
G=/sys/class/infiniband/mlx5_0/ports/1
gid() {
  for i in 0 1 2 3 4 5 6 7; do
    [ "$(cat "$G/gids/$i" 2>/dev/null)" = 0000:0000:0000:0000:0000:ffff:c612:0002 ] &&
      [ "$(cat "$G/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] && { echo "$i"; return; }
  done
}
t0=$(now); GID=""
while [ "$(since "$t0")" -lt 60 ]; do
  GID=$(gid)
  [ -n "$GID" ] && ibv_devinfo -d mlx5_0 2>/dev/null | grep -q 'state:.*PORT_ACTIVE' && break
  sleep 1
done
if [ -n "$GID" ] && ibv_devinfo -d mlx5_0 2>/dev/null | grep -q 'state:.*PORT_ACTIVE'; then
  ok rdma-port "mlx5_0 port 1 PORT_ACTIVE, RoCE v2 GID ::ffff:$ME at index $GID (after $(since "$t0") s)"
else
  bad rdma-port "mlx5_0 port 1 not ACTIVE with a RoCE v2 GID of $ME within 60 s: $(ibv_devinfo -d mlx5_0 2>&1 | grep -E 'state|hca_id|No IB' | tr -s ' \t\n' ' ')"
  for i in 0 1 2 3; do echo "GUEST: gid $i $(cat "$G/gids/$i" 2>/dev/null) $(cat "$G/gid_attrs/types/$i" 2>/dev/null)"; done
fi

# Each step runs unless SKIP says why not: the port did not come up, or the unikernel never
# answered ping (then the TCP connects of the rest would only time out).
SKIP=""; [ "$FAILED" = 0 ] || SKIP="the port did not come up"
step() { if [ -n "$SKIP" ]; then bad "$1" "not run: $SKIP"; else "$2"; fi; }

# --- a. ping: the first answer within WAIT (the unikernel may still be starting), then 10 -----
ping_peer() {
  t0=$(now); got=0
  while [ "$(since "$t0")" -lt "$WAIT" ]; do
    ping -c 5 -W 2 "$PEER" > /tmp/ping 2>&1 && { got=1; break; }
    sleep 1
  done
  if [ "$got" = 0 ]; then
    bad ping "no answer from $PEER in $WAIT s: $(tail -2 /tmp/ping | tr '\n' ' ')"
    ip neigh show | sed 's/^/GUEST: neigh /'
    SKIP="no answer to ping from $PEER"
    return
  fi
  first=$(since "$t0")
  ping -c 10 -W 2 "$PEER" > /tmp/ping 2>&1; rc=$?
  if [ "$rc" = 0 ] && grep -q '10 packets transmitted, 10 packets received' /tmp/ping; then
    ok ping "first answer after $first s; $(tail -2 /tmp/ping | tr '\n' ' ')"
  else
    bad ping "ping -c 10 exit $rc: $(tail -2 /tmp/ping | tr '\n' ' ')"
  fi
}

# --- b. ibv_rc_pingpong, client of the unikernel's server (18515); connect retried ------------
rc_client() {
  t0=$(now)
  while :; do
    timeout 120 ibv_rc_pingpong -d mlx5_0 -g "$GID" -n 1000 -s 4096 "$PEER" > /tmp/rc 2>&1; rc=$?
    grep -q "Couldn't connect" /tmp/rc || break
    [ "$(since "$t0")" -ge "$WAIT" ] && break
    sleep 2
  done
  sed 's/^/GUEST-RC-CLIENT: /' /tmp/rc
  if [ "$rc" = 0 ] && grep -q 'iters in' /tmp/rc; then
    ok rc_pingpong-client "$(tail -2 /tmp/rc | tr '\n' '|' | sed 's/|$//; s/|/ | /')"
  else
    bad rc_pingpong-client "exit $rc: $(tail -2 /tmp/rc | tr '\n' ' ')"
  fi
}

# --- c. ibv_rc_pingpong as the server of the unikernel (18516) ---------------------------------
rc_server() {
  timeout "$WAIT" ibv_rc_pingpong -d mlx5_0 -g "$GID" -n 1000 -s 4096 -p 18516 > /tmp/rs 2>&1; rc=$?
  sed 's/^/GUEST-RC-SERVER: /' /tmp/rs
  if [ "$rc" = 0 ] && grep -q 'iters in' /tmp/rs; then
    ok rc_pingpong-server "$(tail -2 /tmp/rs | tr '\n' '|' | sed 's/|$//; s/|/ | /')"
  else
    bad rc_pingpong-server "exit $rc (a client within $WAIT s?): $(tail -2 /tmp/rs | tr '\n' ' ')"
  fi
}

# --- d. 1 MiB over TCP to the unikernel's echo (5001), every byte compared ----------------------
# busybox nc half-closes when its stdin ends and leaves when the peer closes (as rxe-qemu's
# net-check does); a refused connection (the echo not listening yet) is tried again.
tcp_echo() {
  t0=$(now)
  while :; do
    timeout 120 nc "$PEER" 5001 < /tmp/out > /tmp/back 2> /tmp/nc; rc=$?
    grep -q refused /tmp/nc || break
    [ "$(since "$t0")" -ge "$WAIT" ] && break
    sleep 1
  done
  if cmp -s /tmp/out /tmp/back; then
    ok tcp-echo "1048576 bytes sent to $PEER:5001 came back intact ($(since "$t0") s)"
  else
    bad tcp-echo "$(wc -c < /tmp/back) of 1048576 bytes came back$(cmp /tmp/out /tmp/back 2>&1 | head -1 | sed 's/^/, /'), nc exit $rc $(head -1 /tmp/nc)"
  fi
}
# The stream's 1 MiB, made now: seq is slow under TCG, and the echo should not wait for it.
seq 1 200000 | head -c 1048576 > /tmp/out
step ping ping_peer
step rc_pingpong-client rc_client
step rc_pingpong-server rc_server
step tcp-echo tcp_echo

# --- Linux gives the NIC back (objects destroyed, pages reclaimed, TEARDOWN_HCA) -----------------
rm_ok=1
for m in mlx5_ib mlx5_core; do rmmod "$m" || rm_ok=0; done
e=$(dmesg | grep -c 'mlx5_cmd_out_err'); w=$(dmesg | grep -c -E 'WARNING:|BUG:|Call Trace')
if [ "$rm_ok" = 1 ] && [ "$e" = 0 ] && [ "$w" = 0 ]; then
  ok unload "rmmod mlx5_ib mlx5_core; no failed command, no kernel warning"
else
  bad unload "rmmod ok=$rm_ok, $e failed commands, $w kernel warnings"
fi
[ "$FAILED" = 0 ] || dmesg | grep -iE 'mlx5|WARNING|BUG|error' | tail -40 | sed 's/^/GUEST-DMESG: /'
echo "GUEST DONE"
poweroff -f
