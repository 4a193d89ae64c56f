#include "runtime/eager_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <new>
#include <source_location>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "runtime/parallel.h"

namespace mf::runtime {
namespace {

using testing::HasSubstr;

EagerOptions async_options() {
  return EagerOptions{};
}
EagerOptions sync_options() {
  EagerOptions options;
  options.synchronous = true;
  return options;
}

std::string this_file_line(const std::source_location& where) {
  return std::string(where.file_name()) + ":" + std::to_string(where.line());
}

// Submits a task that waits for a gate: submit must return before it runs (on the queue thread).
void expect_submit_returns_before_the_task_runs(EagerExecutor& executor) {
  std::latch gate(1);
  std::atomic<bool> ran{false};
  const uint64_t seq = executor.submit(
      [&] {
        gate.wait();
        ran = true;
      },
      TaskInfo::at("add"));
  EXPECT_FALSE(ran.load());  // the task cannot finish before the gate opens
  EXPECT_FALSE(executor.is_done(seq));
  gate.count_down();
  executor.sync();
  EXPECT_TRUE(ran.load());
}

TEST(EagerExecutor, AsyncSubmitReturnsBeforeTheTaskRuns) {
  EagerExecutor executor(async_options());
  expect_submit_returns_before_the_task_runs(executor);
}

TEST(EagerExecutor, RunsInSubmissionOrderOnOneWorker) {
  EagerExecutor executor(async_options());
  std::vector<int> order;
  std::thread::id worker;
  std::atomic<bool> other_thread{false};
  for (int i = 0; i < 500; ++i) {
    executor.submit(
        [&, i] {
          if (i == 0) worker = std::this_thread::get_id();
          if (std::this_thread::get_id() != worker) other_thread = true;
          order.push_back(i);
        },
        TaskInfo::at("add"));
  }
  executor.sync();
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_FALSE(other_thread.load());
  EXPECT_NE(worker, std::this_thread::get_id());
}

TEST(EagerExecutor, SynchronousErrorIsThrownAtTheCallSite) {
  EagerExecutor executor(sync_options());
  const auto where = std::source_location::current();
  try {
    executor.submit([] { MF_FAIL(InvalidArgument, "matmul: inner dimensions 3 and 4 differ"); },
                    TaskInfo::at("matmul", "Default/net-Mlp/fc1-Dense", where));
    FAIL() << "expected the error at the call site";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(error.message(), "matmul: inner dimensions 3 and 4 differ");
    EXPECT_THAT(error.what(), HasSubstr("in op 'matmul' (scope 'Default/net-Mlp/fc1-Dense')"));
    EXPECT_THAT(error.what(), HasSubstr("called at " + this_file_line(where)));
    EXPECT_THAT(error.what(), Not(HasSubstr("asynchronously")));
  }
  // Runs on the caller's thread, and the executor goes on.
  std::thread::id ran_on;
  executor.submit([&] { ran_on = std::this_thread::get_id(); }, TaskInfo::at("add"));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  executor.sync();
}

TEST(EagerExecutor, AsyncErrorSurfacesAtSyncAndDropsTheTasksBehindIt) {
  EagerExecutor executor(async_options());
  std::atomic<int> before{0};
  std::atomic<int> behind{0};
  executor.submit([&] { ++before; }, TaskInfo::at("add"));
  const auto where = std::source_location::current();
  const uint64_t failing =
      executor.submit([] { MF_FAIL(InvalidArgument, "shapes [2,3] and [4] do not broadcast"); },
                      TaskInfo::at("add", "Default/net/block1", where));
  for (int i = 0; i < 10; ++i) executor.submit([&] { ++behind; }, TaskInfo::at("relu"));
  try {
    executor.sync();
    FAIL() << "expected the captured error at sync()";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_THAT(error.what(), HasSubstr("shapes [2,3] and [4] do not broadcast"));
    EXPECT_THAT(error.what(), HasSubstr("in op 'add' (scope 'Default/net/block1')"));
    EXPECT_THAT(error.what(), HasSubstr("called at " + this_file_line(where)));
    EXPECT_THAT(error.what(), HasSubstr("pynative_synchronize=true"));
  }
  EXPECT_EQ(before.load(), 1);
  EXPECT_EQ(behind.load(), 0);
  EXPECT_TRUE(executor.is_done(failing));

  // Reported once; then usable again.
  EXPECT_NO_THROW(executor.sync());
  std::atomic<int> after{0};
  const uint64_t seq = executor.submit([&] { ++after; }, TaskInfo::at("mul"));
  executor.wait_for(seq);
  EXPECT_EQ(after.load(), 1);
  // Outputs of the failed and dropped ops stay unreadable.
  EXPECT_THROW(executor.wait_for(failing), Error);
  EXPECT_THROW(executor.wait_for(failing + 3), Error);
  EXPECT_NO_THROW(executor.wait_for(1));
}

// Without the queue thread (the intra-op threads take every core): each task runs on the caller
// before submit() returns, yet an error keeps the asynchronous contract: nothing is thrown at the
// call, the tasks behind it are dropped, and the next sync point reports it.
TEST(EagerExecutor, RunOnCallerRunsAtSubmitAndStillDefersErrors) {
  EagerExecutor executor(async_options());
  executor.set_run_on_caller(true);
  EXPECT_TRUE(executor.run_on_caller());
  std::thread::id ran_on;
  const uint64_t first =
      executor.submit([&] { ran_on = std::this_thread::get_id(); }, TaskInfo::at("add"));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(executor.is_done(first));
  const uint64_t failing =
      executor.submit([] { MF_FAIL(InvalidArgument, "shapes [2,3] and [4] do not broadcast"); },
                      TaskInfo::at("add"));
  std::atomic<int> behind{0};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NO_THROW(executor.submit([&] { ++behind; }, TaskInfo::at("relu")));
  }
  EXPECT_EQ(behind.load(), 0) << "tasks behind a failure are dropped";
  try {
    executor.sync();
    FAIL() << "expected the captured error at sync()";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("do not broadcast"));
    EXPECT_THAT(error.what(), HasSubstr("pynative_synchronize=true"));
  }
  EXPECT_THROW(executor.wait_for(failing), Error);
  executor.submit([&] { ++behind; }, TaskInfo::at("relu"));
  EXPECT_EQ(behind.load(), 1) << "usable again once reported";
  // A task that submits runs its inner task inline, in order.
  std::vector<int> order;
  executor.submit(
      [&] {
        order.push_back(1);
        executor.submit([&] { order.push_back(2); }, TaskInfo::at("inner"));
        order.push_back(3);
      },
      TaskInfo::at("outer"));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  executor.set_run_on_caller(false);  // back to the queue thread
  expect_submit_returns_before_the_task_runs(executor);
}

TEST(EagerExecutor, WaitForWaitsOnlyForItsTask) {
  EagerExecutor executor(async_options());
  std::latch gate(1);
  std::atomic<bool> first{false};
  const uint64_t one = executor.submit([&] { first = true; }, TaskInfo::at("a"));
  const uint64_t two = executor.submit([&] { gate.wait(); }, TaskInfo::at("b"));
  executor.wait_for(one);
  EXPECT_TRUE(first.load());
  EXPECT_FALSE(executor.is_done(two));  // still held at the gate
  gate.count_down();
  executor.wait_for(two);
  EXPECT_TRUE(executor.is_done(two));
  EXPECT_EQ(executor.last_submitted(), two);
  EXPECT_NO_THROW(executor.wait_for(0));
  EXPECT_THROW(executor.wait_for(two + 1), Error);
}

TEST(EagerExecutor, WaitForAFailedTaskReportsTheError) {
  EagerExecutor executor(async_options());
  const uint64_t failing = executor.submit(
      [] { MF_FAIL(OutOfMemory, "out of memory in op 'matmul'"); }, TaskInfo::at("matmul"));
  const uint64_t dropped = executor.submit([] {}, TaskInfo::at("relu"));
  EXPECT_THAT([&] { executor.wait_for(dropped); },
              testing::ThrowsMessage<Error>(HasSubstr("in op 'matmul'")));
  EXPECT_NO_THROW(executor.sync());  // already reported by the read
  EXPECT_THROW(executor.wait_for(failing), Error);
}

TEST(EagerExecutor, ForeignExceptionsBecomeModeflowErrors) {
  EagerExecutor executor(async_options());
  executor.submit([] { throw std::bad_alloc(); }, TaskInfo::at("conv2d", "Default/net"));
  try {
    executor.sync();
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kOutOfMemory);
    EXPECT_THAT(error.what(), HasSubstr("in op 'conv2d' (scope 'Default/net')"));
  }
  executor.set_synchronous(true);
  try {
    executor.submit([] { throw std::runtime_error("index out of range"); }, TaskInfo::at("gather"));
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInternal);
    EXPECT_THAT(error.what(), HasSubstr("index out of range"));
    EXPECT_THAT(error.what(), HasSubstr("in op 'gather'"));
  }
}

TEST(EagerExecutor, SwitchingModesDrainsTheQueue) {
  EagerExecutor executor(async_options());
  std::atomic<int> count{0};
  for (int i = 0; i < 100; ++i) executor.submit([&] { ++count; }, TaskInfo::at("add"));
  executor.set_synchronous(true);
  EXPECT_EQ(count.load(), 100);
  EXPECT_TRUE(executor.synchronous());
  executor.submit([&] { ++count; }, TaskInfo::at("add"));
  EXPECT_EQ(count.load(), 101);
  executor.set_synchronous(false);
  EXPECT_FALSE(executor.synchronous());
}

TEST(EagerExecutor, PendingAsyncErrorIsThrownByTheNextSynchronousSubmit) {
  EagerExecutor executor(async_options());
  executor.submit([] { MF_FAIL(InvalidArgument, "bad axis"); }, TaskInfo::at("softmax"));
  executor.set_synchronous(true);  // does not throw
  bool ran = false;
  EXPECT_THAT([&] { executor.submit([&] { ran = true; }, TaskInfo::at("add")); },
              testing::ThrowsMessage<Error>(HasSubstr("in op 'softmax'")));
  EXPECT_FALSE(ran);
  executor.submit([&] { ran = true; }, TaskInfo::at("add"));
  EXPECT_TRUE(ran);
}

TEST(EagerExecutor, TasksRunWithTheConfiguredIntraOpThreads) {
  EagerExecutor executor(async_options());
  executor.set_intra_op_threads(1);
  EXPECT_EQ(executor.intra_op_threads(), 1);
  int seen = 0;
  executor.submit([&] { seen = intra_op_threads(); }, TaskInfo::at("add"));
  executor.sync();
  EXPECT_EQ(seen, 1);
  EXPECT_THROW(executor.set_intra_op_threads(-1), Error);
}

TEST(EagerExecutor, TaskWaitingOnItsOwnExecutorFailsInsteadOfDeadlocking) {
  EagerExecutor executor(async_options());
  executor.submit([&] { executor.sync(); }, TaskInfo::at("print"));
  EXPECT_THAT([&] { executor.sync(); },
              testing::ThrowsMessage<Error>(HasSubstr("would wait for itself")));
}

TEST(EagerExecutor, DestructionDrainsTheQueue) {
  std::atomic<int> count{0};
  {
    EagerExecutor executor(async_options());
    for (int i = 0; i < 200; ++i) executor.submit([&] { ++count; }, TaskInfo::at("add"));
  }
  EXPECT_EQ(count.load(), 200);
  {
    EagerExecutor executor(async_options());
    executor.submit([] { MF_FAIL(InvalidArgument, "never collected"); }, TaskInfo::at("add"));
  }  // no std::terminate: the error goes to stderr
}

TEST(EagerExecutor, SubmitterBlocksAtTheQueueDepthAndResumesOnceHalfDrained) {
  // Task 0 holds the worker; tasks 1..kMaxQueued wait in the queue, each held by its own gate, so
  // the test decides when the worker takes each one. The submitter (another thread) must block on
  // the task after those and wake only when the worker has taken enough for kResumeAt to remain,
  // not at the first pop: a wake-up per op was what made asynchronous runs slower than synchronous.
  constexpr size_t kDepth = EagerExecutor::kMaxQueued;
  EagerExecutor executor(async_options());
  std::vector<std::unique_ptr<std::latch>> gates;
  for (size_t i = 0; i <= kDepth + 1; ++i) gates.push_back(std::make_unique<std::latch>(1));
  std::vector<std::atomic<bool>> started(kDepth + 2);
  std::atomic<size_t> submitted{0};
  auto task = [&](size_t i) {
    return [&, i] {
      started[i] = true;
      gates[i]->wait();
    };
  };
  executor.submit(task(0), TaskInfo::at("hold"));
  while (!started[0]) std::this_thread::yield();
  std::thread submitter([&] {
    for (size_t i = 1; i <= kDepth + 1; ++i) {
      executor.submit(task(i), TaskInfo::at("queued"));
      submitted = i;
    }
  });
  // Blocked in submit(), by state: no sleep decides it.
  while (executor.blocked_submitters() == 0) std::this_thread::yield();
  EXPECT_EQ(submitted.load(), kDepth) << "the task after a full queue must wait";
  // The worker takes tasks 1.. one by one; it wakes the submitter (before running the task it
  // took) only once kResumeAt remain queued.
  const size_t pops_to_resume = kDepth - EagerExecutor::kResumeAt;
  for (size_t i = 0; i < pops_to_resume; ++i) {
    gates[i]->count_down();
    while (!started[i + 1]) std::this_thread::yield();
    if (i + 1 < pops_to_resume) {
      EXPECT_EQ(executor.submitter_wakeups(), 0u) << "woken after " << i + 1 << " pops";
      EXPECT_EQ(submitted.load(), kDepth) << "returned after " << i + 1 << " pops";
    }
  }
  EXPECT_EQ(executor.submitter_wakeups(), 1u);
  submitter.join();  // woken at kResumeAt
  EXPECT_EQ(submitted.load(), kDepth + 1);
  for (size_t i = pops_to_resume; i <= kDepth + 1; ++i) gates[i]->count_down();
  executor.sync();
  for (size_t i = 0; i <= kDepth + 1; ++i) EXPECT_TRUE(started[i]) << i;
}

TEST(EagerExecutor, DefaultExecutorIsShared) {
  // Two calls reach one queue: the second task's sequence number follows the first's, and waiting
  // for it (through a third call) finds the first task's effect already applied.
  int value = 0;
  const uint64_t first = default_eager_executor().submit([&] { value = 7; }, TaskInfo::at("fill"));
  const uint64_t second =
      default_eager_executor().submit([&] { value *= 2; }, TaskInfo::at("double"));
  EXPECT_GT(second, first);
  default_eager_executor().wait_for(second);
  EXPECT_EQ(value, 14);
}

}  // namespace
}  // namespace mf::runtime
