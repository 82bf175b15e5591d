#!/usr/bin/env bash
# A fresh machine to the demo's training: a new Debian 12 userland (debootstrap --variant=minbase,
# nothing of ShardLab's packages installed) in a chroot on this machine, a fresh clone of this
# repository in it, then `installer/bootstrap demo`, every line of its output timestamped.
# Prints the date, the machine and how long each part took: installing the packages, configuring,
# building, and the demo's first training step.
#   sudo tests/bench/fresh_demo.sh [WORK_DIR]     (needs root, debootstrap and the Debian mirror)
# WORK_DIR (default /var/tmp/shardlab-fresh-$$) is removed afterwards; the chroot's mounts are
# undone on every exit path.
set -euo pipefail
((EUID == 0)) || {
  echo "fresh_demo.sh: needs root (debootstrap, chroot, mount)" >&2
  exit 1
}
command -v debootstrap >/dev/null || {
  echo "fresh_demo.sh: debootstrap is not installed (apt-get install debootstrap)" >&2
  exit 1
}
repo=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/../.." && pwd -P)
work=${1:-/var/tmp/shardlab-fresh-$$}
root="$work/root"
log="$work/demo.log"

cleanup() {
  for m in sys dev proc; do
    mountpoint -q "$root/$m" && umount -R "$root/$m" 2>/dev/null || true
  done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
mkdir -p "$work"

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname): $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; commit $(git -C "$repo" rev-parse --short HEAD); by tests/bench/fresh_demo.sh"
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
  { tail -5 "$work/debootstrap.log" >&2; exit 1; }
# The sources a Debian 12 installation has.
printf 'deb http://deb.debian.org/debian bookworm main\ndeb http://deb.debian.org/debian bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
  >"$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
git clone -q "$repo" "$root/root/shardlab"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"

start=$(date +%s.%N)
set +e
env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
  chroot "$root" bash -c 'cd /root/shardlab && installer/bootstrap demo' 2>&1 |
  while IFS= read -r line; do
    printf '%.1f %s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$line"
  done >"$log"
status=${PIPESTATUS[0]}
set -e
((status == 0)) || {
  tail -20 "$log" >&2
  echo "fresh_demo.sh: installer/bootstrap demo failed (status $status)" >&2
  exit 1
}

# The seconds at which a line matching the pattern first appeared.
at() { awk -v re="$1" '$0 ~ re { print $1; exit }' "$log"; }
configure=$(at '==> Configuring')
building=$(at '==> Building')
training=$(at '==> Training the demo job')
first=$(at '^[0-9.]+ step +[0-9]+/')
fetched=$(sed -n 's/^[0-9.]* Fetched \([0-9.]* [kMG]B\) in .*/\1/p' "$log" | tail -1)
[[ -n $configure && -n $building && -n $training && -n $first ]] || {
  echo "fresh_demo.sh: the demo's output lacks a step it should print; see $log:" >&2
  tail -20 "$log" >&2
  exit 1
}
echo
echo "| part | seconds |"
echo "|---|---|"
printf '| installing the Debian packages (%s downloaded) | %.0f |\n' "$fetched" "$configure"
printf '| configuring | %.0f |\n' "$(echo "$building - $configure" | bc)"
printf '| building the shardlab target | %.0f |\n' "$(echo "$training - $building" | bc)"
printf '| to the first training step | %.0f |\n' "$(echo "$first - $training" | bc)"
printf '| **from nothing to training** | **%.0f** (%.1f min) |\n' "$first" "$(echo "$first / 60" | bc -l)"
