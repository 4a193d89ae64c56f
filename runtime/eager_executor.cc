#include "runtime/eager_executor.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>
#include <new>
#include <utility>

#include "runtime/parallel.h"
#include "runtime/profiler.h"

namespace mf::runtime {
namespace {

constexpr uint64_t kOpen = std::numeric_limits<uint64_t>::max();
// kMaxQueued, kResumeAt (the header): how many asynchronous tasks may wait in the queue before
// submit() blocks, and how far the queue drains before a blocked submitter is woken. A queued task
// holds its inputs only (its outputs are allocated when it runs), so the depth costs no activation
// memory: the 12-layer transformer op by op peaks at 51 MiB with 16 or 64 queued. What the
// depth buys is fewer wake-ups. Waking a thread costs tens of microseconds here (a VM's
// inter-processor interrupt); woken at every pop, the submitter slept and woke once per op, and the
// worker paid for that wake-up inside every op: mobilenet_v2 op by op at one intra-op thread took
// 16.5 ms asynchronously against 12.5 ms synchronously (20,200 context switches in 200 runs).
// Woken only once the queue is half empty, it sleeps once per kResumeAt ops: 13.6 ms, 4,300
// context switches.

// How long the worker stays awake for the next task before it sleeps: a few wake-ups' worth. Ops
// further apart than this are long enough that one wake-up is small beside them.
constexpr std::chrono::microseconds kWorkerSpin{30};

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// The executor whose worker is the current thread: waiting on it from its own tasks would deadlock.
thread_local const EagerExecutor* tls_worker_of = nullptr;

Error to_error(std::exception_ptr failure) {
  try {
    std::rethrow_exception(std::move(failure));
  } catch (const Error& error) {
    return error;
  } catch (const std::bad_alloc&) {
    return Error(
        ErrorKind::kOutOfMemory,
        "out of memory: the system refused an allocation (std::bad_alloc). Lower the batch "
        "size or free memory.");
  } catch (const std::exception& error) {
    return Error(ErrorKind::kInternal, std::string("unexpected exception in a kernel: ") +
                                           error.what() + " (please report it)");
  } catch (...) {
    return Error(ErrorKind::kInternal, "unknown exception in a kernel (please report it)");
  }
}

}  // namespace

std::string format_call_site(const std::source_location& where) {
  if (where.file_name() == nullptr || where.file_name()[0] == '\0') return {};
  std::string out = std::string(where.file_name()) + ":" + std::to_string(where.line());
  if (where.function_name() != nullptr && where.function_name()[0] != '\0') {
    out += std::string(" in '") + where.function_name() + "'";
  }
  return out;
}

TaskInfo TaskInfo::at(std::string op_name, std::string scope, std::source_location where) {
  return TaskInfo{std::move(op_name), std::move(scope), where};
}

std::string TaskInfo::call_site() const {
  return format_call_site(where);
}

EagerExecutor::EagerExecutor(const EagerOptions& options)
    : synchronous_(options.synchronous), threads_(options.intra_op_threads) {
  MF_CHECK(options.intra_op_threads >= 0, InvalidArgument,
           "intra-op thread count must be 0 (the cores) or positive, got ",
           options.intra_op_threads);
  worker_ = std::thread([this] {
    profile_thread_name("PYNATIVE queue");
    worker_loop();
  });
}

EagerExecutor::~EagerExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  if (worker_.joinable()) {
    worker_.join();
  }
  if (has_pending_) {
    // Loggers may already be gone at exit; stderr is not.
    std::fprintf(stderr, "modeflow: an error from an asynchronous op was never reported:\n%s\n",
                 failures_.back().error->what());
  }
}

std::optional<Error> EagerExecutor::run(const std::function<void()>& task, const TaskInfo& info,
                                        int threads, bool asynchronous) {
  try {
    if (threads > 0) {
      ScopedIntraOpThreads scope(threads);
      task();
    } else {
      task();
    }
    return std::nullopt;
  } catch (...) {
    Error error = to_error(std::current_exception());
    std::string where = "in op '" + info.op_name + "'";
    if (!info.scope.empty()) {
      where += " (scope '" + info.scope + "')";
    }
    error.add_context(std::move(where));
    if (const std::string call_site = info.call_site(); !call_site.empty()) {
      error.add_context("called at " + call_site);
    }
    if (asynchronous) {
      error.add_context(
          "the op ran asynchronously, so its error is reported at this sync point and the ops "
          "queued "
          "after it were not run; set pynative_synchronize=true to raise it at the call site");
    }
    return error;
  }
}

void EagerExecutor::worker_loop() {
  tls_worker_of = this;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (queue_.empty() && !stop_) {
      // The submitter is usually on its way with the next op (it was woken when this worker took
      // the last one): wait for it briefly awake, between tasks, when this core has nothing else
      // to do, rather than sleep and pay a wake-up per op.
      lock.unlock();
      const auto deadline = std::chrono::steady_clock::now() + kWorkerSpin;
      while (queued_.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        cpu_relax();
      }
      lock.lock();
    }
    work_ready_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) {
      return;  // stop_ and nothing left to run
    }
    Entry entry = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_release);
    // A blocked submitter wakes once the queue is down to kResumeAt, and now, while this task
    // runs, not after it: woken only after the task, the submitter and then this worker each slept
    // one wake-up per op, in series (mobilenet_v2 op by op at one intra-op thread: 26.9 ms
    // asynchronously against 11.8 ms synchronously).
    if (space_waiters_ > 0 && queue_.size() <= kResumeAt) {
      ++space_wakeups_;
      space_ready_.notify_all();
    }
    if (dropped_locked(entry.seq)) {
      // Behind a failure: its inputs may never have been computed.
      finished_ = entry.seq;
      progress_.notify_all();
      continue;
    }
    const int threads = threads_;
    lock.unlock();
    std::optional<Error> failure = run(entry.task, entry.info, threads, /*asynchronous=*/true);
    entry.task = nullptr;  // release captured buffers outside the lock
    lock.lock();
    if (failure) {
      failures_.push_back(Failure{entry.seq, kOpen,
                                  std::make_shared<const Error>(std::move(*failure)), entry.info});
      has_pending_ = true;
    }
    finished_ = entry.seq;
    progress_.notify_all();
  }
}

uint64_t EagerExecutor::submit(std::function<void()> task, TaskInfo info) {
  MF_CHECK(task != nullptr, InvalidArgument, "cannot submit an empty task for op '", info.op_name,
           "'");
  std::unique_lock<std::mutex> lock(mutex_);
  if (!synchronous_ && run_on_caller_) {
    // Nothing is ever queued in this mode (set_run_on_caller drained the queue), so running now
    // keeps submission order. A task that submits runs its inner task inline too (recursive lock).
    lock.unlock();
    std::lock_guard<std::recursive_mutex> inline_lock(inline_mutex_);
    lock.lock();
    const uint64_t seq = ++last_seq_;
    if (!dropped_locked(seq)) {
      const int threads = threads_;
      lock.unlock();
      std::optional<Error> failure = run(task, info, threads, /*asynchronous=*/true);
      task = nullptr;
      lock.lock();
      if (failure) {
        failures_.push_back(
            Failure{seq, kOpen, std::make_shared<const Error>(std::move(*failure)), info});
        has_pending_ = true;
      }
    }
    finished_ = std::max(finished_, seq);
    progress_.notify_all();
    return seq;
  }
  if (!synchronous_) {
    // Backpressure: a caller far ahead of the worker would keep alive the inputs of every queued
    // op (values it has itself let go of), so it waits while kMaxQueued are queued, until
    // kResumeAt remain. A kernel submitting from the worker itself never waits.
    if (tls_worker_of != this && queue_.size() >= kMaxQueued) {
      ++space_waiters_;
      space_ready_.wait(lock, [this] { return queue_.size() <= kResumeAt; });
      --space_waiters_;
    }
    const uint64_t seq = ++last_seq_;
    queue_.push_back(Entry{seq, std::move(task), std::move(info)});
    queued_.store(queue_.size(), std::memory_order_release);
    lock.unlock();
    work_ready_.notify_one();
    return seq;
  }
  lock.unlock();
  std::lock_guard<std::recursive_mutex> inline_lock(inline_mutex_);
  lock.lock();
  if (has_pending_) {
    wait_drained_locked(lock);
    report_pending_locked();
  }
  const uint64_t seq = ++last_seq_;
  const int threads = threads_;
  lock.unlock();
  std::optional<Error> failure = run(task, info, threads, /*asynchronous=*/false);
  task = nullptr;
  lock.lock();
  if (failure) {
    // Closed at once: the caller gets the error now, and a read of this op's output throws it
    // again.
    failures_.push_back(Failure{seq, seq, std::make_shared<const Error>(*failure), info});
  }
  finished_ = std::max(finished_, seq);
  progress_.notify_all();
  lock.unlock();
  if (failure) {
    throw Error(std::move(*failure));
  }
  return seq;
}

void EagerExecutor::wait_drained_locked(std::unique_lock<std::mutex>& lock) {
  progress_.wait(lock, [this] { return queue_.empty() && finished_ >= last_seq_; });
}

void EagerExecutor::check_not_worker(const char* what) const {
  MF_CHECK(tls_worker_of != this, Internal, "an op kernel called ", what,
           " on its own executor, which would wait for itself forever");
}

void EagerExecutor::drain() {
  if (tls_worker_of == this) return;
  std::unique_lock<std::mutex> lock(mutex_);
  wait_drained_locked(lock);
}

void EagerExecutor::sync() {
  check_not_worker("sync()");
  std::unique_lock<std::mutex> lock(mutex_);
  wait_drained_locked(lock);
  if (has_pending_) {
    report_pending_locked();
  }
}

void EagerExecutor::wait_for(uint64_t seq) {
  if (seq == 0) {
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  MF_CHECK(seq <= last_seq_, InvalidArgument, "task ", seq, " was never submitted (the last is ",
           last_seq_, ")");
  if (finished_ < seq) {
    lock.unlock();
    check_not_worker("wait_for() on a later task");
    lock.lock();
  }
  progress_.wait(lock, [&] { return finished_ >= seq; });
  const Failure* failure = failure_of_locked(seq);
  if (failure == nullptr) {
    return;
  }
  if (has_pending_ && failure == &failures_.back()) {
    report_pending_locked();
  }
  throw Error(*failure->error);
}

std::optional<EagerExecutor::FailureRecord> EagerExecutor::last_failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failures_.empty()) return std::nullopt;
  const Failure& f = failures_.back();
  return FailureRecord{f.first, f.last == kOpen ? last_seq_ : f.last, f.info};
}

size_t EagerExecutor::blocked_submitters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return space_waiters_;
}

uint64_t EagerExecutor::submitter_wakeups() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return space_wakeups_;
}

bool EagerExecutor::is_done(uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_ >= seq;
}

uint64_t EagerExecutor::last_submitted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_seq_;
}

void EagerExecutor::report_pending_locked() {
  Failure& failure = failures_.back();
  // Everything submitted up to now is behind the failure and stays dropped; later tasks run again.
  failure.last = last_seq_;
  has_pending_ = false;
  throw Error(*failure.error);
}

const EagerExecutor::Failure* EagerExecutor::failure_of_locked(uint64_t seq) const {
  // Ranges are disjoint and in order; recent ones are the likely match.
  for (auto it = failures_.rbegin(); it != failures_.rend(); ++it) {
    if (seq >= it->first && seq <= it->last) {
      return &*it;
    }
    if (seq > it->last) {
      return nullptr;
    }
  }
  return nullptr;
}

bool EagerExecutor::dropped_locked(uint64_t seq) const {
  return !failures_.empty() && seq >= failures_.back().first && seq <= failures_.back().last;
}

void EagerExecutor::set_synchronous(bool synchronous) {
  check_not_worker("set_synchronous()");
  std::unique_lock<std::mutex> lock(mutex_);
  wait_drained_locked(lock);
  synchronous_ = synchronous;
}

bool EagerExecutor::synchronous() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return synchronous_;
}

void EagerExecutor::set_run_on_caller(bool run_on_caller) {
  check_not_worker("set_run_on_caller()");
  std::unique_lock<std::mutex> lock(mutex_);
  wait_drained_locked(lock);
  run_on_caller_ = run_on_caller;
}

bool EagerExecutor::run_on_caller() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return run_on_caller_;
}

void EagerExecutor::set_intra_op_threads(int threads) {
  MF_CHECK(threads >= 0, InvalidArgument,
           "intra-op thread count must be 0 (the cores) or positive, got ", threads);
  std::lock_guard<std::mutex> lock(mutex_);
  threads_ = threads;
}

int EagerExecutor::intra_op_threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_;
}

namespace {

// Runs, at the end of a thread that submitted to the default executor, what that thread left
// queued. At exit() the main thread's thread_local objects are destroyed before any static one:
// left to the executor's own (static) destructor, the queued ops ran after the statics of the
// libraries they call, created later and so destroyed first (oneDNN's JIT state: a program that
// ended with convolutions still queued crashed in its exit about once in two).
struct DrainAtThreadExit {
  EagerExecutor* executor;
  ~DrainAtThreadExit() {
    if (tls_worker_of != executor) executor->drain();
  }
};

}  // namespace

EagerExecutor& default_eager_executor() {
  // A function-local static: created on first PYNATIVE op, after the op registry, so it is
  // destroyed before the registry. What the submitting threads left queued was run when they ended
  // (DrainAtThreadExit), before any static was destroyed.
  static EagerExecutor executor;
  thread_local DrainAtThreadExit drain_at_exit{&executor};
  (void)drain_at_exit;  // odr-use: constructs it on this thread's first call
  return executor;
}

}  // namespace mf::runtime
