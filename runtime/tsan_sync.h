#pragma once
// Happens-before edges that ThreadSanitizer cannot see for itself. oneTBB (Debian's libtbb, the
// executors' inter-op tasks) and libgomp (parallel_for's OpenMP team) are not instrumented, so TSan
// does not see that a task starts after it was submitted, nor that parallel_for and
// task_group::wait return after every task ended: each kernel chunk run on a worker and read
// afterwards would be reported as a race (about 900 reports in runtime_tests). The code that hands
// work to them states those edges here, precisely (a task acquires only what
// its submitter released, never what sibling tasks did, so real races between tasks are still
// reported). Outside a -fsanitize=thread build these are empty inline functions.

#if defined(__SANITIZE_THREAD__)
#define MF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MF_TSAN 1
#endif
#endif

#ifdef MF_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace mf::runtime {

// What this thread did so far happens before whatever follows a tsan_acquire of `token`.
inline void tsan_release([[maybe_unused]] const void* token) {
#ifdef MF_TSAN
  __tsan_release(const_cast<void*>(token));
#endif
}

inline void tsan_acquire([[maybe_unused]] const void* token) {
#ifdef MF_TSAN
  __tsan_acquire(const_cast<void*>(token));
#endif
}

}  // namespace mf::runtime
