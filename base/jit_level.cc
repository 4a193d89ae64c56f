#include "base/jit_level.h"

namespace mf {

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

}  // namespace mf
