#include "engine/eager/pynative_recorder.h"

#include <array>
#include <chrono>
#include <mutex>
#include <sstream>
#include <vector>

#include "base/file_reader.h"
#include "base/logging.h"
#include "context/context.h"
#include "engine/engine_state.h"

namespace mf::engine {
namespace {

// The last ops submitted, oldest overwritten first.
constexpr size_t kKept = 16;

struct Ring {
  std::mutex mutex;
  std::array<std::pair<uint64_t, runtime::TaskInfo>, kKept> ops{};
  uint64_t count = 0;
};

Ring& ring() {
  static Ring* instance = new Ring();  // leaked: ops may be recorded during exit
  return *instance;
}

}  // namespace

void record_pynative_op(uint64_t seq, const runtime::TaskInfo& info) {
  Ring& r = ring();
  std::lock_guard lock(r.mutex);
  r.ops[r.count % kKept] = {seq, info};
  ++r.count;
}

std::filesystem::path report_pynative_failure(const Error& error) {
  const auto policy = current_policy();
  const context::RdrConfig& rdr = policy->rdr.value;
  if (!rdr.enable) return {};
  std::ostringstream out;
  out << "# modeflow Running Data Recorder report (PYNATIVE_MODE)\n"
      << "outcome: failed: " << error.what() << "\n"
      << "pynative_synchronize: " << (policy->pynative_synchronize.value ? "true" : "false")
      << "\n";
  const auto line = [&](uint64_t seq, std::string_view state, const runtime::TaskInfo& info) {
    out << seq << "  " << state << "  " << info.op_name << "  "
        << (info.scope.empty() ? "-" : info.scope) << "  " << info.call_site() << "\n";
  };
  // The failing op first (kept by the executor, so it is there however many ops were queued
  // after it), then the ops before it that ran, then those dropped behind it: each as what
  // happened to it.
  const std::optional<runtime::EagerExecutor::FailureRecord> failure =
      runtime::default_eager_executor().last_failure();
  std::vector<std::pair<uint64_t, runtime::TaskInfo>> recent;
  {
    Ring& r = ring();
    std::lock_guard lock(r.mutex);
    const uint64_t first = r.count > kKept ? r.count - kKept : 0;
    for (uint64_t i = first; i < r.count; ++i) recent.push_back(r.ops[i % kKept]);
  }
  out << "# seq, state, op, scope, call site\n";
  if (failure) {
    out << "# the op that failed\n";
    line(failure->failed, "failed", failure->info);
    out << "# before it, oldest first\n";
    for (const auto& [seq, info] : recent) {
      if (seq < failure->failed) line(seq, "ran", info);
    }
    out << "# after it, dropped without running\n";
    for (const auto& [seq, info] : recent) {
      if (seq > failure->failed && seq <= failure->dropped_through) line(seq, "dropped", info);
    }
  } else {
    out << "# last ops submitted, oldest first\n";
    for (const auto& [seq, info] : recent) {
      line(seq, runtime::default_eager_executor().is_done(seq) ? "ran" : "queued", info);
    }
  }
  const context::Snapshot snapshot = context::snapshot();
  out << "context: " << snapshot.values().dump() << "\n";
  const auto stamp = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  const std::filesystem::path file =
      std::filesystem::path(rdr.path) / ("rdr_pynative_" + std::to_string(stamp) + ".txt");
  try {
    std::error_code ec;
    std::filesystem::create_directories(rdr.path, ec);
    write_file_atomically(file, out.str(), "Running Data Recorder report");
  } catch (const Error& e) {
    log::warn("Running Data Recorder: {}; no report written", e.message());
    return {};
  }
  log::info("Running Data Recorder wrote {}", file.string());
  return file;
}

}  // namespace mf::engine
