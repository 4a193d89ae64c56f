#!/usr/bin/env bash
# Installs the peers that benchmarks/compare/ measures modeflow against, and nothing that is already
# there: Debian's PyTorch, torchvision, NumPy and ONNX (to export the models and compute reference
# outputs) and the npm package onnxruntime-node (ONNX Runtime, the engine compared with).
#
# The build and the test suite never need any of this: only benchmarks/compare/ does.
#
# onnxruntime-node goes into the cache directory, never into the repository:
#   $MODEFLOW_PEERS_CACHE, else ~/.cache/modeflow-peers   (or --cache DIR)
# Safe to run again. Exits non-zero, saying what is missing, when something cannot be had.
set -euo pipefail

cache="${MODEFLOW_PEERS_CACHE:-$HOME/.cache/modeflow-peers}"
skip_npm=0
skip_apt=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache="$2"; shift 2 ;;
    --cache=*) cache="${1#--cache=}"; shift ;;
    --no-npm) skip_npm=1; shift ;;
    --no-apt) skip_apt=1; shift ;;
    -h|--help)
      sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
      echo "Options: --cache DIR, --no-apt (skip the Debian packages), --no-npm (skip onnxruntime-node)"
      exit 0 ;;
    *) echo "install-peers: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

fail() { echo "install-peers: $*" >&2; exit 1; }

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive

# --- Debian packages --------------------------------------------------------------------------
if [ "$skip_apt" -eq 0 ]; then
  # libopenblas0-pthread: PyTorch's matmuls through OpenBLAS (benchmarks/grad/grad_vs_torch.py
  # runs on it; the stock package resolves libblas.so.3 to the reference BLAS).
  packages=(python3-torch python3-torchvision python3-numpy python3-onnx libopenblas0-pthread)
  missing=()
  for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-peers: Debian packages present (${packages[*]})"
  else
    command -v apt-get >/dev/null || fail "apt-get not found; install ${missing[*]} by hand"
    echo "install-peers: installing ${missing[*]}"
    # A lookup fails on a machine whose package lists were never fetched: update first then.
    if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
      "${sudo_cmd[@]}" apt-get update -qq || fail "apt-get update failed"
    fi
    if ! "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
      # The lists may be stale (a package version gone from the archive): update once and retry.
      "${sudo_cmd[@]}" apt-get update -qq || fail "apt-get update failed"
      "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || fail "apt-get could not install ${missing[*]}"
    fi
  fi
  /usr/bin/python3 -c 'import torch, torchvision, numpy, onnx' \
    || fail "Debian's /usr/bin/python3 cannot import torch, torchvision, numpy and onnx"
fi

# --- onnxruntime-node -------------------------------------------------------------------------
if [ "$skip_npm" -eq 0 ]; then
  command -v node >/dev/null || fail "node not found (apt-get install nodejs npm)"
  command -v npm >/dev/null || fail "npm not found (apt-get install npm)"
  mkdir -p "$cache"
  check_ort() {
    (cd "$cache" && node -e 'require("onnxruntime-node")' >/dev/null 2>&1)
  }
  if check_ort; then
    echo "install-peers: onnxruntime-node present in $cache/node_modules"
  else
    echo "install-peers: npm install --prefix $cache onnxruntime-node"
    # The package's postinstall script (script/install.js) downloads the CUDA execution provider's
    # binaries for linux-x64 unless told to skip: its documented switch is the npm option
    # --onnxruntime-node-install=skip or, equivalently, the environment variable
    # ONNXRUNTIME_NODE_INSTALL=skip (older versions: ONNXRUNTIME_NODE_INSTALL_CUDA=skip). The
    # variables are used, as npm 11 warns that unknown command-line options will stop being passed
    # on. The CPU binaries ship inside the npm package itself; no other host is reached.
    ONNXRUNTIME_NODE_INSTALL=skip ONNXRUNTIME_NODE_INSTALL_CUDA=skip \
      npm install --prefix "$cache" --no-audit --no-fund onnxruntime-node \
      || fail "npm install onnxruntime-node failed"
    check_ort || fail "onnxruntime-node installed in $cache but node cannot load it"
  fi
  ver=$(cd "$cache" && node -p 'require("onnxruntime-node/package.json").version' 2>/dev/null || echo '?')
  echo "install-peers: onnxruntime-node $ver in $cache/node_modules"
fi

echo "install-peers: done (cache: $cache)"
