#pragma once
// Fusion pass tests: run one fusion pass at a given opt_level on IR text and print the result
// (the main graph, then the fused bodies).

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "passes/compile_options.h"
#include "passes/fusion/fusion_passes.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes::testing {

inline CompileOptions fusion_options(int level) {
  CompileOptions options;
  options.fusion_level = level;
  options.fusion.stitch = level >= 3;
  options.fusion.parallel = level >= 3;
  return options;
}

// Options at `level` that write graph_kernel_dump/ text under `dir`, emptied first.
inline CompileOptions dumping_options(int level, const std::filesystem::path& dir) {
  std::filesystem::remove_all(dir);
  CompileOptions options = fusion_options(level);
  options.fusion.dump_as_text = true;
  options.dump.dir = dir;
  return options;
}

// A dump file's text ("" when it is missing).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace mf::passes::testing
