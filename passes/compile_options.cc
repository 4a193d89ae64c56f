#include "passes/compile_options.h"

namespace mf::passes {

std::string_view to_string(MemoryLevel level) {
  return level == MemoryLevel::kO0 ? "O0" : "O1";
}

}  // namespace mf::passes
