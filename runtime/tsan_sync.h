#pragma once
// Happens-before edges that ThreadSanitizer cannot see for itself. oneTBB (Debian's libtbb, the
// executors' inter-op tasks) is not instrumented, so TSan does not see that a task starts after it
// was submitted, nor that task_group::wait returns after every task ended: each step run on a
// worker and read afterwards would be reported as a race (about 900 reports in runtime_tests when
// parallel_for was on TBB too). The code that hands work to TBB states those edges here,
// precisely (a task acquires only what its submitter released, never what sibling tasks did, so
// real races between tasks are still reported). libgomp, parallel_for's team, cannot be annotated
// (its region reads its shared variables before any annotation runs): under TSan, parallel_for
// runs its chunks on std::threads instead. Outside a -fsanitize=thread build these are empty
// inline functions.

#if defined(__SANITIZE_THREAD__)
#define MF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MF_TSAN 1
#endif
#endif

#ifdef MF_TSAN
#include <sanitizer/tsan_interface.h>
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
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

// While alive, this thread's plain writes are not recorded. For the copy oneTBB makes of a task's
// closure when it is submitted: the task reads its captures before it can acquire anything (the
// token it acquires is one of them), so those writes would race with the reads in TSan's view.
// The closure is never written again after the copy.
class TsanIgnoreWrites {
 public:
  TsanIgnoreWrites() {
#ifdef MF_TSAN
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
  }
  ~TsanIgnoreWrites() {
#ifdef MF_TSAN
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
  }
  TsanIgnoreWrites(const TsanIgnoreWrites&) = delete;
  TsanIgnoreWrites& operator=(const TsanIgnoreWrites&) = delete;
};

}  // namespace mf::runtime
