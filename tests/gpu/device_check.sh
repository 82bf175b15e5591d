#!/usr/bin/env bash
# The GPU node check: one script for a machine with an NVIDIA GPU, CUDA (nvcc) and Python with
# PyTorch, no Qt and no internet. It configures ShardLab without the app and the Qt suites,
# builds the CLI for this GPU's architecture, runs `shardlab doctor --device cuda` (every CUDA
# kernel against its CPU reference, the engine's model on the GPU against the CPU model, GPU
# training against CPU training under the --verify rule: one process, ddp over NCCL, ddp, zero1,
# zero2 and fsdp with 4 ranks sharing the GPU, the GPT as tp 2 x dp 2 and pp 2 x dp 2, a
# checkpoint saved on the GPU resumed on the CPU; the device-memory ledger against the planner,
# NCCL on the local GPUs), the demo job and the 3D example on the GPU with --verify, the GPU benches and their PyTorch peers on the same GPU (tests/bench/pytorch_gpu.py,
# which imports its GPT from tests/bench/torch_peers.py beside it: run from the tree, never copied
# alone), and reads a TensorBoard export and a safetensors model file back with the official
# packages (tests/gpu/ecosystem_check.py). Everything goes to OUTDIR: device_check.json (one
# document with every stage's status and figures) and device_check.log (all output).
#
#   tests/gpu/device_check.sh OUTDIR        (exit 0 when every stage passed)
#
# What must travel with the tree: .gpu-deps/, made by tests/gpu/fetch_deps.sh on a Debian 12
# machine (Debian packages the image lacks, unpacked here into $TMPDIR (default /tmp)/shardlab-gpu-prefix, never
# into /; the Fashion-MNIST test split). About 33 MB, under the 64 MiB the device tool carries.
# A second run on the same machine reuses build-gpu/ (ninja rebuilds only what changed).
# Budget: about 8 minutes on 16 cores, most of it the first build (about 2 minutes).
#
# SHARDLAB_BIN=PATH skips the dependencies, configure and build and runs every stage with that
# shardlab; the Fashion-MNIST split then comes from /usr/share/datasets/fashion-mnist when
# .gpu-deps/ is absent. tst_doctor runs it so on a CPU-only node with the build's own shardlab:
# the GPU stages fail there, and every stage's JSON must still reach device_check.json.
# Progress lines (say) go to stderr: a stage's stdout is its JSON document.
set -uo pipefail
out=${1:?usage: tests/gpu/device_check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
repo=$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")/../.." && pwd -P)
log="$out/device_check.log"
# Each stage's own JSON and the stage table go to $res; OUTDIR receives the two files above.
tmp=${TMPDIR:-/tmp}  # the scratch folders below: res, prefix, fm, work
res=$tmp/shardlab-device-results
rm -rf "$res"
mkdir -p "$res"
stages="$res/stages.tsv"
: >"$log"
: >"$stages"
exec > >(tee -a "$log") 2>&1

started=$(date +%s)
say() { printf '\n==> [%4ss] %s\n' "$(($(date +%s) - started))" "$*" >&2; }
# stage NAME TIMEOUT COMMAND...: runs it with a time limit, records pass/fail and seconds.
stage() {
  local name=$1 limit=$2
  shift 2
  say "$name: $*"
  local t0 rc
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" >>"$stages"
  say "$name: exit $rc after $(($(date +%s) - t0)) s"
  return $rc
}

say "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader || true
nvcc --version | tail -2 || true
cmake --version | head -1; g++ --version | head -1; nproc
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))' || true
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
[[ $cc =~ ^[0-9]+$ ]] || cc=90

# --- dependencies: Debian packages unpacked into a private prefix ---
prefix=$tmp/shardlab-gpu-prefix
if [[ -n ${SHARDLAB_BIN:-} ]]; then
  say "dependencies, configure and build skipped: SHARDLAB_BIN=$SHARDLAB_BIN"
elif [[ ! -f $prefix/.unpacked ]]; then
  mkdir -p "$prefix"
  for deb in "$repo"/.gpu-deps/debs/*.deb; do dpkg-deb -x "$deb" "$prefix" || echo "could not unpack $deb"; done
  touch "$prefix/.unpacked"
fi
lib=$prefix/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread:${LD_LIBRARY_PATH:-}"
export LIBRARY_PATH="$lib:$lib/openblas-pthread:${LIBRARY_PATH:-}"
# Debian's multiarch headers (OpenSSL's opensslconf.h and configuration.h) are under
# include/x86_64-linux-gnu, which OPENSSL_INCLUDE_DIR (one folder) does not cover.
export CPATH="$prefix/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
# NCCL: the toolkit's, else the one PyTorch's wheels bring.
nccl_args=()
if [[ ! -f /usr/local/cuda/include/nccl.h ]]; then
  ncdir=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  if [[ -n $ncdir && -f $ncdir/include/nccl.h ]]; then
    ncl=$(ls "$ncdir"/lib/libnccl.so* | head -1)
    nccl_args=(-DSHARDLAB_NCCL_INCLUDE_DIR="$ncdir/include" -DSHARDLAB_NCCL_LIBRARY="$ncl")
    export LD_LIBRARY_PATH="$ncdir/lib:$LD_LIBRARY_PATH"
  fi
fi
# The Fashion-MNIST test split serves as both splits (throughput only; the doctor needs no data).
fm=$tmp/shardlab-fashion-mnist
mkdir -p "$fm"
src="$repo/.gpu-deps/fashion-mnist"
[[ -d $src ]] || src=/usr/share/datasets/fashion-mnist
cp "$src/t10k-images-idx3-ubyte.gz" "$fm/t10k-images-idx3-ubyte.gz" 2>/dev/null
cp "$src/t10k-labels-idx1-ubyte.gz" "$fm/t10k-labels-idx1-ubyte.gz" 2>/dev/null
cp "$fm/t10k-images-idx3-ubyte.gz" "$fm/train-images-idx3-ubyte.gz" 2>/dev/null
cp "$fm/t10k-labels-idx1-ubyte.gz" "$fm/train-labels-idx1-ubyte.gz" 2>/dev/null

build="$repo/build-gpu"
if [[ -n ${SHARDLAB_BIN:-} ]]; then
  sl=$SHARDLAB_BIN
else
stage configure 300 cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSHARDLAB_WITH_GUI=OFF -DSHARDLAB_BUILD_TESTS=OFF -DSHARDLAB_WITH_MPI=OFF \
  -DSHARDLAB_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$cc" \
  -DCMAKE_PREFIX_PATH="$prefix/usr" -Dfmt_DIR="$lib/cmake/fmt" \
  -Dnlohmann_json_DIR="$prefix/usr/share/cmake/nlohmann_json" \
  -DBoost_INCLUDE_DIR="$prefix/usr/include" -DBoost_NO_SYSTEM_PATHS=ON -DBoost_NO_BOOST_CMAKE=ON \
  -DZLIB_INCLUDE_DIR="$prefix/usr/include" -DZLIB_LIBRARY="$lib/libz.a" \
  -DOPENSSL_ROOT_DIR="$prefix/usr" -DOPENSSL_INCLUDE_DIR="$prefix/usr/include" \
  -DOPENSSL_CRYPTO_LIBRARY="$lib/libcrypto.so" \
  -DBLAS_LIBRARIES="$lib/openblas-pthread/libopenblas.so" \
  -DSHARDLAB_CBLAS_INCLUDE="$prefix/usr/include/x86_64-linux-gnu/openblas-pthread" \
  "${nccl_args[@]}" || { say "configure failed"; }
stage build 420 cmake --build "$build" -j"$(nproc)" --target shardlab
sl="$build/engine/cli/shardlab"
fi
export SHARDLAB_RESOURCE_DIR="$repo/resources"
jobs="$repo/resources/jobs"
work=$tmp/shardlab-device-work
rm -rf "$work"; mkdir -p "$work"

if [[ -x $sl ]]; then
  stage info 60 "$sl" info
  stage doctor 300 "$sl" doctor --device cuda --json >"$res/doctor.json"
  stage bench_optimizer 120 "$sl" bench optimizer --device cuda --json >"$res/bench_optimizer.json"
  cat "$res/bench_optimizer.json"
  stage bench_model 180 "$sl" bench model --device both --data "$fm" --json >"$res/bench_model.json"
  cat "$res/bench_model.json"
  stage bench_model_gpu 240 "$sl" bench model --gpu-shapes --data "$fm" --json >"$res/bench_model_gpu.json"
  cat "$res/bench_model_gpu.json"
  # The same job on the CPU (twice: a safetensors and a native model file of one deterministic
  # run) and on the GPU (safetensors and a recording), 60 steps of ddp on one rank (so that
  # --save-model applies), for ecosystem_check.py.
  common=(--set parallel.strategy=ddp --set parallel.world_size=1 --set parallel.backend=threads
    --set train.steps=60 --set train.eval_every=0 --set train.log_every=20 --set train.threads=1)
  for job in fashion_mlp chars_gpt; do
    d=()
    [[ $job == fashion_mlp ]] && d=(--set data.path="$fm")
    stage "run_${job}_cpu" 180 "$sl" run "$jobs/$job.json" "${common[@]}" "${d[@]}" --set device=cpu \
      --save-model "$work/${job}_cpu.safetensors" --no-record
    stage "run_${job}_cpu_native" 180 "$sl" run "$jobs/$job.json" "${common[@]}" "${d[@]}" --set device=cpu \
      --save-model "$work/${job}_cpu.slmodel" --no-record --quiet
    stage "run_${job}_cuda" 180 "$sl" run "$jobs/$job.json" "${common[@]}" "${d[@]}" --set device=cuda \
      --save-model "$work/${job}_cuda.safetensors" --record "$work/${job}_cuda.slrec" --force
  done
  stage run_cuda_ddp_verify 240 "$sl" run "$jobs/chars_gpt.json" "${common[@]}" --set device=cuda \
    --set train.steps=40 --quiet --verify
  # The engine's strategies with ranks sharing the GPU, against one process: the demo job as it
  # ships (ZeRO-2 on 4 ranks) and the 3D example (pp 2 x tp 2 x dp 2, 8 ranks).
  stage run_cuda_zero2_shared_verify 180 "$sl" run "$jobs/fashion_mlp.json" --set data.path="$fm" \
    --set device=cuda --set train.steps=30 --set train.eval_every=0 --set train.log_every=10 \
    --no-record --quiet --verify
  stage run_cuda_3d_verify 180 "$sl" run "$jobs/gpt-3d.json" --set device=cuda --set train.steps=20 \
    --set train.eval_every=0 --set train.log_every=10 --no-record --quiet --verify
fi
if [[ -f $repo/tests/gpu/ecosystem_check.py ]]; then
  stage ecosystem 180 python3 "$repo/tests/gpu/ecosystem_check.py" --shardlab "$sl" --work "$work" \
    --json "$res/ecosystem.json"
fi
if [[ -f $repo/tests/bench/pytorch_gpu.py ]]; then
  stage pytorch_peers 240 env PYTHONUNBUFFERED=1 python3 "$repo/tests/bench/pytorch_gpu.py" \
    --corpus "$repo/resources/corpus" --json "$res/pytorch_gpu.json"
fi

say "summary"
python3 - "$stages" "$res" "$out" <<'PY'
import json, os, platform, subprocess, sys, datetime
stages = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
res, out = sys.argv[2], sys.argv[3]
def load(name):
    p = os.path.join(res, name)
    try:
        return json.load(open(p))
    except Exception as e:
        return None
try:
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
except OSError as e:
    gpu = f"none: {e}"
doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(), "gpu": gpu,
       "stages": [{"name": n, "exit": int(rc), "seconds": int(s)} for n, rc, s in stages]}
for k in ("doctor", "bench_optimizer", "bench_model", "bench_model_gpu", "ecosystem", "pytorch_gpu"):
    doc[k] = load(k + ".json")
json.dump(doc, open(os.path.join(out, "device_check.json"), "w"), indent=1)
failed = [s["name"] for s in doc["stages"] if s["exit"] != 0]
print("stages:", ", ".join(f'{s["name"]}={s["exit"]} ({s["seconds"]} s)' for s in doc["stages"]))
print("FAILED:" if failed else "all stages passed", " ".join(failed))
sys.exit(1 if failed else 0)
PY
