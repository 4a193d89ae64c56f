#pragma once
// Human-readable byte counts for messages and reports ("256 MiB", "1.1 GiB"), so every OutOfMemory
// error and memory report in the engine spells sizes the same way.

#include <cstddef>
#include <string>

#include "runtime/memory_pool.h"

namespace mf::runtime {

// Binary units (B, KiB, MiB, GiB, TiB) with at most one decimal, trailing ".0" dropped: 268435456
// -> "256 MiB", 1181116006 -> "1.1 GiB", 100 -> "100 B".
std::string format_bytes(size_t bytes);

// One line for reports and `mf run`: "in use 12 MiB, peak 40 MiB, cached 8 MiB, reserved 1 GiB in 1
// system allocation, limit 1 TiB".
std::string format_stats(const MemoryStats& stats);

}  // namespace mf::runtime
