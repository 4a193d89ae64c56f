// docs/context-keys.md has one row per key of the three tables, and its "here on CPU" column is the
// key table's on_cpu text: the documented key table cannot drift from what the engine does.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "context/key_table.h"

namespace mf::context {
namespace {

std::string context_keys_doc() {
  std::ifstream in(std::string(MF_SOURCE_DIR) + "/docs/context-keys.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string escaped(std::string text) {
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) {
    text.replace(at, 1, "\\|");
  }
  return text;
}

TEST(ContextKeysDocTest, EveryKeyHasItsRowWithWhatItDoesOnCpu) {
  const std::string text = context_keys_doc();
  int rows = 0;
  for (const auto& [prefix, table] :
       {std::pair{std::string(), &context_keys()},
        std::pair{std::string("auto_parallel_context."), &auto_parallel_keys()},
        std::pair{std::string("ps_context."), &ps_keys()}}) {
    for (const KeySpec& spec : *table) {
      const std::string row = "| `" + prefix + spec.name + "` | " + device_names(spec.devices) +
                              " | " + escaped(spec.on_cpu) + " | " +
                              (spec.compile_relevant ? "yes" : "") + " |";
      EXPECT_NE(text.find(row), std::string::npos) << "docs/context-keys.md lacks the row\n" << row;
      ++rows;
    }
  }
  EXPECT_GE(rows, 60);  // 43 set_context, 19 auto-parallel and 6 ps keys today
}

}  // namespace
}  // namespace mf::context
