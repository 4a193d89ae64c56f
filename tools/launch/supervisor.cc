#include "tools/launch/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>

namespace mf::tools::launch {
namespace {

using Clock = std::chrono::steady_clock;

// How long a worker has between the launcher's SIGTERM and its SIGKILL.
constexpr std::chrono::seconds kKillGrace{5};

// Reads what the worker's pipe holds now; closes the pipe at its end.
void drain(Worker& worker) {
  char buffer[16384];
  while (worker.process.output.valid()) {
    const ssize_t n = ::read(worker.process.output.get(), buffer, sizeof(buffer));
    if (n > 0) {
      worker.output.take({buffer, size_t(n)});
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {  // the end, or an error that no later read would cure
      worker.output.finish();
      worker.process.output.reset();
    }
  }
}

void signal_running(std::vector<Worker>& workers, int sig) {
  for (Worker& w : workers) {
    if (w.running) ::kill(-w.process.pid, sig);
  }
}

// Until the earlier deadline; -1 (no time-out) when there is none.
int poll_timeout_ms(std::optional<Clock::time_point> a, std::optional<Clock::time_point> b) {
  if (!a && !b) return -1;
  const Clock::time_point deadline = a && b ? std::min(*a, *b) : a ? *a : *b;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return int(std::clamp<int64_t>(left.count(), 0, 60'000));
}

}  // namespace

bool failed(const Worker& worker) {
  return worker.stopped_by_launcher || !WIFEXITED(worker.wait_status) ||
         WEXITSTATUS(worker.wait_status) != 0;
}

Supervision supervise(std::vector<Worker>& workers, SignalPipe& signals,
                      std::chrono::seconds cluster_time_out) {
  Supervision result;
  std::optional<Clock::time_point> stop_at, kill_at;
  bool maybe_ended = true;  // a SIGCHLD may have come before the first poll
  std::vector<pollfd> fds;
  std::vector<Worker*> polled;
  for (;;) {
    if (maybe_ended) {
      maybe_ended = false;
      for (Worker& w : workers) {
        if (!w.running || ::waitpid(w.process.pid, &w.wait_status, WNOHANG) != w.process.pid) {
          continue;
        }
        w.running = false;
        if (failed(w) && result.first_failed_rank < 0) {
          result.first_failed_rank = w.rank;
          stop_at = Clock::now() + cluster_time_out;
        }
      }
    }
    if (std::none_of(workers.begin(), workers.end(), [](const Worker& w) { return w.running; })) {
      break;
    }
    if (stop_at && Clock::now() >= *stop_at) {
      stop_at.reset();
      const std::string why =
          "mf launch: worker " + std::to_string(result.first_failed_rank) +
          " failed and --cluster_time_out=" + std::to_string(cluster_time_out.count()) +
          " s passed: SIGTERM to this worker's process group";
      for (Worker& w : workers) {
        if (!w.running) continue;
        w.stopped_by_launcher = true;
        w.output.note(why);
      }
      signal_running(workers, SIGTERM);
      kill_at = Clock::now() + kKillGrace;
    }
    if (kill_at && Clock::now() >= *kill_at) {
      kill_at.reset();
      signal_running(workers, SIGKILL);
    }

    fds.assign(1, pollfd{signals.fd(), POLLIN, 0});
    polled.clear();
    for (Worker& w : workers) {
      if (!w.process.output.valid()) continue;
      fds.push_back({w.process.output.get(), POLLIN, 0});
      polled.push_back(&w);
    }
    const int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms(stop_at, kill_at));
    if (ready <= 0) continue;  // a deadline, or EINTR
    if (fds[0].revents != 0) {
      for (const int sig : signals.take()) {
        if (sig == SIGCHLD) {
          maybe_ended = true;
        } else if (sig == SIGINT || sig == SIGTERM) {
          // The first is passed on for the workers to end as they choose; a second insists.
          signal_running(workers, result.interrupted_by == 0 ? sig : SIGKILL);
          if (result.interrupted_by == 0) result.interrupted_by = sig;
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) drain(*polled[i - 1]);
    }
  }
  // An ended worker's last output is in its pipe already; a process it left behind may hold the
  // pipe open, so take what is there without waiting for the end.
  for (Worker& w : workers) {
    drain(w);
    w.output.finish();
  }
  // A failed or interrupted job leaves nothing running: what a worker started in the background
  // is still in its process group (whose id stays reserved while it has members).
  if (result.first_failed_rank >= 0 || result.interrupted_by != 0) {
    for (const Worker& w : workers) ::kill(-w.process.pid, SIGKILL);
  }
  return result;
}

}  // namespace mf::tools::launch
