#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) and runs each one for a fixed time.
#
#   tools/fuzz.sh [--seconds N] [--regression] [--build-dir DIR] [TARGET...]
#
# --seconds N     fuzz each target N seconds (default 60); new inputs go to DIR/fuzz/work/TARGET,
#                 crashes to DIR/fuzz/findings/ (copy them into fuzz/corpus/TARGET/ with the fix)
# --regression    no fuzzing: run each target once over its committed corpus (seeds and every
#                 past finding) under ASan+UBSan and stop. CI does not run this by default (a second,
#                 sanitized build does not fit its time budget): CI replays the same corpora with
#                 the ordinary build (ctest's fuzz_replay.*), and runs this only when
#                 MF_CI_FUZZ_SECONDS is set
# TARGET...       a subset (default: every fuzz/*_fuzz.cc)
#
# Needs clang-16 and libclang-rt-16-dev (tools/install-deps.sh installs them). Exit 1 when any
# target crashed, leaked, timed out or broke a promise (fuzz/fuzz_support.h).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
regression=0
build_dir=build-fuzz
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --regression) regression=1; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzz.cc; do targets+=("$(basename "$f" .cc)"); done
fi

if ! command -v clang++-16 >/dev/null; then
  echo "fuzz.sh: clang++-16 is missing; run tools/install-deps.sh" >&2
  exit 2
fi
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  CC=clang-16 CXX=clang++-16 cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMODEFLOW_FUZZ=ON -DMODEFLOW_BUILD_TESTS=OFF -DMODEFLOW_BUILD_BENCHMARKS=OFF >/dev/null
fi
cmake --build "$build_dir" -j2 --target "${targets[@]}"

# Every input at most 10 s and 2 GiB; inputs up to 64 KiB (larger seeds are still read whole).
common=(-timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1)
failed=()
for t in "${targets[@]}"; do
  bin="$build_dir/fuzz/$t"
  corpus="fuzz/corpus/$t"
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  findings="$build_dir/fuzz/findings"
  mkdir -p "$findings"
  if [ "$regression" -eq 1 ]; then
    echo "== $t: regression corpus ($(ls "$corpus" | wc -l) inputs)"
    "$bin" "${common[@]}" -runs=0 "$corpus" >"$findings/$t.log" 2>&1 || failed+=("$t")
  else
    work="$build_dir/fuzz/work/$t"
    mkdir -p "$work"
    echo "== $t: fuzzing ${seconds}s"
    "$bin" "${common[@]}" "${dict[@]}" -max_total_time="$seconds" \
      -artifact_prefix="$findings/$t-" "$work" "$corpus" >"$findings/$t.log" 2>&1 || failed+=("$t")
  fi
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|Done)" "$findings/$t.log" |
    tr '\n' ' ' || true
  echo
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]}; logs and inputs under $build_dir/fuzz/findings/" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets clean"
