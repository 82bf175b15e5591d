#!/usr/bin/env bash
# Fills .gpu-deps/ (ignored by git) with what the GPU machine's image lacks and device_check.sh
# needs, so that it can travel with the working tree (the device tool's `carry`, 64 MiB at most):
#
#   debs/           Debian 12 packages, unpacked there into a private prefix (never into /): the
#                   build's libraries and headers (fmt, nlohmann-json, Boost headers, zlib,
#                   OpenSSL's libcrypto, OpenBLAS with libgfortran), about 28 MB
#   fashion-mnist/  the Fashion-MNIST test split (t10k, 4.4 MB) from dataset-fashion-mnist, which
#                   device_check.sh also serves as the training split: the GPU throughput of
#                   `shardlab bench model` trains fashion_mlp.json on it
#
# The GPU image has CUDA with nvcc, CMake, ninja, g++, Python with PyTorch, tensorboard and
# safetensors; no Qt, no MPI headers, no dataset, no internet. Run on a Debian 12 machine with
# apt sources: tests/gpu/fetch_deps.sh  (then carry ".gpu-deps" in the device call)
set -euo pipefail
repo=$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")/../.." && pwd -P)
dest="$repo/.gpu-deps"
PACKAGES=(
  libfmt-dev libfmt9 nlohmann-json3-dev libboost1.74-dev zlib1g-dev zlib1g libssl-dev libssl3
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5
)
mkdir -p "$dest/debs" "$dest/fashion-mnist"
(cd "$dest/debs" && apt-get download "${PACKAGES[@]}")
fm=/usr/share/datasets/fashion-mnist
for f in t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [[ -f $fm/$f ]] || { echo "fetch_deps: $fm/$f is missing (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
  cp "$fm/$f" "$dest/fashion-mnist/"
done
du -sh "$dest"
