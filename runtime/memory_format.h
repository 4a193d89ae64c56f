#pragma once
// Human-readable byte counts for messages and reports ("256 MiB", "1.1 GiB"), so every OutOfMemory
// error and memory report in the engine spells sizes the same way.

#include <cstddef>
#include <string>

namespace mf::runtime {

// Binary units (B, KiB, MiB, GiB, TiB) with at most one decimal, trailing ".0" dropped: 268435456
// -> "256 MiB", 1181116006 -> "1.1 GiB", 100 -> "100 B".
std::string format_bytes(size_t bytes);

}  // namespace mf::runtime
