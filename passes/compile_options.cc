#include "passes/compile_options.h"

namespace mf::passes {

std::string_view to_string(JitLevel level) {
  switch (level) {
    case JitLevel::kO0:
      return "O0";
    case JitLevel::kO1:
      return "O1";
    case JitLevel::kO2:
      return "O2";
  }
  return "?";
}

std::string_view to_string(MemoryLevel level) {
  return level == MemoryLevel::kO0 ? "O0" : "O1";
}

}  // namespace mf::passes
