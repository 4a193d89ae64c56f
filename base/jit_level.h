// The compile level of a graph (MindSpore's jit_config.jit_level): the context decides it, the
// pass table and the executors act on it. One enum for both layers.
#pragma once

#include <cstdint>
#include <string_view>

namespace mf {

// O0: only the passes correctness needs, kernel by kernel. O1: + simplification and fusion.
// O2: + the whole graph sunk (one arena, pre-bound kernels).
enum class JitLevel : uint8_t { kO0, kO1, kO2 };

std::string_view to_string(JitLevel level);  // "O0" / "O1" / "O2"

}  // namespace mf
