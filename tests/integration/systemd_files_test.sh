#!/usr/bin/env bash
# Checks the systemd files shipped in systemd/ with systemd's own tools:
#   * systemd-analyze verify on rdmad.service, with ExecStart pointed at the
#     binary just built (verify insists that it exists) and MANPATH at
#     docs/man (so Documentation=man:rdmad(8) man:rdmactl(8) must resolve);
#     verify exits 0 on a misspelt or ignored setting, so any output at all
#     is a failure too;
#   * the reload checks the config first (rdmad --check-config), and that
#     check passes on the shipped config;
#   * systemd-sysusers and systemd-tmpfiles applied to an empty --root, and
#     the user, group and directory they should create checked there.
#
#   systemd_files_test.sh SOURCE_DIR RDMAD_BINARY
set -euo pipefail
src="$1"
rdmad="$2"

if ! command -v systemd-analyze >/dev/null; then
  echo "SKIPPED: systemd-analyze is not installed; the unit file was NOT verified" >&2
  exit 77
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/man/man8"
cp "$src/docs/man/rdmad.8" "$src/docs/man/rdmactl.8" "$tmp/man/man8/"
sed "s#/usr/sbin/rdmad#$rdmad#g" "$src/systemd/rdmad.service" \
  > "$tmp/rdmad.service"
grep -q "ExecStart=$rdmad " "$tmp/rdmad.service"

out="$(cd "$tmp" && MANPATH="$tmp/man" SYSTEMD_LOG_LEVEL=notice \
  systemd-analyze verify "$tmp/rdmad.service" 2>&1)" || {
  echo "systemd-analyze verify failed:"; echo "$out"; exit 1; }
if [[ -n "$out" ]]; then
  echo "systemd-analyze verify complained:"; echo "$out"; exit 1
fi

# systemctl reload: the check comes before the signal, and passes on the
# config the package ships.
reloads="$(grep '^ExecReload=' "$tmp/rdmad.service")"
[[ "$(head -n 1 <<<"$reloads")" == \
   "ExecReload=$rdmad --check-config /etc/rdmad/rdmad.conf" ]] || {
  echo "the first ExecReload= is not rdmad --check-config:"; echo "$reloads"
  exit 1; }
"$rdmad" --check-config "$src/systemd/rdmad.conf" || {
  echo "rdmad --check-config fails on the shipped config"; exit 1; }
echo "reload: checks the config first; the shipped config passes"
echo "verify: rdmad.service OK"

# What the unit promises, so that an edit that drops one is noticed.
for want in Type=notify LimitMEMLOCK=infinity RuntimeDirectory=rdmad \
    ConfigurationDirectory=rdmad Restart=on-failure ProtectSystem=strict \
    NoNewPrivileges=yes "DeviceAllow=char-infiniband_verbs rw" \
    ExecReload= WatchdogSec= FileDescriptorStoreMax=; do
  grep -q "^$want" "$src/systemd/rdmad.service" || {
    echo "rdmad.service lacks $want"; exit 1; }
done
# PrivateDevices= would hide /dev/infiniband.
if grep -q '^PrivateDevices=yes' "$src/systemd/rdmad.service"; then
  echo "PrivateDevices=yes hides /dev/infiniband from rdmad"; exit 1
fi

if command -v systemd-sysusers >/dev/null; then
  root="$tmp/root"
  mkdir -p "$root/etc"
  systemd-sysusers --root="$root" "$src/systemd/rdmad.sysusers"
  grep -q '^rdma:' "$root/etc/group" || { echo "no group rdma"; exit 1; }
  grep -q '^rdmad:' "$root/etc/passwd" || { echo "no user rdmad"; exit 1; }
  gid="$(awk -F: '$1=="rdma"{print $3}' "$root/etc/group")"
  [[ "$(awk -F: '$1=="rdmad"{print $4}' "$root/etc/passwd")" == "$gid" ]] || {
    echo "user rdmad is not in group rdma"; exit 1; }
  echo "sysusers: rdma group and rdmad user OK"
  systemd-tmpfiles --root="$root" --create "$src/systemd/rdmad.tmpfiles"
  [[ -d "$root/run/rdmad" ]] || { echo "tmpfiles did not create /run/rdmad"; exit 1; }
  [[ "$(stat -c %a "$root/run/rdmad")" == 755 ]] || {
    echo "/run/rdmad mode is $(stat -c %a "$root/run/rdmad")"; exit 1; }
  echo "tmpfiles: /run/rdmad OK"
else
  echo "SKIPPED part: systemd-sysusers absent; sysusers/tmpfiles not checked" >&2
  exit 77
fi
