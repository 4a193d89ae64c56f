#!/usr/bin/env bash
# Installs every Debian 12 package modeflow needs to build and test, and nothing that is already there.
# Safe to run again: it asks apt-get only for what dpkg does not list as installed.
set -euo pipefail

packages=(
  build-essential cmake ccache clang-format
  libeigen3-dev libtbb-dev libprotobuf-dev protobuf-compiler
  libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libxbyak-dev libdnnl-dev
  libonnx-testdata
  # Data sets: zlib reads the gzip-compressed IDX files of Debian's Fashion-MNIST package.
  zlib1g-dev dataset-fashion-mnist
  # Collectives of data-parallel training (Gloo over TCP).
  libgloo-dev
  pybind11-dev python3-dev python3-numpy python3-pytest
  # Fuzzing (tools/fuzz.sh, -DMODEFLOW_FUZZ=ON): Clang 16 with libFuzzer and the sanitizer runtimes.
  # Clang 14, Debian's default, cannot compile this C++20 (structured bindings captured by lambdas,
  # libstdc++ 12's ranges).
  clang-16 libclang-rt-16-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
