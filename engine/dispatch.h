#pragma once
// The op dispatcher: every mf::ops call comes here. In PYNATIVE mode it infers the output types on
// the caller's thread (so shape errors surface at the call site), allocates the outputs from the
// pool, and hands the kernel to the eager executor, which runs it now (pynative_synchronize) or
// later, in order.

#include <source_location>
#include <span>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "ir/attribute.h"

namespace mf::engine {

std::vector<Tensor> call_op(std::string_view op, std::span<const Tensor> inputs, ir::Attrs attrs,
                            std::source_location where = std::source_location::current());

// Waits until every op submitted so far has run; rethrows a pending asynchronous error.
void sync();

}  // namespace mf::engine
