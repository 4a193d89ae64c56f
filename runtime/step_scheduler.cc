#include "runtime/step_scheduler.h"

#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/tsan_sync.h"

namespace mf::runtime::detail {

void run_steps_in_parallel(const Plan& plan, int parallelism,
                           const std::function<void(int step)>& run_one) {
  const size_t n = plan.steps.size();
  std::vector<std::vector<int>> successors(n);
  std::unique_ptr<std::atomic<int>[]> pending(new std::atomic<int>[n]);
  std::vector<int> roots;
  for (size_t s = 0; s < n; ++s) {
    pending[s].store(static_cast<int>(plan.steps[s].depends_on.size()));
    for (int d : plan.steps[s].depends_on) successors[d].push_back(static_cast<int>(s));
    // Collected before any is launched: once a root runs, it may bring a later step's count to
    // zero and launch it, and a scan still going would launch that step a second time.
    if (plan.steps[s].depends_on.empty()) roots.push_back(static_cast<int>(s));
  }
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  tbb::task_arena arena(parallelism);
  arena.execute([&] {
    tbb::task_group group;
    // A task runs its step, then the first successor that became ready, on the same thread, and so
    // on down a chain. A task per step sent each step of a chain to whichever thread took it, with
    // the task's overhead and the caches lost at every step: mobilenet_v2 (a chain, nothing to run
    // side by side) at one intra-op thread took 13.8 ms at jit_level O0 against 9.7 ms op by op,
    // 9.2 ms after.
    // ThreadSanitizer builds: a task starts after its launcher's writes, and every task ends
    // before wait() returns (runtime/tsan_sync.h); the steps' own ordering is the atomics'. The
    // copy TBB makes of the closure is not recorded (the task reads it before it can acquire:
    // 47 reports in runtime_tests otherwise).
    std::function<void(int)> launch = [&](int first) {
      // The token's address comes with the closure: the task acquires before it reads anything
      // the launching thread wrote (the plan included).
      const void* token = &plan.steps[first];
      tsan_release(token);
      const TsanIgnoreWrites closure_copy;
      group.run([&, first, token] {
        tsan_acquire(token);
        struct Finished {
          const tbb::task_group* group;
          ~Finished() { tsan_release(group); }
        } finished{&group};
        for (int s = first; s >= 0;) {
          if (failed.load()) return;
          try {
            run_one(s);
          } catch (...) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!failed.exchange(true)) error = std::current_exception();
            return;
          }
          int inline_next = -1;
          for (int next : successors[s]) {
            if (pending[next].fetch_sub(1) != 1) continue;
            if (inline_next < 0) {
              inline_next = next;
            } else {
              launch(next);
            }
          }
          s = inline_next;
        }
      });
    };
    for (int s : roots) launch(s);
    group.wait();
    tsan_acquire(&group);
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace mf::runtime::detail
