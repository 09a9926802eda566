#!/bin/busybox sh
# /init of the linux-on-sim guest: load the mlx5 modules in dependency order, give the probe
# time, then report what the kernel made of the simulated ConnectX-5s and power off.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp
echo "GUEST: up"
for m in $(cat /lib/modules/order); do
  if insmod "/lib/modules/$m.ko"; then echo "GUEST: insmod $m"; else echo "GUEST: insmod $m FAILED"; fi
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
  for n in /sys/class/net/eth*; do
    [ -e "$n" ] && echo "GUEST-LINK $(basename "$n") operstate=$(cat "$n/operstate") carrier=$(cat "$n/carrier" 2>/dev/null)"
  done
fi
echo "GUEST: ibdevs $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"
dmesg | grep -E "mlx5|15b3" | sed 's/^/GUEST-DMESG: /'
probe=fail
dmesg | grep -q "probe of .* failed\|mlx5_init_one failed" || { ls /sys/bus/pci/drivers/mlx5_core/ 2>/dev/null | grep -q ":" && probe=ok; }
if [ -x /usr/bin/ibv_devinfo ]; then
  ibv_devinfo -v > /tmp/ibv 2>&1; echo "GUEST: ibv_devinfo exit $?"
  sed 's/^/GUEST-IBV: /' /tmp/ibv
fi
echo "GUEST-RESULT probe=$probe cmd_errors=$(dmesg | grep -c 'mlx5_cmd_out_err') warnings=$(dmesg | grep -c -E 'WARNING:|BUG:|Call Trace')"
# Unload: Linux tears the device down (objects, pages, TEARDOWN_HCA, DISABLE_HCA); the simulator
# reports its accounts when the guest is gone.
for m in mlx5_ib mlx5_core; do
  grep -q "^$m " /proc/modules && { rmmod "$m" && echo "GUEST: rmmod $m" || echo "GUEST: rmmod $m FAILED"; }
done
dmesg | grep -B3 -A4 -E 'WARNING:|BUG:' | sed 's/^/GUEST-WARN: /'
echo "GUEST-UNLOAD cmd_errors=$(dmesg | grep -c 'mlx5_cmd_out_err') warnings=$(dmesg | grep -c -E 'WARNING:|BUG:|Call Trace')"
poweroff -f
