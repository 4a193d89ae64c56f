// The layers only include downwards (docs/design.md, "Layers"): a lower layer that includes a
// higher one fails here, naming the file and the include, before the dependency takes root.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

// What each layer may include besides itself.
const std::map<std::string, std::set<std::string>> kMayInclude = {
    {"base", {}},
    {"context", {"base"}},
    {"ir", {"base"}},
    {"runtime", {"base", "ir"}},
    {"passes", {"base", "ir", "runtime"}},
    {"engine", {"base", "context", "ir", "runtime", "passes"}},
};

TEST(LayeringTest, NoLayerIncludesAHigherOne) {
  const std::set<std::string> layers = [] {
    std::set<std::string> names;
    for (const auto& [layer, below] : kMayInclude) names.insert(layer);
    return names;
  }();
  const std::regex include(R"(#include\s+"([a-z_]+)/)");
  int files = 0;
  for (const auto& [layer, below] : kMayInclude) {
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(MF_SOURCE_DIR) / layer)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".h" && ext != ".cc") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string target = m[1];
        if (target == layer || !layers.contains(target)) continue;
        EXPECT_TRUE(below.contains(target))
            << fs::relative(entry.path(), MF_SOURCE_DIR).string() << " (layer " << layer
            << ") includes " << target << "/: " << line;
      }
    }
  }
  // The walk saw the source tree, not an empty folder.
  EXPECT_GT(files, 200);
}

}  // namespace
