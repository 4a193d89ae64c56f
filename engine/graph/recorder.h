#pragma once
// The Running Data Recorder (env_config_path's "rdr": {enable, mode, path}): while a compiled graph
// runs it remembers the last node executed; on a failure (mode 1), or also at a normal end (mode
// 2), it writes a report to `path`: the graph being run, the last node, the memory figures and the
// context.

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>

#include "base/error.h"
#include "context/policy.h"
#include "ir/graph.h"

namespace mf::engine {

class Recorder {
 public:
  Recorder(const context::Policy& policy, const context::Snapshot& snapshot,
           const ir::Graph& graph);
  // For RunOptions::on_step; empty when the recorder is off (so executors pay nothing).
  std::function<void(const ir::Node&)> step_callback();
  void on_failure(const Error& error);
  void on_success();
  // The report written last by this recorder (empty if none).
  const std::filesystem::path& report_file() const { return report_file_; }

 private:
  void write(const std::string& outcome);

  bool enabled_;
  int mode_;
  std::filesystem::path dir_;
  const context::Snapshot& snapshot_;
  const ir::Graph& graph_;
  std::atomic<const ir::Node*> last_node_{nullptr};  // steps may finish on several threads
  std::filesystem::path report_file_;
};

}  // namespace mf::engine
