#!/usr/bin/env bash
# Runs one libFuzzer target for a ctest entry (tests/fuzz/fuzz_tests.cmake):
#   run_fuzzer.sh WORK FUZZER ARTIFACT_PREFIX [libFuzzer flags...] -- [SEED_DIR...]
# WORK is emptied and made the first corpus directory (libFuzzer writes new inputs there), so
# every run starts from the seeds alone; seed directories that do not exist are left out. A crash
# input is kept as ARTIFACT_PREFIX{crash,leak,oom,timeout}-<sha1>. The exit status is libFuzzer's.
set -u
work=$1 fuzzer=$2 prefix=$3
shift 3
flags=()
while [[ $# -gt 0 && $1 != -- ]]; do
  flags+=("$1")
  shift
done
[[ $# -gt 0 ]] && shift
dirs=("$work")
for d in "$@"; do
  [[ -d $d ]] && dirs+=("$d")
done
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
exec "$fuzzer" "${flags[@]}" -artifact_prefix="$prefix" "${dirs[@]}"
