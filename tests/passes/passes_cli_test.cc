// `mf passes` and `mf ir check`, run as a user would.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "passes/compiler.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes {
namespace {

struct MfRun {
  int code = -1;
  std::string out;  // stdout and stderr together
};

MfRun run_mf(const std::string& args) {
  const std::string command = std::string(MF_BINARY) + " " + args + " 2>&1";
  MfRun run;
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.out.append(buffer, n);
  const int status = pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(PassesCliTest, PrintsThePipelinePerLevel) {
  MfRun o0 = run_mf("passes --jit O0");
  EXPECT_EQ(o0.code, 0) << o0.out;
  EXPECT_NE(o0.out.find("infer-shapes"), std::string::npos) << o0.out;
  EXPECT_EQ(o0.out.find("constant-folding"), std::string::npos) << o0.out;
  MfRun o2 = run_mf("passes --jit O2 --fusion 0 --set mode=GRAPH_MODE");
  EXPECT_EQ(o2.code, 0) << o2.out;
  EXPECT_NE(o2.out.find("constant-folding                   jit_level O1         simplify"),
            std::string::npos)
      << o2.out;
  EXPECT_NE(o2.out.find("executor SinkExecutor"), std::string::npos) << o2.out;
  EXPECT_NE(o2.out.find("plan-memory"), std::string::npos) << o2.out;
  // A jit region of a PYNATIVE run is never sunk: O2 there is O0, and the header says why.
  MfRun pynative = run_mf("passes --jit O2 --fusion 0");
  EXPECT_EQ(pynative.code, 0) << pynative.out;
  EXPECT_NE(pynative.out.find("pipeline: jit_level O0"), std::string::npos) << pynative.out;
  EXPECT_NE(pynative.out.find("asked for O2 run at O0, as in MindSpore"), std::string::npos)
      << pynative.out;
}

TEST(PassesCliTest, UnknownPassIsAUserError) {
  MfRun r = run_mf("passes --disable-pass nope");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("error: --disable_pass=nope names no pass; known passes: "),
            std::string::npos)
      << r.out;
}

TEST(PassesCliTest, IrCheckAcceptsEveryDumpAndReportsErrors) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mf_passes_cli_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  CompileOptions options;
  options.jit_level = JitLevel::kO1;
  options.dump = {2, dir, "net"};
  const CompiledGraph compiled = compile(testing::parse(R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = call(%para1_x) {graph: "f"} : (f32(2)) -> (f32(2))
  Return(%0)
}

subgraph @f(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  Return(%0)
}
)"),
                                         options);
  MfRun first = run_mf("ir check " + compiled.dump_files.front().string());
  EXPECT_EQ(first.code, 0);
  EXPECT_EQ(first.out, "ok: 2 nodes, 1 subgraphs\n");
  for (const auto& file : compiled.dump_files) {
    if (file.extension() != ".ir") continue;
    MfRun r = run_mf("ir check " + file.string());
    EXPECT_EQ(r.code, 0) << file << ": " << r.out;
    EXPECT_TRUE(r.out.starts_with("ok: ")) << r.out;
  }
  const auto bad = dir / "bad.ir";
  std::ofstream(bad) << "subgraph @m() {\n  Return(%0)\n}\n";
  MfRun r = run_mf("ir check " + bad.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("bad.ir:2:10: expected a defined value"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mf::passes
