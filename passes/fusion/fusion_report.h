#pragma once
// What a fusion pass did and why, for graph_kernel_dump/ (save_graphs >= 2 or --dump_as_text):
// every fused kernel (members, rule, level, memory traffic saved) and every candidate that was
// not fused, with the reason.

#include <cstdint>
#include <string>
#include <vector>

#include "passes/compile_options.h"

namespace mf::passes::fusion {

struct FusedKernelRecord {
  std::string graph;  // the graph it is in ("main")
  std::string body;   // its body subgraph ("fused_3"), or a fused op ("matmul_bias#4")
  std::vector<std::string> members;  // "mul#12", in topological order
  std::string rule;                  // "elementwise chain with a reduce tail"
  int level = 1;                     // the opt_level that enabled the rule
  int64_t bytes_saved = 0;           // intermediate bytes no longer written and read back
  std::string kernel;                // FusedKernel::describe()
};

struct RejectionRecord {
  std::string graph;
  std::string candidate;  // "reduce_sum#7"
  std::string target;     // the kernel it would have joined ("with mul#9"), or ""
  std::string reason;     // "reduce not allowed as a producer at opt_level 1"
};

// One pass's report. Promise: write() creates <dump dir>/graph_kernel_dump/ and writes (or, when
// the pass ran before in this compile, appends to) one text file named after the pass.
class FusionReport {
 public:
  FusionReport(std::string pass, const CompileOptions& options);

  bool enabled() const { return enabled_; }
  void fused(FusedKernelRecord record) { fused_.push_back(std::move(record)); }
  void rejected(RejectionRecord record) { rejected_.push_back(std::move(record)); }
  void note(std::string line) { notes_.push_back(std::move(line)); }

  std::string text() const;
  void write() const;  // no-op unless enabled()

 private:
  std::string pass_;
  const CompileOptions& options_;
  bool enabled_ = false;
  std::vector<FusedKernelRecord> fused_;
  std::vector<RejectionRecord> rejected_;
  std::vector<std::string> notes_;
};

}  // namespace mf::passes::fusion
