#!/bin/busybox sh
# /init of the throw-away guest (tests/vfio-qemu/run.sh): load the vfio modules, hand the PCI
# functions listed in `vfiotest.ids=VVVV:DDDD,...` (kernel command line) to vfio-pci, run
# /vfio-test with their addresses, print `GUEST-RESULT rc=N` and power off.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "GUEST: up at $(cut -d' ' -f1 /proc/uptime)s, kernel $(uname -r)"
dmesg | grep -E 'DMAR: (IOMMU enabled|Intel)|DMAR-IR: Enabled' | sed 's/^/GUEST: /'

for m in $(cat /lib/modules/order); do
  insmod "/lib/modules/$m.ko" || echo "GUEST: insmod $m failed"
done

IDS=$(sed -n 's/.*vfiotest\.ids=\([^ ]*\).*/\1/p' /proc/cmdline)
BDFS=""
for d in /sys/bus/pci/devices/*; do
  id="$(sed 's/^0x//' "$d/vendor"):$(sed 's/^0x//' "$d/device")"
  case ",$IDS," in *",$id,"*) ;; *) continue ;; esac
  bdf=${d##*/}
  [ -e "$d/driver" ] && echo "$bdf" > "$d/driver/unbind"
  echo vfio-pci > "$d/driver_override"
  echo "$bdf" > /sys/bus/pci/drivers_probe
  drv=$(basename "$(readlink "$d/driver")")
  grp=$(basename "$(readlink "$d/iommu_group")")
  echo "GUEST: $bdf ($id) driver=$drv iommu_group=$grp /dev/vfio/$grp"
  BDFS="$BDFS $bdf"
done

echo "GUEST: test starts at $(cut -d' ' -f1 /proc/uptime)s"
/vfio-test $BDFS
RC=$?
echo "GUEST: test ends at $(cut -d' ' -f1 /proc/uptime)s"
echo "GUEST-RESULT rc=$RC"
poweroff -f
