#pragma once
// The compile entry point: runs the pass pipeline that the options select (passes/pass_table.cc
// holds the table), dumping between passes as save_graphs asks, then plans memory and returns the
// optimized graph with its runtime::Plan.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/compile_options.h"
#include "runtime/plan.h"

namespace mf::passes {

// What one pass did, for logs, dumps (save_graphs >= 2) and `mf run` reports.
struct PassRecord {
  std::string name;  // "constant-folding"
  bool changed = false;
  double millis = 0;
  std::string summary;  // "2 nodes removed, 1 rewritten"
};

struct CompiledGraph {
  std::unique_ptr<ir::Graph> graph;
  std::shared_ptr<const runtime::Plan> plan;
  std::vector<PassRecord> passes;
  std::vector<std::filesystem::path> dump_files;  // in the order written
  // A symbolic compile's text (ir/symbolic_graph.h), stored with `graph` at the probe's sizes.
  std::string symbolic_text;
};

// Throws mf::Error; an error inside a pass carries "in pass 'name'" context.
CompiledGraph compile(std::unique_ptr<ir::Graph> graph, const CompileOptions& options);

}  // namespace mf::passes
