#!/usr/bin/env bash
# Data-parallel measurements on this host, from a built tree (default build/):
#  1. all-reduce bandwidth of 2 workers: modeflow's Communicator against Gloo called directly;
#  2. the training step of mlp and lenet5 (global batch 64): 2 workers x 1 thread against
#     1 process x 2 threads, taken in turn A B A B;
#  3. the overlap with three buckets (all_reduce_fusion_config=[2, 4]) in both modes.
set -euo pipefail
build=${1:-build}
mf=$build/mf
python=/usr/bin/python3
export PYTHONPATH=$build/python
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
port=$((20000 + RANDOM % 20000))

echo "## all-reduce, 2 workers on one host"
"$mf" launch --worker_num=2 --master_port=$port --log_dir="$logs/bw" -- "$build/benchmarks/allreduce_bench"
cat "$logs/bw/worker_0.log"

echo "## training step, global batch 64"
for mode in graph pynative; do
  for net in mlp lenet5; do
    for round in 1 2; do
      port=$((port + 1))
      OMP_NUM_THREADS=2 $python benchmarks/distributed/dp_step.py --net $net --mode $mode --threads 2
      "$mf" launch --worker_num=2 --master_port=$port --log_dir="$logs/$mode$net$round" -- \
        env OMP_NUM_THREADS=1 $python benchmarks/distributed/dp_step.py --net $net --mode $mode --threads 1
      grep median "$logs/$mode$net$round/worker_0.log"
    done
  done
done

echo "## overlap, three buckets, 2 workers x 1 thread"
for mode in graph pynative; do
  for net in mlp lenet5; do
    port=$((port + 1))
    "$mf" launch --worker_num=2 --master_port=$port --log_dir="$logs/overlap$mode$net" -- \
      env OMP_NUM_THREADS=1 $python benchmarks/distributed/dp_step.py --net $net --mode $mode \
      --threads 1 --fusion 2,4
    grep median "$logs/overlap$mode$net/worker_0.log"
  done
done
