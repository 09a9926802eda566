#!/bin/busybox sh
# net-check ADDR BYTES, in the rxe-qemu guest: the guest kernel's own IPv4 stack (its e1000 on
# the simulated wire) against `mlx5ctl net` on the host — this driver's Ethernet queues and
# smoltcp on a simulated ConnectX-5. Pings ADDR, then sends BYTES random bytes over TCP to
# ADDR:5000 (mlx5ctl net's echo service) with busybox nc and checks that every byte came back.
addr=$1; bytes=$2
ip neigh show | sed 's/^/net-check: neigh /'
# The guest starts this once the host says its side listens; a first echo reply is still
# awaited (up to 60 s) before the checked pings, as a neighbour entry may be stale.
for _ in $(seq 60); do ping -c 1 -W 1 "$addr" > /dev/null 2>&1 && break; done
ping -c 3 -W 2 "$addr" || {
  echo "net-check: no echo replies from $addr"
  ip neigh show | sed 's/^/net-check: neigh /'
  sed 's/^/net-check: dev /' /proc/net/dev
  exit 1
}
dd if=/dev/urandom of=/tmp/blob bs=1024 count=$((bytes / 1024)) 2>/dev/null
nc "$addr" 5000 < /tmp/blob > /tmp/back || echo "net-check: nc exited $?"
if cmp /tmp/blob /tmp/back; then
  echo "net-check: $bytes bytes over TCP came back intact"
else
  echo "net-check: $(wc -c < /tmp/back) of $bytes bytes came back, or not intact"
  exit 1
fi
