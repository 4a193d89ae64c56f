#pragma once
// Runs a function on a new thread with a stack of a chosen size (a thread a user made small), for
// the tests of what a deep recursion does when the stack runs low.

#include <pthread.h>

#include <cstddef>
#include <exception>
#include <functional>
#include <stdexcept>

namespace mf::testing {

// Runs `f` on a thread with a `bytes` stack and waits for it; rethrows what `f` threw.
inline void run_on_stack(size_t bytes, const std::function<void()>& f) {
  struct Job {
    const std::function<void()>* f;
    std::exception_ptr error;
  } job{&f, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  const bool sized = pthread_attr_setstacksize(&attr, bytes) == 0;
  pthread_t thread;
  const bool started = sized && pthread_create(
                                    &thread, &attr,
                                    [](void* arg) -> void* {
                                      auto* j = static_cast<Job*>(arg);
                                      try {
                                        (*j->f)();
                                      } catch (...) {
                                        j->error = std::current_exception();
                                      }
                                      return nullptr;
                                    },
                                    &job) == 0;
  pthread_attr_destroy(&attr);
  if (!started) throw std::runtime_error("run_on_stack: cannot start a thread with that stack");
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace mf::testing
