#!/bin/sh
# Stage 2 of the soft-RoCE lab VM: runs chrooted in the host root (so the host's own kmod,
# iproute2 and rdma-core do the work), from /run/lab/stage2.sh, as "stage2.sh VM_INDEX".
# It loads the modules, sets up the network and rxe0, finds the RoCEv2 IPv4 GID index, and
# runs the lab command with /bin/sh -c in its working directory, its output on /dev/ttyS1.
# Its result goes to /run/lab/result.VM_INDEX: "exit N" or "setup-error MESSAGE".
# Every process start costs ~50-100 ms under TCG: this uses shell builtins where it can.
vm=$1
ctl=/run/lab
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
exec 9>&-
result=$ctl/result.$vm

say() { echo "labvm-stage2[vm$vm]: $*"; }
fail() {
  say "FATAL: $*"
  echo "setup-error $*" >"$result"
  exit 1
}
uptime_now() { read -r _up _ </proc/uptime; echo "$_up"; }

[ -r "$ctl/params.$vm.sh" ] || fail "no $ctl/params.$vm.sh"
# shellcheck source=/dev/null # written by labvm for this run
. "$ctl/params.$vm.sh"

# crc32_generic first: rxe needs the crc32 crypto algorithm, and the kernel's own module
# loader cannot find modules for a chrooted root.
if [ "$LAB_VMS" = 1 ]; then
  modprobe -a crc32_generic rdma_rxe rdma_ucm veth || fail "modprobe crc32_generic rdma_rxe rdma_ucm veth failed"
  ip -batch - <<EOF || fail "network setup (veth pair) failed"
link set lo up
link add veth0 type veth peer name veth1
addr add $LAB_IP/24 dev veth0
link set veth1 up
link set veth0 up
EOF
else
  modprobe -a crc32_generic rdma_rxe rdma_ucm virtio_net || fail "modprobe crc32_generic rdma_rxe rdma_ucm virtio_net failed"
  # The second link (--nics 2) is eth1, on its own /24.
  nets="$LAB_NETDEV"
  [ "${LAB_NICS:-1}" = 2 ] && nets="$nets eth1"
  for dev in $nets; do
    i=0
    until [ -e "/sys/class/net/$dev" ]; do
      i=$((i + 1))
      [ $i -le 50 ] || fail "network device $dev did not appear"
      sleep 0.1
    done
  done
  ip -batch - <<EOF || fail "network setup ($LAB_NETDEV) failed"
link set lo up
addr add $LAB_IP/24 dev $LAB_NETDEV
link set $LAB_NETDEV up
EOF
  if [ "${LAB_NICS:-1}" = 2 ]; then
    ip -batch - <<EOF || fail "network setup (eth1) failed"
addr add $LAB_IP1/24 dev eth1
link set eth1 up
EOF
  fi
fi

# gid_of RXE IP: sets $gid to the index of RXE's GID for IP, the IPv4-mapped IPv6 address
# ::ffff:a.b.c.d with type RoCE v2. The table fills asynchronously: poll.
gid_of() {
  oldifs=$IFS
  IFS=.
  set -- $2 "$1"
  IFS=$oldifs
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4")
  port=/sys/class/infiniband/$5/ports/1
  gid=""
  tries=0
  while :; do
    state=""
    read -r state <"$port/state" 2>/dev/null
    case "$state" in
      *ACTIVE*)
        i=0
        while [ $i -lt 16 ]; do
          g=""
          read -r g <"$port/gids/$i" 2>/dev/null
          if [ "$g" = "$want" ]; then
            t=""
            read -r t <"$port/gid_attrs/types/$i" 2>/dev/null
            if [ "$t" = "RoCE v2" ]; then gid=$i; break; fi
          fi
          i=$((i + 1))
        done
        ;;
    esac
    [ -n "$gid" ] && break
    tries=$((tries + 1))
    [ $tries -le 100 ] || fail "$5 has no active port with a RoCE v2 GID for $1.$2.$3.$4 (port state: ${state:-none})"
    sleep 0.1
  done
}

rdma link add rxe0 type rxe netdev "$LAB_NETDEV" || fail "rdma link add rxe0 type rxe netdev $LAB_NETDEV failed"
if [ "${LAB_NICS:-1}" = 2 ]; then
  rdma link add rxe1 type rxe netdev eth1 || fail "rdma link add rxe1 type rxe netdev eth1 failed"
fi
gid_of rxe0 "$LAB_IP"
gid0=$gid
say "rxe0 on $LAB_NETDEV ($LAB_IP) is ACTIVE, RoCE v2 IPv4 GID index $gid0, uptime $(uptime_now) s"
if [ "${LAB_NICS:-1}" = 2 ]; then
  gid_of rxe1 "$LAB_IP1"
  gid1=$gid
  say "rxe1 on eth1 ($LAB_IP1) is ACTIVE, RoCE v2 IPv4 GID index $gid1"
fi

if [ "$LAB_VMS" = 2 ]; then
  # Both VMs start their commands only when both have rxe0 up.
  other=$((1 - vm))
  : >"$ctl/ready.$vm" || fail "cannot write $ctl/ready.$vm"
  i=0
  until [ -e "$ctl/ready.$other" ]; do
    i=$((i + 1))
    [ $i -le $((LAB_BARRIER_TIMEOUT * 5)) ] || fail "vm$other did not get ready within ${LAB_BARRIER_TIMEOUT} s"
    sleep 0.2
  done
fi

cwd=$LAB_CWD
if ! cd "$cwd" 2>/dev/null; then
  say "warning: $cwd is not visible in the VM (under the VM's own /tmp, /run or /dev?); running in $LAB_SHARE"
  cwd=$LAB_SHARE
  cd "$cwd" || fail "cannot enter $cwd"
fi

ready=$(uptime_now)
echo "$ready" >"$ctl/ready-uptime.$vm"
eval "set -- $LAB_EXTRA_ENV"
if [ "$LAB_VMS" = 2 ]; then set -- "LAB_PEER_IP=$LAB_PEER_IP" "$@"; fi
if [ "${LAB_NICS:-1}" = 2 ]; then
  set -- LAB_NICS=2 LAB_RXE_DEV1=rxe1 LAB_NETDEV1=eth1 "LAB_GID_INDEX1=$gid1" "LAB_IP1=$LAB_IP1" \
    "LAB_PEER_IP1=$LAB_PEER_IP1" "$@"
fi
env -i \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/tmp TERM=dumb LANG=C.UTF-8 PWD="$cwd" \
  RDMAD_LAB=1 LAB_VMS="$LAB_VMS" LAB_VM_INDEX="$vm" LAB_RXE_DEV=rxe0 LAB_NETDEV="$LAB_NETDEV" \
  LAB_GID_INDEX="$gid0" LAB_IP="$LAB_IP" LAB_SHARE="$LAB_SHARE" LAB_RUN_ID="$LAB_RUN_ID" \
  "$@" /bin/sh -c "$LAB_CMD" </dev/null >/dev/ttyS1 2>&1
rc=$?
echo "exit $rc $ready $(uptime_now)" >"$result"
say "command exited with status $rc"
exit 0
