#include "passes/dump.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "ir/parser.h"
#include "passes/compiler.h"
#include "tests/passes/pass_test_util.h"
#include "tests/unique_temp_path.h"

namespace mf::passes {
namespace {

namespace fs = std::filesystem;

const char* kNet = R"(
subgraph @main(%para1_x: f32(2, 3)) {
  %const1 = Constant f32() [1]
  %0 = mul(%para1_x, %const1) : (f32(2, 3), f32()) -> (f32(2, 3))
      # scope: Default/net-Net/scale
  %1 = call(%0) {graph: "f"} : (f32(2, 3)) -> (f32(2, 3))
  Return(%1)
}

subgraph @f(%para1_x: f32(2, 3)) {
  %0 = exp(%para1_x) : (f32(2, 3)) -> (f32(2, 3))
  Return(%0)
}
)";

class DumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = mf::testing::unique_temp_path(
        "mf_dump_test_" +
        std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CompiledGraph compile_at(int level, JitLevel jit = JitLevel::kO1, std::string prefix = "") {
    CompileOptions options;
    options.jit_level = jit;
    options.dump = {level, dir_, std::move(prefix)};
    return compile(testing::parse(kNet), options);
  }

  std::vector<std::string> names(const CompiledGraph& compiled) const {
    std::vector<std::string> out;
    for (const fs::path& p : compiled.dump_files) {
      EXPECT_EQ(p.parent_path(), dir_);
      EXPECT_TRUE(fs::exists(p)) << p;
      out.push_back(p.filename().string());
    }
    return out;
  }

  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path dir_;
};

TEST_F(DumpTest, LevelZeroWritesNothing) {
  const CompiledGraph compiled = compile_at(0);
  EXPECT_TRUE(compiled.dump_files.empty());
  EXPECT_FALSE(fs::exists(dir_));
  ASSERT_NE(compiled.plan, nullptr);
  EXPECT_EQ(compiled.plan->graph, compiled.graph.get());
  EXPECT_EQ(compiled.passes.back().name, "plan-memory");
}

TEST_F(DumpTest, LevelOneWritesKeyStagesWithPrefix) {
  const CompiledGraph compiled = compile_at(1, JitLevel::kO1, "mlp");
  EXPECT_EQ(names(compiled), (std::vector<std::string>{"mlp_0001_trace.ir", "mlp_0002_frontend.ir",
                                                       "mlp_0003_backend.ir"}));
  // The trace is the graph as given; the front end inlined @f and dropped x * 1.
  EXPECT_NE(read(compiled.dump_files[0]).find("call(%0)"), std::string::npos);
  const std::string frontend = read(compiled.dump_files[1]);
  EXPECT_EQ(frontend.find("call("), std::string::npos) << frontend;
  EXPECT_NE(frontend.find("%0 = exp(%para1_x)"), std::string::npos) << frontend;
}

TEST_F(DumpTest, LevelTwoWritesEveryPassThePlanAndASummary) {
  const CompiledGraph compiled = compile_at(2, JitLevel::kO0);
  EXPECT_EQ(names(compiled),
            (std::vector<std::string>{"0001_trace.ir", "0002_infer-shapes.ir", "0003_inline.ir",
                                      "0004_format-transform.ir", "0005_dead-code-elimination.ir",
                                      "0006_frontend.ir", "0007_select-kernels.ir",
                                      "0008_backend.ir", "0009_pass_summary.txt"}));
  const std::string backend = read(compiled.dump_files[7]);
  EXPECT_NE(backend.find("# kernels of @main:\n#   %0 mul: cpu kernel\n#   %1 exp: cpu kernel\n"),
            std::string::npos)
      << backend;
  EXPECT_NE(backend.find("# Memory plan of graph @main"), std::string::npos) << backend;
  const std::string summary = read(compiled.dump_files[8]);
  EXPECT_NE(summary.find("inline"), std::string::npos);
  EXPECT_NE(summary.find("1 nodes added, 1 removed, 0 rewritten"), std::string::npos) << summary;
  EXPECT_NE(summary.find("plan-memory"), std::string::npos) << summary;
}

TEST_F(DumpTest, EveryIrFileParsesBack) {
  for (JitLevel jit : {JitLevel::kO0, JitLevel::kO1, JitLevel::kO2}) {
    fs::remove_all(dir_);
    const CompiledGraph compiled = compile_at(3, jit);
    int ir_files = 0;
    for (const fs::path& p : compiled.dump_files) {
      if (p.extension() != ".ir") continue;
      ++ir_files;
      SCOPED_TRACE(p.string());
      auto parsed = ir::parse_graph_file(p.string());
      ir::verify(*parsed);
    }
    EXPECT_GE(ir_files, 6);
  }
}

TEST_F(DumpTest, LevelThreeAddsDotFilesAndFullDetail) {
  const CompiledGraph compiled = compile_at(3, JitLevel::kO0);
  const auto files = names(compiled);
  EXPECT_EQ(files[0], "0001_trace.ir");
  EXPECT_EQ(files[1], "0001_trace.dot");
  EXPECT_EQ(files[2], "0001_trace.f.dot");  // the subgraph, drawn on its own
  EXPECT_EQ(files[3], "0002_infer-shapes.ir");
  EXPECT_NE(read(dir_ / "0001_trace.dot").find("digraph"), std::string::npos);
  // Full detail prints every attribute, defaults included (reshape-free graph: check the header).
  EXPECT_NE(read(dir_ / "0001_trace.ir").find("# scope: Default/net-Net/scale"), std::string::npos);
}

TEST_F(DumpTest, UnwritableDirectoryFailsBeforeAnythingRuns) {
  fs::create_directories(dir_);
  const fs::path file = dir_ / "a_file";
  std::ofstream(file) << "x";
  CompileOptions options;
  options.dump = {1, file / "ir", ""};
  try {
    compile(testing::parse(kNet), options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cannot create the graph dump directory '" +
                                         (file / "ir").string() + "' (save_graphs_path)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(fs::directory_iterator(dir_)->path(), file);  // nothing else was written
}

TEST(AsIrCommentTest, PrefixesLinesThatAreNotCommentsYet) {
  EXPECT_EQ(as_ir_comment("a\n# b\nc"), "# a\n# b\n# c\n");
}

}  // namespace
}  // namespace mf::passes
