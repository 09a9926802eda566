#!/bin/busybox sh
# /init of the rxe-qemu guest: Linux's soft-RoCE (rdma_rxe) on an e1000 whose wire is the
# simulated fabric (QEMU -netdev dgram), a second e1000 on slirp for the tools' out-of-band TCP
# exchange, then rdma-core's tools one after the other (servers, or clients of 10.0.2.100: the
# host through guestfwd), as the kernel command line
# lists them (rxe.tools=name:args,name:args; '+' stands for a space). Each tool writes to the
# console (a tty: line-buffered), so the host sees "local address:" when it listens; the host
# then runs its side. Prints "RXE-RUN n name", the tool's lines, "RXE-EXIT n name code".
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp
echo "RXE: up"
for m in $(cat /lib/modules/order); do
  insmod "/lib/modules/$m.ko" || echo "RXE: insmod $m FAILED"
done
# eth0: the RoCE link (MAC 52:54:00:00:00:02); eth1: slirp, the exchange.
roce=""; ctl=""
for n in /sys/class/net/eth*; do
  case $(cat "$n/address") in
    52:54:00:00:00:02) roce=$(basename "$n") ;;
    52:54:00:00:01:02) ctl=$(basename "$n") ;;
  esac
done
ip link set lo up
ip link set "$roce" up; ip addr add 198.18.0.2/24 dev "$roce"
ip link set "$ctl" up; ip addr add 10.0.2.15/24 dev "$ctl"
rdma link add rxe0 type rxe netdev "$roce" && echo "RXE: rxe0 on $roce"
for _ in $(seq 100); do
  grep -q "ffff:c612:0002" /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null &&
    grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state && break
  sleep 0.1
done
echo "RXE: gid1 $(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null) state $(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)"
tools=$(sed -n 's/.*rxe.tools=\([^ ]*\).*/\1/p' /proc/cmdline)
n=0
for t in $(echo "$tools" | tr ',' ' '); do
  n=$((n + 1))
  name=${t%%:*}; args=$(echo "${t#*:}" | tr '+' ' ')
  echo "RXE-RUN $n $name $args"
  # As a client (of the host's server, through guestfwd's 10.0.2.100 or on the RoCE link):
  # wait until the host says its server listens (10.0.2.100:18600 answers then).
  case "$args" in *10.0.2.100*|*198.18.0.1*)
    echo "RXE-GO $n $(nc 10.0.2.100 18600 </dev/null 2>&1)" ;;
  esac
  timeout 120 "$name" $args </dev/null >/dev/console 2>&1
  echo "RXE-EXIT $n $name $?"
done
echo "RXE-COUNTERS $(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/duplicate_request 2>/dev/null) duplicate requests, $(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/completer_retry_err 2>/dev/null) completer retries"
echo "RXE: done"
# The kernel's connection manager may still owe a retransmission (a DREQ lost on the faulty
# wire: rping's client has exited, the host's server still waits for it); give it time before
# the machine goes.
sleep 10
poweroff -f
