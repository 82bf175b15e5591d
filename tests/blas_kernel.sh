#!/bin/sh
# blas_kernel.sh CORETYPE COMMAND [ARGS...]
#
# Runs COMMAND under the OpenBLAS kernel CORETYPE (e.g. Haswell), so the numerical-exactness suites
# also run under a kernel other than the one OpenBLAS picks for this CPU. OPENBLAS_CORETYPE is
# exported as CORETYPE even when the caller already set it. A forced kernel whose instructions the
# CPU lacks dies with SIGILL, so the CPU flags are checked first (the "flags" line of /proc/cpuinfo,
# or of the file named by SHARDLAB_CPUINFO): if one is missing, or the machine is not x86-64, or
# the flags cannot be read, one line says why and the exit status is 77 (ctest SKIP_RETURN_CODE).
# An unknown CORETYPE exits 2. With SHARDLAB_CLI set (the shardlab command), it also skips when
# OpenBLAS does not really switch to CORETYPE.

if [ $# -lt 2 ]; then
  echo "usage: $0 CORETYPE COMMAND [ARGS...]" >&2
  exit 2
fi
coretype=$1
shift

# CPU flags each kernel needs (as /proc/cpuinfo names them; pni is SSE3).
case $coretype in
  Prescott) needed="pni" ;;
  Core2) needed="ssse3" ;;
  Nehalem) needed="sse4_2" ;;
  Sandybridge) needed="avx" ;;
  Haswell | Zen) needed="avx2 fma" ;;
  SkylakeX) needed="avx512f avx512bw avx512vl avx512dq" ;;
  Cooperlake) needed="avx512f avx512bw avx512vl avx512dq avx512_bf16" ;;
  *)
    echo "blas_kernel.sh: unknown OPENBLAS_CORETYPE '$coretype' (known: Prescott Core2 Nehalem" \
      "Sandybridge Haswell Zen SkylakeX Cooperlake)" >&2
    exit 2
    ;;
esac

machine=$(uname -m)
if [ "$machine" != x86_64 ]; then
  echo "skipped: OPENBLAS_CORETYPE=$coretype is an x86-64 kernel and this machine is $machine"
  exit 77
fi
cpuinfo=${SHARDLAB_CPUINFO:-/proc/cpuinfo}
flags=$(grep -m1 '^flags' "$cpuinfo" 2>/dev/null)
if [ -z "$flags" ]; then
  echo "skipped: OPENBLAS_CORETYPE=$coretype: cannot read the CPU flags from $cpuinfo"
  exit 77
fi
missing=
for f in $needed; do
  case " ${flags#*:} " in
    *" $f "*) ;;
    *) missing="$missing $f" ;;
  esac
done
if [ -n "$missing" ]; then
  model=$(grep -m1 '^model name' "$cpuinfo" | sed 's/^[^:]*: *//')
  echo "skipped: OPENBLAS_CORETYPE=$coretype needs the CPU flags $needed, which this CPU" \
    "(${model:-unknown model}) lacks:$missing"
  exit 77
fi

OPENBLAS_CORETYPE=$coretype
export OPENBLAS_CORETYPE

# OpenBLAS ignores a name it does not know, and a build without DYNAMIC_ARCH ignores the variable
# altogether; then the command would run the default kernel and prove nothing. `shardlab info`
# (SHARDLAB_CLI, set by the test registration) says which kernels the library really runs.
if [ -n "$SHARDLAB_CLI" ]; then
  running=$("$SHARDLAB_CLI" info 2>/dev/null | grep -a '^blas:' | sed -n 's/.*kernels for //p')
  want=$(printf '%s' "$coretype" | tr '[:upper:]' '[:lower:]')
  got=$(printf '%s' "$running" | tr '[:upper:]' '[:lower:]')
  if [ "$got" != "$want" ]; then
    echo "skipped: OpenBLAS did not switch to OPENBLAS_CORETYPE=$coretype: it runs the" \
      "'${running:-unknown}' kernels (a build without DYNAMIC_ARCH?)"
    exit 77
  fi
fi
exec "$@"
