#include "runtime/memory_format.h"

#include <array>
#include <cstdio>

namespace mf::runtime {

std::string format_bytes(size_t bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    return std::to_string(bytes) + " B";
  }
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", value);
  std::string number(text);
  // "256.0" reads as noise next to "256": keep the decimal only when it says something.
  if (number.size() > 2 && number.compare(number.size() - 2, 2, ".0") == 0) {
    number.resize(number.size() - 2);
  }
  return number + " " + kUnits[unit];
}

std::string format_stats(const MemoryStats& stats) {
  return "in use " + format_bytes(stats.in_use_bytes) + ", peak " +
         format_bytes(stats.peak_in_use_bytes) + ", cached " + format_bytes(stats.cached_bytes) +
         ", reserved " + format_bytes(stats.reserved_bytes) + " in " +
         std::to_string(stats.system_allocations) +
         (stats.system_allocations == 1 ? " system allocation" : " system allocations") +
         ", limit " + format_bytes(stats.limit_bytes);
}

}  // namespace mf::runtime
