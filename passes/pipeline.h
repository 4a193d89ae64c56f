#pragma once
// Pipeline: runs passes in order, verifying, timing and recording each one, and repeating
// fixed-point groups until none of their passes changes the graph.

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/compiler.h"
#include "passes/pass.h"

namespace mf::passes {

// What changed between two states of a graph tree, by node identity (ids are stable).
struct GraphDelta {
  size_t added = 0;
  size_t removed = 0;
  size_t rewritten = 0;               // same node, different op, attributes or operands
  bool outputs_or_constants = false;  // a graph's outputs rerouted, or its constants changed
  std::string summary() const;        // "2 nodes added, 1 removed, 3 rewritten" or "no change"
  bool empty() const {
    return added == 0 && removed == 0 && rewritten == 0 && !outputs_or_constants;
  }
};

// A pass run in order, alone or as part of a group that repeats to a fixed point.
// Promise: after run(), every pass that changed the graph was followed by ir::verify; an error
// names the pass it came from ("in pass 'cse'").
class Pipeline {
 public:
  // Called after every pass run with the graph as the pass left it (dumps hook in here).
  using Observer = std::function<void(const ir::Graph& graph, const PassRecord& record)>;

  static constexpr int kDefaultMaxRounds = 16;

  // A pass that runs once.
  void add(std::unique_ptr<Pass> pass);
  // Passes repeated, in order, until a whole round changes nothing or max_rounds is reached (then
  // a warning: the result is still valid, only maybe not minimal).
  void add_group(std::string group, std::vector<std::unique_ptr<Pass>> passes,
                 int max_rounds = kDefaultMaxRounds);

  void set_verify_every_pass(bool on) { verify_every_pass_ = on; }
  // Called with the graph when a pass fails or leaves an invalid graph; returns the file it wrote
  // (named in the error) or an empty path.
  using FailureWriter =
      std::function<std::filesystem::path(const ir::Graph&, std::string_view pass)>;
  void set_failure_writer(FailureWriter writer) { failure_writer_ = std::move(writer); }
  void set_observer(Observer observer) { observer_ = std::move(observer); }
  // Asked before every pass run; false skips the run (no record, no change). compile() uses it for
  // CompileOptions::stop_after_pass.
  using Filter = std::function<bool(const Pass& pass)>;
  void set_filter(Filter filter) { filter_ = std::move(filter); }

  // Runs everything; returns one record per pass run, in order.
  std::vector<PassRecord> run(ir::Graph& graph);

  // Names in order, with group names ("" for a pass that runs once).
  struct Entry {
    std::string group;
    int max_rounds = 1;
    std::vector<std::unique_ptr<Pass>> passes;
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  bool run_one(Pass& pass, ir::Graph& graph, std::vector<PassRecord>& records);

  std::vector<Entry> entries_;
  bool verify_every_pass_ = false;
  FailureWriter failure_writer_;
  Observer observer_;
  Filter filter_;
};

}  // namespace mf::passes
