#include "engine/eager/pynative_recorder.h"

#include <array>
#include <chrono>
#include <mutex>
#include <sstream>

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
      << "\n# last ops queued (oldest first): seq, state, op, scope, call site\n";
  {
    Ring& r = ring();
    std::lock_guard lock(r.mutex);
    const uint64_t first = r.count > kKept ? r.count - kKept : 0;
    for (uint64_t i = first; i < r.count; ++i) {
      const auto& [seq, info] = r.ops[i % kKept];
      const bool done = runtime::default_eager_executor().is_done(seq);
      out << seq << "  " << (done ? "run (or failed)" : "queued") << "  " << info.op_name << "  "
          << (info.scope.empty() ? "-" : info.scope) << "  " << info.call_site() << "\n";
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
