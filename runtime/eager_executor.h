#pragma once
// The PYNATIVE executor: op kernels run in submission order on one worker thread (asynchronous
// mode) or on the caller's thread before submit returns (synchronous mode,
// pynative_synchronize=true). An asynchronous failure is captured, every task behind it is dropped,
// and the error is rethrown at the next sync point naming the op, its scope and the call site where
// it was submitted.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <source_location>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

namespace mf::runtime {

// What a task is, for error messages: the op, its scope and where the user called it.
struct TaskInfo {
  std::string op_name;  // "matmul"
  std::string scope;    // "Default/net-Mlp/fc1-Dense"; empty outside any cell
  // Where the user called it; default-constructed (no file) when unknown. Kept as the location,
  // formatted only when an error names it: every op submits one, few ever fail.
  std::source_location where{};

  // "model.cc:42 in 'forward'"; empty when unknown.
  std::string call_site() const;

  // Builds the info with the call site of the caller (pass std::source_location from further up
  // when the engine forwards the user's location).
  static TaskInfo at(std::string op_name, std::string scope = {},
                     std::source_location where = std::source_location::current());
};

// "file:line in 'function'" for error context lines; empty for a location with no file.
std::string format_call_site(const std::source_location& where);

struct EagerOptions {
  bool synchronous = false;  // pynative_synchronize
  int intra_op_threads = 0;  // runtime_num_threads for each task; 0 = the cores
};

// Runs tasks strictly in submission order; each submit returns a sequence number (1, 2, ...) that
// wait_for() accepts. Thread-safe; usable again after an error has been reported.
class EagerExecutor {
 public:
  // Asynchronous backpressure: submit() blocks while kMaxQueued tasks wait, until the worker has
  // drained the queue to kResumeAt (eager_executor.cc says why these numbers).
  static constexpr size_t kMaxQueued = 16;
  static constexpr size_t kResumeAt = kMaxQueued / 2;

  explicit EagerExecutor(const EagerOptions& options = {});
  // Runs what is still queued, then stops the worker. An error nobody collected is written to
  // stderr.
  ~EagerExecutor();
  EagerExecutor(const EagerExecutor&) = delete;
  EagerExecutor& operator=(const EagerExecutor&) = delete;

  // Asynchronous: queues the task and returns at once. Synchronous: runs it on this thread and
  // throws its error (with op, scope and call-site context) right here; an asynchronous error still
  // waiting to be reported is thrown first, without running the task. Returns the task's sequence
  // number.
  uint64_t submit(std::function<void()> task, TaskInfo info);

  // The sync point: waits until every submitted task has run or been dropped, then throws the
  // captured error, if any (once; afterwards the executor runs new tasks again).
  void sync();

  // Waits until every submitted task has run or been dropped, without reporting anything: a
  // captured error stays pending for the next sync point. A no-op on the worker itself.
  void drain();

  // Waits only for task `seq` (and so for those before it). Throws if that task failed or was
  // dropped behind a failure; that reports the failure, so a later sync() does not throw it again.
  // seq 0 means "no task" and returns at once.
  void wait_for(uint64_t seq);

  // True when task `seq` has run (or failed, or been dropped).
  bool is_done(uint64_t seq) const;
  // Backpressure as it stands, for tests that check it by state, never by waiting: submitters
  // blocked for room in the queue now, and how often the worker has woken them.
  size_t blocked_submitters() const;
  uint64_t submitter_wakeups() const;

  // The latest failure: the op that failed (its sequence number and what it was) and the last task
  // dropped behind it so far (== failed when none was). For reports that list what happened to
  // each op, the failing one included however many were queued after it.
  struct FailureRecord {
    uint64_t failed = 0;
    uint64_t dropped_through = 0;
    TaskInfo info;
  };
  std::optional<FailureRecord> last_failure() const;
  // The sequence number of the latest submitted task (0 before any).
  uint64_t last_submitted() const;

  // Drains the queue first, so tasks already submitted keep the mode they were submitted in. Does
  // not throw: a captured error stays pending for the next sync point.
  void set_synchronous(bool synchronous);
  bool synchronous() const;
  // Asynchronous mode without the queue thread: each task runs on the submitting thread before
  // submit() returns, yet keeps the asynchronous contract for errors (captured, reported at the
  // next sync point, later tasks dropped). For when the kernels' threads take every core: a queue
  // thread beside them only takes cores from them (engine_state.cc, the policy's reason). Drains
  // the queue first.
  void set_run_on_caller(bool run_on_caller);
  bool run_on_caller() const;

  // The intra-op thread count each later task runs with (>= 1; 0 = the cores).
  void set_intra_op_threads(int threads);
  int intra_op_threads() const;

 private:
  struct Entry {
    uint64_t seq;
    std::function<void()> task;
    TaskInfo info;
  };
  // Tasks [first, last] failed or were dropped because of `error`; last is open (max) while the
  // error is still pending.
  struct Failure {
    uint64_t first;
    uint64_t last;
    std::shared_ptr<const Error> error;
    TaskInfo info;  // the failing op's
  };

  void worker_loop();
  // Runs one task with the intra-op thread count; returns the failure (with context) or nothing.
  std::optional<Error> run(const std::function<void()>& task, const TaskInfo& info, int threads,
                           bool asynchronous);
  // Closes the pending failure's range at the last submitted task and throws its error.
  [[noreturn]] void report_pending_locked();
  const Failure* failure_of_locked(uint64_t seq) const;
  bool dropped_locked(uint64_t seq) const;
  void wait_drained_locked(std::unique_lock<std::mutex>& lock);
  void check_not_worker(const char* what) const;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;   // the worker waits for tasks or stop_
  std::condition_variable progress_;     // waiters for finished_
  std::condition_variable space_ready_;  // a submitter waiting for room in the queue
  size_t space_waiters_ = 0;             // submitters waiting on space_ready_
  uint64_t space_wakeups_ = 0;           // times the worker woke the waiting submitters
  std::deque<Entry> queue_;
  std::atomic<size_t> queued_{0};  // queue_.size(), read by the worker without the lock
  uint64_t last_seq_ = 0;          // the last sequence number handed out
  uint64_t finished_ = 0;          // every task with seq <= finished_ has run or been dropped
  bool has_pending_ = false;       // failures_.back() is captured but not yet reported
  std::vector<Failure> failures_;
  bool synchronous_;
  bool run_on_caller_ = false;
  int threads_;
  bool stop_ = false;
  // Synchronous tasks from several threads still run one at a time, in order; recursive so a task
  // may itself submit.
  std::recursive_mutex inline_mutex_;
  std::thread worker_;
};

// The process-wide executor used by PYNATIVE mode; destroyed (drained) at exit.
EagerExecutor& default_eager_executor();

}  // namespace mf::runtime
