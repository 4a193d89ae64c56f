// The pass tables in the docs are `mf passes` output, not copies that drift: each fenced block
// after a `<!-- mf passes ARGS -->` line in docs/modes.md must be what `mf passes ARGS` prints now.

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>

#include "tests/tools/mf_cli.h"

namespace mf::testing {
namespace {

TEST(DocsPassesTest, EveryPassTableInTheDocsIsWhatMfPassesPrints) {
  const std::string page = slurp(std::string(MF_SOURCE_DIR) + "/docs/modes.md");
  std::istringstream in(page);
  const std::regex marker(R"(^<!-- mf passes (.*) -->$)");
  std::string line;
  int tables = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, marker)) continue;
    const std::string args = m[1];
    std::string fence;
    ASSERT_TRUE(std::getline(in, fence) && fence.rfind("```", 0) == 0)
        << "a fenced block must follow <!-- mf passes " << args << " -->";
    std::string shown;
    while (std::getline(in, line) && line != "```") shown += line + "\n";
    const MfRun run = run_mf("passes " + args);
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_EQ(shown, run.out) << "docs/modes.md's table for `mf passes " << args
                              << "` is stale; paste the command's output";
    ++tables;
  }
  EXPECT_GE(tables, 3) << "docs/modes.md lost its pass tables";
}

}  // namespace
}  // namespace mf::testing
