#!/usr/bin/env bash
# A test cluster on one machine: K hosts made of network namespaces joined by a bridge, each with
# its own address, loopback, /etc/hosts view and host name (a UTS namespace per program), and an
# ssh stand-in so mpirun starts its daemons on them. How the suites use it:
# resources/docs/several-machines.md.
#
#   netns_cluster.sh up NAME K        make cluster NAME with hosts h0..h{K-1}; prints its subnet
#   netns_cluster.sh down NAME        remove it: processes, namespaces, /etc/netns entries, route
#                                     (the guardian passes the instance `up` made: never a newer one)
#   netns_cluster.sh sweep            remove every cluster whose owner process is gone
#   netns_cluster.sh exec NAME I CMD  run CMD on host I (its namespace, host name hI)
#   netns_cluster.sh link NAME I down|up    cut or restore host I's link (at the bridge)
#   netns_cluster.sh pids NAME        the processes still running in the cluster's namespaces
#   netns_cluster.sh addr NAME I      host I's address
#   netns_cluster.sh agent NAME       the ssh stand-in's path, for mpirun's plm_rsh_agent
#
# Safety, in this order: a cluster's subnet (10.213.S.0/24, S picked free by an atomic mkdir) gets
# a blackhole route in the root namespace before anything else exists, so a packet sent to it from
# outside the namespaces dies on this machine; every name carries NAME, unique per test (the
# fixture uses the test process's pid); `up` starts a guardian that runs `down` once the owner
# process (SHARDLAB_CLUSTER_OWNER, default the caller's parent) is gone, even after a SIGKILL, and
# `sweep` (run by every `up`) removes what a guardian could not. Needs root (CAP_NET_ADMIN and
# CAP_SYS_ADMIN), iproute2 and util-linux's unshare; exits 77 naming what is missing otherwise.
set -uo pipefail

state_root=/run/shardlab-test-cluster
self=$(readlink -f -- "${BASH_SOURCE[0]}")

die() {
  printf 'netns_cluster: %s\n' "$*" >&2
  exit 1
}

state() { printf '%s/%s' "$state_root" "$1"; }
host_ns() { printf '%s-h%s' "$1" "$2"; }

# Exit 77 (ctest's skip) with the reason when this process cannot make namespaces.
check_capable() {
  for tool in ip unshare; do
    command -v "$tool" >/dev/null 2>&1 || {
      echo "netns_cluster: skipped: $tool is not installed (iproute2, util-linux)" >&2
      exit 77
    }
  done
  ((EUID == 0)) || {
    echo "netns_cluster: skipped: network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)" >&2
    exit 77
  }
  local probe="shardlab-probe-$$"
  ip netns add "$probe" 2>/dev/null || {
    echo "netns_cluster: skipped: 'ip netns add' is refused here (no CAP_SYS_ADMIN in this container?)" >&2
    exit 77
  }
  ip netns delete "$probe"
}

# down NAME [INSTANCE]: with INSTANCE (the guardian's), only the cluster `up` made then, never a
# later one of the same name.
cmd_down() {
  local name=$1 instance=${2:-} dir ns subnet
  dir=$(state "$name")
  [[ -d $dir ]] || return 0
  if [[ -n $instance && $(cat "$dir/instance" 2>/dev/null) != "$instance" ]]; then return 0; fi
  # Processes first (a cut link leaves daemons and ranks behind), then namespaces, then files.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-(br|h[0-9]+)$"); do
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-(br|h[0-9]+)$"); do
    for _ in 1 2 3 4 5; do
      local pids
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [[ -z $pids ]] && break
      kill -9 $pids 2>/dev/null
      sleep 0.1
    done
    ip netns delete "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  subnet=$(cat "$dir/subnet" 2>/dev/null)
  if [[ -n $subnet ]]; then
    ip route del blackhole "$subnet.0/24" 2>/dev/null
    rmdir "$state_root/subnet-${subnet##*.}" 2>/dev/null
  fi
  rm -rf "$dir"
}

cmd_sweep() {
  [[ -d $state_root ]] || return 0
  local dir owner
  for dir in "$state_root"/*/; do
    dir=${dir%/}
    [[ -f $dir/owner ]] || continue
    owner=$(cat "$dir/owner")
    kill -0 "$owner" 2>/dev/null || cmd_down "$(basename "$dir")"
  done
}

cmd_up() {
  local name=$1 k=$2
  [[ $name =~ ^[a-z][a-z0-9]{1,9}$ ]] || die "cluster name '$name': 2-10 letters and digits"
  [[ $k =~ ^[0-9]+$ ]] && ((k >= 1 && k <= 8)) || die "host count '$k': 1 to 8"
  check_capable
  mkdir -p "$state_root"
  cmd_sweep
  local dir
  dir=$(state "$name")
  mkdir "$dir" 2>/dev/null || die "cluster $name exists already (down it first)"
  echo "${SHARDLAB_CLUSTER_OWNER:-$PPID}" >"$dir/owner"
  local instance="$$-$(date +%s%N)"
  echo "$instance" >"$dir/instance"
  # A free subnet: the mkdir is the atomic claim; the blackhole route goes in before anything.
  local s start subnet=""
  start=$((20 + $$ % 200))
  for ((i = 0; i < 200; ++i)); do
    s=$((20 + (start - 20 + i) % 200))
    if mkdir "$state_root/subnet-$s" 2>/dev/null; then
      if ip route add blackhole "10.213.$s.0/24" 2>/dev/null; then
        subnet="10.213.$s"
        break
      fi
      rmdir "$state_root/subnet-$s"
    fi
  done
  [[ -n $subnet ]] || {
    rm -rf "$dir"
    die "no free test subnet in 10.213.20-219.0/24"
  }
  echo "$subnet" >"$dir/subnet"
  echo "$k" >"$dir/hosts"
  # The guardian: outside the namespaces, it downs the cluster once the owner is gone.
  setsid bash -c "while kill -0 $(cat "$dir/owner") 2>/dev/null && [[ -d '$dir' ]]; do sleep 1; done; '$self' down '$name' '$instance'" \
    </dev/null >/dev/null 2>&1 &
  local br="$name-br"
  {
    ip netns add "$br" &&
      ip -n "$br" link set lo up &&
      ip -n "$br" link add br0 type bridge &&
      ip -n "$br" link set br0 up
  } || {
    cmd_down "$name"
    die "cannot make the bridge namespace $br"
  }
  local hosts_file="127.0.0.1 localhost"$'\n'
  for ((i = 0; i < k; ++i)); do hosts_file+="$subnet.$((10 + i)) h$i"$'\n'; done
  for ((i = 0; i < k; ++i)); do
    local ns
    ns=$(host_ns "$name" "$i")
    {
      ip netns add "$ns" &&
        ip -n "$ns" link set lo up &&
        ip link add "$name-v$i" netns "$br" type veth peer name eth0 netns "$ns" &&
        ip -n "$br" link set "$name-v$i" master br0 up &&
        ip -n "$ns" addr add "$subnet.$((10 + i))/24" dev eth0 &&
        ip -n "$ns" link set eth0 up &&
        mkdir -p "/etc/netns/$ns" &&
        printf '%s' "$hosts_file" >"/etc/netns/$ns/hosts"
    } || {
      cmd_down "$name"
      die "cannot make host h$i ($ns)"
    }
  done
  # The ssh stand-in mpirun is given: `agent [ssh options] HOST COMMAND...`.
  cat >"$dir/agent" <<EOF
#!/bin/sh
exec '$self' rsh '$name' "\$@"
EOF
  chmod +x "$dir/agent"
  echo "$subnet"
}

# HOST (h2, or its address) -> its index, from the cluster's host list.
host_index() {
  local name=$1 host=$2 subnet k
  subnet=$(cat "$(state "$name")/subnet") || return 1
  k=$(cat "$(state "$name")/hosts")
  for ((i = 0; i < k; ++i)); do
    if [[ $host == "h$i" || $host == "$subnet.$((10 + i))" ]]; then
      echo "$i"
      return 0
    fi
  done
  return 1
}

cmd_exec() {
  local name=$1 i=$2
  shift 2
  local ns
  ns=$(host_ns "$name" "$i")
  ip netns list | awk '{print $1}' | grep -qx "$ns" || die "cluster $name has no host h$i"
  exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0"; exec "$@"' "h$i" "$@"
}

# The ssh stand-in: skips ssh-style options, then runs the rest as one shell command on HOST, as
# sshd would.
cmd_rsh() {
  local name=$1
  shift
  while (($# > 0)); do
    case $1 in
      -[bcDeFIiLlmOopRSWw]) shift 2 ;;
      -*) shift ;;
      *) break ;;
    esac
  done
  (($# >= 2)) || die "rsh: expected HOST COMMAND"
  local host=$1 i
  shift
  i=$(host_index "$name" "$host") || die "rsh: cluster $name has no host '$host'"
  local ns
  ns=$(host_ns "$name" "$i")
  exec ip netns exec "$ns" unshare --uts -- sh -c "hostname h$i; $*"
}

main() {
  (($# >= 1)) || die "usage: see the header of $self"
  local cmd=$1
  shift
  case $cmd in
    up) (($# == 2)) || die "usage: up NAME K"; cmd_up "$@" ;;
    down) (($# == 1 || $# == 2)) || die "usage: down NAME [INSTANCE]"; cmd_down "$@" ;;
    sweep) cmd_sweep ;;
    exec) (($# >= 3)) || die "usage: exec NAME I CMD..."; cmd_exec "$@" ;;
    rsh) cmd_rsh "$@" ;;
    link)
      (($# == 3)) || die "usage: link NAME I down|up"
      ip -n "$1-br" link set "$1-v$2" "$3"
      ;;
    pids)
      (($# == 1)) || die "usage: pids NAME"
      for ns in $(ip netns list | awk '{print $1}' | grep -E "^$1-(br|h[0-9]+)$"); do
        ip netns pids "$ns"
      done
      ;;
    addr)
      (($# == 2)) || die "usage: addr NAME I"
      echo "$(cat "$(state "$1")/subnet").$((10 + $2))"
      ;;
    agent)
      (($# == 1)) || die "usage: agent NAME"
      echo "$(state "$1")/agent"
      ;;
    *) die "unknown command '$cmd'" ;;
  esac
}

main "$@"
