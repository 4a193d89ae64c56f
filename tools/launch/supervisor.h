#pragma once
// Watching the started workers of `mf launch` until every one has ended: their output into the
// logs, the time-out after a first failure (SIGTERM to the others' process groups, SIGKILL 5 s
// later), and SIGINT or SIGTERM to the launcher forwarded to every worker's group (a second one
// sends SIGKILL). When the job failed or was interrupted, what the workers left running in their
// groups is killed at the end. One thread and one poll() over every pipe and the signal pipe.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "tools/launch/signal_pipe.h"
#include "tools/launch/worker_output.h"
#include "tools/launch/worker_process.h"

namespace mf::tools::launch {

// One started worker and, once supervise() returns, how it ended.
struct Worker {
  int64_t rank = 0;
  WorkerProcess process;
  WorkerOutput output;
  // Filled in by supervise():
  bool running = true;
  int wait_status = 0;               // as waitpid gave it, once !running
  bool stopped_by_launcher = false;  // the time-out after a failure ended it
};

// A worker that did not exit 0, or that the launcher stopped.
bool failed(const Worker& worker);

struct Supervision {
  int64_t first_failed_rank = -1;  // whose failure started the time-out
  int interrupted_by = 0;          // SIGINT or SIGTERM the launcher received, else 0
};

// Returns when every worker has ended and its output is in its log.
Supervision supervise(std::vector<Worker>& workers, SignalPipe& signals,
                      std::chrono::seconds cluster_time_out);

}  // namespace mf::tools::launch
