#!/usr/bin/env bash
# The all-reduce across hosts: ShardLab's mpi backend against raw MPI on the same 3 hosts (the
# network-namespace test cluster of tests/cluster, one rank per host), nccl-tests' bus bandwidth.
# Prints the date, the machine and the figures; the time ratio per size and the median ratio.
#   sudo tests/bench/cluster_allreduce.sh BUILD_DIR [MAX_BYTES]
set -euo pipefail
build=${1:?usage: cluster_allreduce.sh BUILD_DIR [MAX_BYTES]}
max=${2:-67108864}
here=$(dirname "$(readlink -f "$0")")
cluster="$here/../cluster/netns_cluster.sh"
shardlab=$(readlink -f "$build/engine/cli/shardlab")
name="cb$$"
export SHARDLAB_CLUSTER_OWNER=$$
subnet=$(bash "$cluster" up "$name" 3)
trap 'bash "$cluster" down "$name" >/dev/null 2>&1 || true' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname): $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; 3 namespace hosts on one bridge ($subnet.0/24)"
out=$(mktemp)
bash "$cluster" exec "$name" 0 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_plm_rsh_agent="$(bash "$cluster" agent "$name")" \
  OMPI_MCA_oob_tcp_if_include="$subnet.0/24" OMPI_MCA_btl_tcp_if_include="$subnet.0/24" \
  OMPI_MCA_btl=tcp,self OPENBLAS_NUM_THREADS=1 \
  mpirun --host h0,h1,h2 -np 3 "$shardlab" bench comm --backend mpi --ops all_reduce \
  --min-bytes 65536 --max-bytes "$max" --rounds 10 --json >"$out" 2>/dev/null
python3 - "$out" <<'PY'
import json, statistics, sys
doc = json.load(open(sys.argv[1]))
rows = [r for r in doc["rows"] if r["op"].replace("-", "_") == "all_reduce"]
ours = {r["bytes"]: r for r in rows if r["backend"] == "mpi"}
raw = {r["bytes"]: r for r in rows if r["backend"] != "mpi"}
if not ours or not raw:
    sys.exit(f"no all-reduce rows for both backends: {sorted({(r['backend'], r['op']) for r in doc['rows']})}")
print(f"{'bytes':>10} {'mpi busbw GB/s':>15} {'raw busbw GB/s':>15} {'time ratio':>10}")
ratios = []
for b in sorted(ours):
    if b not in raw: continue
    if b < 1 << 20: continue  # below 1 MiB the time is the namespaces' latency, not bandwidth
    ratio = ours[b]["seconds"] / raw[b]["seconds"]
    ratios.append(ratio)
    print(f"{b:>10} {ours[b]['busbw_gb_per_second']:>15.3f} {raw[b]['busbw_gb_per_second']:>15.3f} {ratio:>10.3f}")
print(f"median time ratio (mpi backend / raw MPI): {statistics.median(ratios):.3f} over {len(ratios)} sizes from 1 MiB")
PY
rm -f "$out"
