#include "base/stack_guard.h"

#include <pthread.h>

#include <cstdint>
#include <limits>

namespace mf {
namespace {

// The lowest address of the calling thread's stack (it grows down), read once per thread; 0 when
// unknown.
uintptr_t stack_low() {
  thread_local uintptr_t low = [] {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return uintptr_t{0};
    void* address = nullptr;
    size_t size = 0;
    const int rc = pthread_attr_getstack(&attr, &address, &size);
    pthread_attr_destroy(&attr);
    return rc == 0 ? reinterpret_cast<uintptr_t>(address) : uintptr_t{0};
  }();
  return low;
}

}  // namespace

size_t stack_bytes_left() {
  const uintptr_t low = stack_low();
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (low == 0 || here <= low) return std::numeric_limits<size_t>::max();
  return here - low;
}

bool enough_stack_left() {
  return stack_bytes_left() >= kStackReserveBytes;
}

std::string stack_used_up_message() {
  return "the thread's stack is nearly used up (" + std::to_string(stack_bytes_left() >> 10) +
         " KiB left, " + std::to_string(kStackReserveBytes >> 10) +
         " KiB kept for the kernels); nest fewer calls, or run on a thread with a larger stack";
}

}  // namespace mf
