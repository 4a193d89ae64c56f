#pragma once
// How much of the calling thread's stack is left, so that a recursion whose depth comes from the
// input (nested calls in an IR file, nested cells while tracing, control flow in an executor) stops
// with a clear error before it runs out. max_call_depth bounds the depth for the default 8 MiB
// stack of a normal build; a thread with a smaller stack, or a sanitizer build whose frames are
// several times larger (AddressSanitizer overflowed at 4000 levels), would crash before reaching
// it without this check.

#include <cstddef>
#include <string>

namespace mf {

// Stack kept free below a checked level for what runs under it (dispatch, executors, kernels,
// oneDNN): 1 MiB.
inline constexpr size_t kStackReserveBytes = size_t{1} << 20;

// Bytes of the calling thread's stack below the caller's frame; SIZE_MAX when the thread's stack
// bounds cannot be read (then nothing is refused).
size_t stack_bytes_left();

// True while at least kStackReserveBytes are left. A recursion checks it at each level:
//   MF_CHECK(enough_stack_left(), InvalidArgument, "call depth ", depth, " in graph @", name, ": ",
//            stack_used_up_message());
bool enough_stack_left();

// "the thread's stack is nearly used up (N KiB left, 1024 KiB kept for the kernels); nest fewer
// calls, or run on a thread with a larger stack"
std::string stack_used_up_message();

}  // namespace mf
