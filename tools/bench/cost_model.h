#pragma once
// The least a network's forward pass can cost, from its traced graph: the bytes it must move and
// the multiply-add FLOPs it must do. `mf bench` divides them by the measured bandwidth and GEMM
// rate to say how close a cell runs to what the hardware allows (a roofline).
//
//   bytes = every graph parameter (input, weights, captured tensors) read once
//           + every graph output written once
//   flops = sum over matmul / batch_matmul nodes of 2 * numel(output) * K
//           + sum over conv2d nodes of 2 * numel(output) * (C_in / groups) * kh * kw
//           (elementwise, reduction and pooling work is not counted: it hides under the bytes)
//   bound = max(bytes / bandwidth, flops / gemm_rate)
//
// So elementwise (8,388,608 floats) is bound by 2 * 8,388,608 * 4 bytes, layernorm and softmax by
// reading and writing (4096, 1024) floats once (layernorm adds its 2 x 1024 gamma/beta), and mlp,
// cnn and transformer by their GEMM and convolution FLOPs.

#include <string>

#include "ir/graph.h"
#include "runtime/machine_limits.h"

namespace mf::tools::bench {

// The machine's limits are measured by the runtime (the profiler judges kernels by them too).
using runtime::HardwareProbe;
using runtime::HardwareRates;
using runtime::measure_hardware;
using runtime::triad_bytes_per_array;

struct NetCost {
  double bytes = 0;
  double flops = 0;
};

// Walks `graph` and, through control-flow attributes, its subgraphs (a call's callee once per call
// site; both branches of a cond; one trip of a while body).
NetCost minimal_cost(const ir::Graph& graph);

// The roofline time of `cost` at `rates`, and which side binds ("memory" or "compute").
struct Bound {
  double seconds = 0;
  std::string kind;
};
Bound roofline_bound(const NetCost& cost, const HardwareRates& rates);

}  // namespace mf::tools::bench
