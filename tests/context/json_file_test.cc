#include "context/json_file.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "context/policy.h"
#include "tests/context/context_fixture.h"

namespace mf::context {
namespace {

using ::testing::HasSubstr;

// Writes `text` to a fresh file in the temp directory and returns its path.
std::filesystem::path write_file(const std::string& name, const std::string& text) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mf_context_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path;
}

TEST_F(ContextTest, LoadsAValidFile) {
  const auto file = write_file("ok.json", R"({
    "mode": "GRAPH_MODE",
    "save_graphs": true,
    "jit_config": {"jit_level": "O1"},
    "max_device_memory": "3.5GB",
    "auto_parallel_context": {"device_num": 2}
  })");
  load_file(file);
  EXPECT_EQ(get("mode"), 0);
  EXPECT_EQ(get("save_graphs"), 2);
  EXPECT_EQ(get("jit_config.jit_level"), "O1");
  EXPECT_EQ(get("max_device_memory"), "3.5GB");
  EXPECT_EQ(get("auto_parallel_context.device_num"), 2);
}

TEST_F(ContextTest, ReadJsonFileChecksButDoesNotSet) {
  const auto file = write_file("check.json", R"({"mode": 0})");
  EXPECT_EQ(read_json_file(file), (Json{{"mode", 0}}));
  EXPECT_EQ(get("mode"), 1);
}

TEST_F(ContextTest, MalformedJsonNamesFileLineAndColumn) {
  const auto file = write_file("bad.json", "{\n  \"mode\": 0,\n  \"save_graphs\" 2\n}\n");
  const std::string message = error_message([&] { load_file(file); });
  EXPECT_THAT(message,
              HasSubstr("context file '" + file.string() + "' is not valid JSON at line 3"));
  EXPECT_THAT(message, HasSubstr("column 17"));
  EXPECT_EQ(get("mode"), 1);
}

TEST_F(ContextTest, FileWithUnknownKeyOrBadValueNamesTheFile) {
  const auto unknown = write_file("unknown.json", R"({"mode": 0, "save_graph": 1})");
  EXPECT_EQ(error_message([&] { load_file(unknown); }),
            "For 'context.set_context', the keyword argument 'save_graph' is not recognized; did "
            "you mean 'save_graphs'? (in context file '" +
                unknown.string() + "')");
  EXPECT_EQ(get("mode"), 1);  // all-or-nothing across the file
  const auto bad = write_file("bad_value.json", R"({"deterministic": "YES"})");
  EXPECT_THAT(error_message([&] { load_file(bad); }),
              HasSubstr("must be one of [ON, OFF], but got 'YES'. (in context file"));
}

TEST_F(ContextTest, FileMustHoldAnObject) {
  const auto file = write_file("array.json", "[1, 2]");
  EXPECT_THAT(error_message([&] { read_json_file(file); }),
              HasSubstr("must hold a JSON object of key -> value"));
}

TEST_F(ContextTest, MissingFileIsNotFound) {
  EXPECT_EQ(error_message([] { read_json_file("/nonexistent/ctx.json"); }, ErrorKind::kNotFound),
            "cannot read context file '/nonexistent/ctx.json': No such file or directory");
}

TEST_F(ContextTest, EnvConfigFileIsReadAtSet) {
  const auto file = write_file(
      "env.json",
      R"({"rdr": {"enable": true, "mode": 2, "path": "/tmp/rdr"}, "sys": {"mem_Reuse": false}})");
  set({{"env_config_path", file.string()}});
  EXPECT_EQ(get("env_config_path"), file.string());
  const Json& env = snapshot().env_config();
  EXPECT_EQ(env["sys"]["mem_Reuse"], false);
  EXPECT_EQ(env["rdr"]["mode"], 2);
  set({{"env_config_path", ""}});
  EXPECT_TRUE(snapshot().env_config().is_null());
}

TEST_F(ContextTest, EnvConfigErrors) {
  EXPECT_THAT(error_message(
                  [] {
                    set({{"env_config_path", "/nonexistent/env.json"}});
                  },
                  ErrorKind::kNotFound),
              HasSubstr("cannot read env_config_path file '/nonexistent/env.json'"));
  const auto malformed = write_file("env_bad.json", "{\"sys\": {\"mem_Reuse\": fals}}");
  EXPECT_THAT(
      error_message([&] {
        set({{"env_config_path", malformed.string()}});
      }),
      HasSubstr("env_config_path file '" + malformed.string() + "' is not valid JSON at line 1"));
  const auto wrong = write_file("env_wrong.json", R"({"sys": {"mem_Reuse": "no"}})");
  EXPECT_THAT(error_message([&] {
                set({{"env_config_path", wrong.string()}});
              }),
              HasSubstr("sys.mem_Reuse must be true or false, got \"no\""));
  const auto relative = write_file("env_rel.json", R"({"rdr": {"path": "rdr"}})");
  EXPECT_THAT(error_message([&] {
                set({{"env_config_path", relative.string()}});
              }),
              HasSubstr("rdr.path must be an absolute path"));
  const auto mode = write_file("env_mode.json", R"({"rdr": {"mode": 3}})");
  EXPECT_THAT(error_message([&] {
                set({{"env_config_path", mode.string()}});
              }),
              HasSubstr("rdr.mode must be 1 (export on failure) or 2"));
  EXPECT_EQ(get("env_config_path"), "");
}

}  // namespace
}  // namespace mf::context
