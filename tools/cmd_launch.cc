// `mf launch`: starts the workers of a data-parallel job on this host, with MindSpore msrun's
// options and the environment its workers read (MS_WORKER_NUM, MS_SCHED_HOST, RANK_ID, ...). Each
// worker's stdout and stderr go to LOG_DIR/worker_<rank>.log (with --join=true to stdout too); the
// launcher waits for every worker and exits 0 only when all of them exited 0.

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "tools/commands.h"
#include "tools/launch/supervisor.h"

namespace mf::tools {
namespace {

namespace fs = std::filesystem;
using launch::UniqueFd;
using launch::Worker;

// Exit status when a worker failed; an interrupted launcher exits 128 + the signal's number.
constexpr int kWorkerFailed = 3;
constexpr int64_t kMaxWorkers = 4096;

struct LaunchOptions {
  int64_t worker_num = 0;
  int64_t local_worker_num = 0;  // set to worker_num when not given
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 8118;
  int64_t node_rank = 0;
  std::string log_dir = ".";
  bool join = false;
  int64_t cluster_time_out = 600;  // seconds
  std::vector<std::string> command;
};

// Everything a user can get wrong, checked before a directory is made or a worker started.
void check_options(const LaunchOptions& o) {
  MF_CHECK(!o.command.empty(), InvalidArgument,
           "mf launch needs the workers' command after `--`, as in: mf launch --worker_num=2 -- "
           "python train.py");
  MF_CHECK(o.worker_num >= 1 && o.worker_num <= kMaxWorkers, InvalidArgument,
           "--worker_num must be in [1, ", kMaxWorkers, "], got ", o.worker_num);
  MF_CHECK(o.local_worker_num >= 1 && o.local_worker_num <= o.worker_num, InvalidArgument,
           "--local_worker_num must be in [1, --worker_num=", o.worker_num, "], got ",
           o.local_worker_num);
  MF_CHECK(o.node_rank >= 0, InvalidArgument, "--node_rank must be at least 0, got ", o.node_rank);
  // node_rank < worker_num first, so the product cannot overflow.
  MF_CHECK(o.node_rank < o.worker_num && (o.node_rank + 1) * o.local_worker_num <= o.worker_num,
           InvalidArgument, "the ranks of --node_rank=", o.node_rank,
           " with --local_worker_num=", o.local_worker_num,
           " go beyond --worker_num=", o.worker_num,
           ": node_rank * local_worker_num + local_worker_num must be at most worker_num");
  // An empty `--master_addr=` makes the option parser take the next argument, often `--`; no host
  // name or address starts with '-'.
  MF_CHECK(!o.master_addr.empty() && o.master_addr.front() != '-', InvalidArgument,
           "--master_addr needs a host name or address, got '", echo(o.master_addr), "'");
  MF_CHECK(o.master_port >= 1 && o.master_port <= 65535, InvalidArgument,
           "--master_port must be in [1, 65535], got ", o.master_port);
  MF_CHECK(o.cluster_time_out >= 0, InvalidArgument,
           "--cluster_time_out must be at least 0 seconds, got ", o.cluster_time_out);
  MF_CHECK(!o.log_dir.empty() && o.log_dir != "--", InvalidArgument,
           "--log_dir needs a directory, got '", echo(o.log_dir), "'");
  const auto why = launch::why_not_executable(o.command.front());
  MF_CHECK(!why, InvalidArgument, "cannot execute '", echo(o.command.front()),
           "': ", why.value_or(""));
}

// The launcher holds a pipe and a log open per local worker: raise the soft limit when the
// default (often 1024) is too low, before any of them is opened.
void ensure_open_file_limit(int64_t local_workers) {
  const rlim_t needed = rlim_t(2 * local_workers + 64);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return;
  if (limit.rlim_max >= needed) {
    limit.rlim_cur = needed;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) return;
  }
  MF_FAIL(InvalidArgument, "--local_worker_num=", local_workers, " needs about ", needed,
          " open files in the launcher; this process may open at most ", limit.rlim_max,
          " (ulimit -n)");
}

fs::path make_log_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  MF_CHECK(!ec, InvalidArgument, "--log_dir '", echo(dir), "' cannot be created: ", ec.message());
  MF_CHECK(fs::is_directory(dir, ec), InvalidArgument, "--log_dir '", echo(dir),
           "' is not a directory");
  return dir;
}

// Started afresh by each run; O_NONBLOCK only while opening, so a FIFO without a reader fails
// instead of hanging the launcher.
UniqueFd open_log(const std::string& path) {
  UniqueFd fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644));
  MF_CHECK(fd.valid(), InvalidArgument, "cannot write the log '", echo(path),
           "': ", std::strerror(errno));
  ::fcntl(fd.get(), F_SETFL, O_APPEND);
  return fd;
}

// What the worker of global rank `rank` (the `local_rank`-th of this launcher) gets on top of the
// launcher's environment: the variables msrun sets and mindspore.communication.init() reads.
std::vector<std::string> worker_variables(const LaunchOptions& o, int64_t rank,
                                          int64_t local_rank) {
  const std::string n = std::to_string(o.worker_num), r = std::to_string(rank);
  return {"MS_WORKER_NUM=" + n,
          "MS_SCHED_HOST=" + o.master_addr,
          "MS_SCHED_PORT=" + std::to_string(o.master_port),
          "MS_NODE_ID=" + r,
          "MS_ROLE=MS_WORKER",
          "MS_LOCAL_WORKER_NUM=" + std::to_string(o.local_worker_num),
          "RANK_ID=" + r,
          "RANK_SIZE=" + n,
          "LOCAL_RANK=" + std::to_string(local_rank)};
}

// Prints what went wrong, one line per failed worker in rank order; returns the exit status.
int report(const std::vector<Worker>& workers, const launch::Supervision& supervision,
           const LaunchOptions& o) {
  const auto failures = std::count_if(workers.begin(), workers.end(), launch::failed);
  if (failures == 0 && supervision.interrupted_by == 0) {
    std::fprintf(stderr, "mf launch: all %zu workers exited with status 0\n", workers.size());
    return 0;
  }
  if (supervision.interrupted_by != 0) {
    std::fprintf(stderr, "mf launch: interrupted by %s, which was passed on to every worker\n",
                 launch::signal_name(supervision.interrupted_by).c_str());
  }
  if (failures > 0) {
    std::fprintf(stderr, "mf launch: %td of %zu workers failed, worker %lld first\n", failures,
                 workers.size(), static_cast<long long>(supervision.first_failed_rank));
  }
  for (const Worker& w : workers) {
    if (!launch::failed(w)) continue;
    std::string how;
    if (w.stopped_by_launcher) {
      how = "was stopped by the launcher (worker " + std::to_string(supervision.first_failed_rank) +
            " failed and --cluster_time_out=" + std::to_string(o.cluster_time_out) +
            " s passed) and ";
    }
    how += launch::describe_exit(w.wait_status);
    std::fprintf(stderr, "mf launch: worker %lld (pid %d) %s; its log: %s\n",
                 static_cast<long long>(w.rank), int(w.process.pid), how.c_str(),
                 echo(w.output.log_path()).c_str());
  }
  return supervision.interrupted_by != 0 ? 128 + supervision.interrupted_by : kWorkerFailed;
}

int launch_workers(const LaunchOptions& o) {
  check_options(o);
  ensure_open_file_limit(o.local_worker_num);
  const fs::path log_dir = make_log_dir(o.log_dir);
  const int64_t first_rank = o.node_rank * o.local_worker_num;
  std::vector<UniqueFd> logs;
  std::vector<std::string> log_paths;
  for (int64_t i = 0; i < o.local_worker_num; ++i) {
    log_paths.push_back((log_dir / ("worker_" + std::to_string(first_rank + i) + ".log")).string());
    logs.push_back(open_log(log_paths.back()));
  }

  // Before the first fork: a worker that ends at once, or a Ctrl-C during the start, is seen.
  launch::SignalPipe signals;
  std::vector<Worker> workers;
  workers.reserve(size_t(o.local_worker_num));
  try {
    for (int64_t i = 0; i < o.local_worker_num; ++i) {
      const int64_t rank = first_rank + i;
      workers.push_back(
          Worker{.rank = rank,
                 .process = launch::start_worker(
                     o.command, launch::environment_with(worker_variables(o, rank, i))),
                 .output = launch::WorkerOutput(std::move(logs[size_t(i)]), log_paths[size_t(i)],
                                                rank, o.join)});
    }
  } catch (...) {
    // No half-started job is left behind the error.
    for (const Worker& w : workers) {
      ::kill(-w.process.pid, SIGKILL);
      ::waitpid(w.process.pid, nullptr, 0);
    }
    throw;
  }
  std::fprintf(stderr, "mf launch: started ranks %lld..%lld of %lld; logs: %s\n",
               static_cast<long long>(first_rank),
               static_cast<long long>(first_rank + o.local_worker_num - 1),
               static_cast<long long>(o.worker_num),
               echo((log_dir / "worker_<rank>.log").string()).c_str());
  // Capped at a year: longer is "never", and the deadline's arithmetic stays in range.
  const auto time_out = std::chrono::seconds(std::min<int64_t>(o.cluster_time_out, 365 * 86400));
  const launch::Supervision supervision = launch::supervise(workers, signals, time_out);
  return report(workers, supervision, o);
}

}  // namespace

void add_launch_command(CLI::App& app, GlobalOptions& /*global*/) {
  auto o = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "Start the workers of a data-parallel job on this host (msrun's options)");
  cmd->add_option("--worker_num", o->worker_num, "Workers in the whole job, 1..4096")->required();
  CLI::Option* local = cmd->add_option("--local_worker_num", o->local_worker_num,
                                       "Workers this launcher starts (default: --worker_num)");
  cmd->add_option("--master_addr", o->master_addr,
                  "Host of node_rank 0, whose worker 0 hosts the rendezvous (default 127.0.0.1)");
  cmd->add_option("--master_port", o->master_port, "The rendezvous port (default 8118)");
  cmd->add_option("--node_rank", o->node_rank,
                  "This host's index: its workers get ranks node_rank*local_worker_num + i "
                  "(default 0)");
  cmd->add_option("--log_dir", o->log_dir,
                  "Where worker_<rank>.log are written, created if missing (default .)");
  cmd->add_flag("--join", o->join,
                "true: also echo every worker's lines to stdout after \"[worker <rank>] \" "
                "(default false)");
  cmd->add_option("--cluster_time_out", o->cluster_time_out,
                  "Seconds to wait for the other workers after one failed before stopping them "
                  "(default 600)");
  cmd->add_option("command", o->command, "The workers' command and its arguments, after --");
  cmd->callback([o, local] {
    LaunchOptions options = *o;
    if (local->count() == 0) options.local_worker_num = options.worker_num;
    const int status = launch_workers(options);
    if (status != 0) {
      std::fflush(stdout);
      std::exit(status);
    }
  });
}

}  // namespace mf::tools
