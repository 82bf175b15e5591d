#!/usr/bin/env bash
# The paused-rank run that showed the straggler verdict flickering, repeated: 4 mpi ranks of the DDP demo (fashion_mlp.json) streaming to
# `shardlab monitor`, world rank 2's worker process stopped and continued every 20 ms (10 ms each)
# for the whole job, then `shardlab replay` of the monitor's recording. Per run it prints whether
# the monitor's last table names rank 2, the step of the replay's first naming, and how many times
# the history's verdict changed after it (a verdict that holds changes 0 times).
#
#   tests/bench/paused_rank_runs.sh [RUNS=5] [STEPS=20000]
#
# Needs a build in build/ and mpirun; run on an otherwise idle machine (2 cores here).
set -uo pipefail
repo=$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")/../.." && pwd -P)
sl="$repo/build/engine/cli/shardlab"
runs=${1:-5}
steps=${2:-20000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "paused_rank_runs: $(date -u +%FT%TZ) on $(hostname), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $runs runs of $steps steps"
for i in $(seq 1 "$runs"); do
  dir=$(mktemp -d)
  "$sl" monitor --listen 127.0.0.1:0 --record "$dir/run.slrec" --token-file "$dir/token" \
    --until-done --interval 1 >"$dir/monitor.out" 2>&1 &
  mon=$!
  port=""
  for _ in $(seq 1 100); do
    port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$dir/monitor.out" | head -1 | cut -d: -f2)
    [[ -n $port ]] && break
    sleep 0.1
  done
  mark="paused-$$-$i"
  SHARDLAB_TEST_MARK=$mark "$sl" run "$repo/resources/jobs/fashion_mlp.json" \
    --set parallel.strategy=ddp --set parallel.backend=mpi --set parallel.world_size=4 \
    --set train.steps="$steps" --set train.eval_every=0 --quiet \
    --telemetry "127.0.0.1:$port" --token-file "$dir/token" >"$dir/run.out" 2>&1 &
  run=$!
  # Rank 2's worker: the process whose environment holds the mark and OMPI_COMM_WORLD_RANK=2.
  pid=""
  for _ in $(seq 1 300); do
    for p in /proc/[0-9]*; do
      env_of=$({ tr '\0' '\n' <"$p/environ"; } 2>/dev/null)
      if grep -qx "SHARDLAB_TEST_MARK=$mark" <<<"$env_of" &&
        grep -qx "OMPI_COMM_WORLD_RANK=2" <<<"$env_of" &&
        { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q " worker "; then
        pid=${p#/proc/}
        break
      fi
    done
    [[ -n $pid ]] && break
    sleep 0.1
  done
  start=$(date +%s)
  # The pauser keeps its 20 ms cadence on a loaded machine: real-time priority where allowed
  # (as root), otherwise a plain loop (which the 4 busy ranks can delay).
  pauser=(bash -c 'while kill -0 "$1" 2>/dev/null; do kill -STOP "$2" 2>/dev/null; sleep 0.01;
    kill -CONT "$2" 2>/dev/null; sleep 0.01; done; kill -CONT "$2" 2>/dev/null' pauser "$run" "$pid")
  if command -v chrt >/dev/null && chrt -f 10 true 2>/dev/null; then chrt -f 10 "${pauser[@]}"; else "${pauser[@]}"; fi
  kill -CONT "$pid" 2>/dev/null
  wait "$run"
  rc=$?
  wait "$mon"
  secs=$(($(date +%s) - start))
  last=$(awk '/RANK  COORDS/{t=""} {t=t $0 "\n"} END{printf "%s", t}' "$dir/monitor.out")
  named_last=no
  grep -q "rank 2 (pp0 tp0 dp2) is slow" <<<"$last" && named_last=yes
  "$sl" replay "$dir/run.slrec" >"$dir/replay.out" 2>&1
  first=$(grep -m1 -n "^diagnosis at step [0-9]*: rank 2 " "$dir/replay.out" | sed 's/.*step \([0-9]*\):.*/\1/')
  changes=0
  if [[ -n $first ]]; then
    changes=$(awk -v f="$first" '/^diagnosis at step/{s=$4; sub(":","",s); if (s+0 > f+0) n++} END{print n+0}' "$dir/replay.out")
  fi
  sure=$(grep -o "named since step [0-9]*, the full rule held at [0-9]*% of the [0-9]* checks since" <<<"$last" | tail -1)
  echo "run $i: exit $rc, ${secs} s; last table names rank 2: $named_last; first named at step ${first:-never}; verdict changes after: $changes; ${sure:-}"
  # The history after the first naming, when it changed (at most 6 lines, cut to 160 characters).
  if ((changes > 0)); then
    awk -v f="$first" '/^diagnosis at step/{s=$4; sub(":","",s); if (s+0 > f+0) print "    " substr($0, 1, 160)}' \
      "$dir/replay.out" | head -6
  fi
  rm -rf "$dir"
done
