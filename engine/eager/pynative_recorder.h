#pragma once
// The Running Data Recorder for PYNATIVE_MODE (env_config_path's "rdr"): remembers the last ops
// submitted to the eager queue and, when a PYNATIVE failure reaches the user (at the call with
// pynative_synchronize, else at the next sync point), writes a report to rdr.path: the error, the
// last ops queued with their scopes and call sites and whether each has run, and the context.

#include <cstdint>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "runtime/eager_executor.h"

namespace mf::engine {

// Called for every op submitted in PYNATIVE mode (cheap: a slot in a small ring).
void record_pynative_op(uint64_t seq, const runtime::TaskInfo& info);

// Writes the report when the context's rdr is enabled; returns its path (empty when off or when it
// could not be written, which is logged: a recorder never hides the error it records).
std::filesystem::path report_pynative_failure(const Error& error);

// Runs `body` (a submit or a sync point) and reports an mf::Error it throws before rethrowing it.
template <typename Body>
decltype(auto) with_pynative_recorder(Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    report_pynative_failure(e);
    throw;
  }
}

}  // namespace mf::engine
