// The README's second command is what CI runs: keep .ci/run and the README from drifting apart.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lines inside the README's first two ```sh blocks.
std::vector<std::string> readme_commands() {
  std::istringstream in(read(std::string(MF_SOURCE_DIR) + "/README.md"));
  std::vector<std::string> commands;
  std::string line;
  bool inside = false;
  while (std::getline(in, line) && commands.size() < 2) {
    if (line == "```sh") {
      inside = true;
    } else if (line == "```") {
      inside = false;
    } else if (inside) {
      commands.push_back(line);
    }
  }
  return commands;
}

TEST(ReadmeTest, OpensWithTheRunCommandAndTheTestCommand) {
  const auto commands = readme_commands();
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_NE(commands[0].find("tools/install-deps.sh"), std::string::npos);
  EXPECT_NE(commands[0].find("build/mf run"), std::string::npos);
  EXPECT_NE(commands[1].find("ctest --test-dir build --output-on-failure"), std::string::npos);
}

TEST(ReadmeTest, CiRunsTheReadmeTestCommandVerbatim) {
  const auto commands = readme_commands();
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_NE(read(std::string(MF_SOURCE_DIR) + "/.ci/run").find(commands[1]), std::string::npos)
      << ".ci/run must contain: " << commands[1];
}

}  // namespace
