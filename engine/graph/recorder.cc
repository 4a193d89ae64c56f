#include "engine/graph/recorder.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/file_reader.h"
#include "base/logging.h"
#include "ir/printer.h"
#include "runtime/memory_format.h"
#include "runtime/memory_pool.h"

namespace mf::engine {

Recorder::Recorder(const context::Policy& policy, const context::Snapshot& snapshot,
                   const ir::Graph& graph)
    : enabled_(policy.rdr.value.enable),
      mode_(policy.rdr.value.mode),
      dir_(policy.rdr.value.path),
      snapshot_(snapshot),
      graph_(graph) {}

std::function<void(const ir::Node&)> Recorder::step_callback() {
  if (!enabled_) return {};
  return [this](const ir::Node& node) { last_node_ = &node; };
}

void Recorder::on_failure(const Error& error) {
  if (enabled_) write("failed: " + std::string(error.what()));
}

void Recorder::on_success() {
  if (enabled_ && mode_ == 2) write("finished normally");
}

void Recorder::write(const std::string& outcome) {
  // A recorder that cannot write must not hide the error being recorded: it warns instead of
  // throwing.
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const auto stamp = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  report_file_ = dir_ / ("rdr_" + graph_.name() + "_" + std::to_string(stamp) + ".txt");
  const ir::Node* last = last_node_.load();
  std::ostringstream out;
  const runtime::MemoryStats stats = runtime::default_pool().stats();
  out << "# modeflow Running Data Recorder report\n"
      << "graph: @" << graph_.name() << "\n"
      << "outcome: " << outcome << "\n"
      << "last node executed: " << (last ? ir::describe_node(graph_, *last) : "(none)") << "\n"
      << "last node scope: " << (last ? last->scope() : "") << "\n"
      << "memory: " << runtime::format_stats(stats) << "\n"
      << "context: " << snapshot_.values().dump() << "\n"
      << "auto_parallel_context: " << snapshot_.auto_parallel().dump() << "\n"
      << "\n# graph\n"
      << ir::print_graph(graph_);
  // Atomic (a unique temporary renamed in place) and every write checked.
  try {
    write_file_atomically(report_file_, out.str(), "Running Data Recorder report");
  } catch (const Error& e) {
    log::warn("Running Data Recorder: {}; no report written", e.message());
    report_file_.clear();
    return;
  }
  log::info("Running Data Recorder wrote {}", report_file_.string());
}

}  // namespace mf::engine
