// The compile cache across processes, through the `mf` binary: a second process hits and prints
// the same outputs (the .npy bytes equal those of an uncached run); two processes compiling the
// same network at once both succeed and leave one good entry; MF_CACHE_MAX_BYTES bounds the cache;
// and `mf cache ls|verify|clear|explain` report what is there.

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string out;  // stdout and stderr together
};

Result sh(const std::string& command) {
  Result r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The lines a run prints that must not depend on the cache.
std::string output_lines(const std::string& out) {
  std::string lines;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(start, end - start);
    if (line.starts_with("output ")) lines += line + "\n";
    start = end + 1;
  }
  return lines;
}

class CompileCacheProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    root_ = fs::temp_directory_path() /
            ("mf_cache_proc_" + std::to_string(::getpid()) + "_" + std::to_string(++counter));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string cache_flags() const {
    return " --set enable_compile_cache=true --set compile_cache_path=" + root_.string();
  }
  Result mf_run(const std::string& net, const std::string& extra = "",
                const std::string& env = "") {
    return sh(env + " " + MF_BINARY + " run " + net + " --mode graph" + cache_flags() + " " +
              extra);
  }
  Result mf_cache(const std::string& args) {
    return sh(std::string(MF_BINARY) + " cache " + args +
              " --set compile_cache_path=" + root_.string());
  }
  std::vector<fs::path> files() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_ / "rank_0", ec)) out.push_back(e.path());
    return out;
  }

  fs::path root_;
};

TEST_F(CompileCacheProcessTest, SecondProcessHitsWithIdenticalOutputs) {
  const Result first = mf_run("transformer", "--output-dir " + (root_ / "first").string());
  ASSERT_EQ(first.status, 0) << first.out;
  EXPECT_NE(first.out.find("compile cache: miss "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("stored in"), std::string::npos) << first.out;
  const Result second = mf_run("transformer", "--output-dir " + (root_ / "second").string());
  ASSERT_EQ(second.status, 0) << second.out;
  EXPECT_NE(second.out.find("compile cache: hit "), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("no pass ran"), std::string::npos) << second.out;
  EXPECT_EQ(output_lines(second.out), output_lines(first.out));
  const Result uncached =
      sh(std::string(MF_BINARY) + " run transformer --mode graph --output-dir " +
         (root_ / "uncached").string());
  ASSERT_EQ(uncached.status, 0) << uncached.out;
  EXPECT_EQ(uncached.out.find("compile cache"), std::string::npos) << uncached.out;
  const std::string hit_bytes = read_bytes(root_ / "second" / "output.npy");
  ASSERT_FALSE(hit_bytes.empty());
  EXPECT_EQ(hit_bytes, read_bytes(root_ / "first" / "output.npy"));
  EXPECT_EQ(hit_bytes, read_bytes(root_ / "uncached" / "output.npy"));
}

TEST_F(CompileCacheProcessTest, ChangedSettingsMissAcrossProcessesAndSayWhy) {
  ASSERT_EQ(mf_run("mlp").status, 0);
  const Result o2 = mf_run("mlp", "--set jit_config.jit_level=O2");
  ASSERT_EQ(o2.status, 0) << o2.out;
  EXPECT_NE(o2.out.find("compile cache: miss"), std::string::npos) << o2.out;
  EXPECT_NE(o2.out.find("policy.jit_level O0 -> O2"), std::string::npos) << o2.out;
  const Result other_input = mf_run("mlp", "--seed 3");  // other weights and input values
  EXPECT_NE(other_input.out.find("compile cache: hit"), std::string::npos) << other_input.out;

  const Result explain = mf_cache("explain mlp --set memory_optimize_level=O1");
  ASSERT_EQ(explain.status, 0) << explain.out;
  EXPECT_NE(explain.out.find("miss: no entry for"), std::string::npos) << explain.out;
  EXPECT_NE(explain.out.find("policy.memory_optimize_level O0 -> O1"), std::string::npos)
      << explain.out;
  const Result hit = mf_cache("explain mlp --set jit_config.jit_level=O2");
  EXPECT_NE(hit.out.find("hit: entry"), std::string::npos) << hit.out;
}

TEST_F(CompileCacheProcessTest, TwoConcurrentWritersLeaveOneGoodEntry) {
  for (int round = 0; round < 3; ++round) {
    fs::remove_all(root_ / "rank_0");
    const std::string run = std::string(MF_BINARY) + " run transformer --mode graph" +
                            cache_flags() + " > " + root_.string() + "/w";
    const Result both = sh("(" + run + "1.txt 2>&1 & " + run + "2.txt 2>&1 & wait %1; a=$?; " +
                           "wait %2; b=$?; echo status $a $b)");
    EXPECT_NE(both.out.find("status 0 0"), std::string::npos) << both.out;
    const std::string w1 = read_bytes(root_ / "w1.txt"), w2 = read_bytes(root_ / "w2.txt");
    EXPECT_NE(w1.find("compile cache: "), std::string::npos) << w1;
    EXPECT_EQ(output_lines(w1), output_lines(w2));
    ASSERT_EQ(files().size(), 1u);  // one entry, no leftover temporaries
    EXPECT_EQ(files()[0].extension(), ".mfcc");
    const Result verify = mf_cache("verify");
    EXPECT_EQ(verify.status, 0) << verify.out;
    const Result third = mf_run("transformer");
    EXPECT_NE(third.out.find("compile cache: hit"), std::string::npos) << third.out;
    EXPECT_EQ(output_lines(third.out), output_lines(w1));
  }
}

TEST_F(CompileCacheProcessTest, LsVerifyClear) {
  ASSERT_EQ(mf_run("mlp").status, 0);
  ASSERT_EQ(mf_run("softmax").status, 0);
  const Result ls = mf_cache("ls");
  ASSERT_EQ(ls.status, 0) << ls.out;
  EXPECT_NE(ls.out.find("2 entries"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("Mlp <Tensor[Float32]"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("LAST USED"), std::string::npos) << ls.out;
  EXPECT_EQ(mf_cache("verify").status, 0);

  // Damage one entry: verify names it and fails; a run replaces it; verify passes again.
  fs::path victim;
  for (const auto& f : files()) {
    if (read_bytes(f).find("Mlp") != std::string::npos) victim = f;
  }
  ASSERT_FALSE(victim.empty());
  std::string bytes = read_bytes(victim);
  bytes[bytes.size() - 3] ^= 0x11;
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes;
  const Result bad = mf_cache("verify");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("BAD  " + victim.stem().string()), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("checksum mismatch"), std::string::npos) << bad.out;
  EXPECT_NE(
      bad.out.find("error: 1 of 2 compile-cache entries are damaged: " + victim.stem().string()),
      std::string::npos)
      << bad.out;
  const Result rerun = mf_run("mlp");
  EXPECT_NE(rerun.out.find("compile cache: miss"), std::string::npos) << rerun.out;
  EXPECT_NE(rerun.out.find("unusable"), std::string::npos) << rerun.out;
  EXPECT_NE(rerun.out.find("warning"), std::string::npos) << rerun.out;
  EXPECT_EQ(mf_cache("verify").status, 0);

  const Result clear = mf_cache("clear");
  EXPECT_NE(clear.out.find("removed 2 entries"), std::string::npos) << clear.out;
  EXPECT_TRUE(files().empty());
  EXPECT_NE(mf_cache("ls").out.find("0 entries"), std::string::npos);
}

TEST_F(CompileCacheProcessTest, MaxBytesFromTheEnvironment) {
  const Result tiny = mf_run("mlp", "", "MF_CACHE_MAX_BYTES=100");
  ASSERT_EQ(tiny.status, 0) << tiny.out;
  EXPECT_NE(tiny.out.find("exceeds the cache bound of 100 bytes"), std::string::npos) << tiny.out;
  EXPECT_TRUE(files().empty());
  const Result ls = sh("MF_CACHE_MAX_BYTES=64M " + std::string(MF_BINARY) +
                       " cache ls --set compile_cache_path=" + root_.string());
  EXPECT_NE(ls.out.find("bound 64 MiB"), std::string::npos) << ls.out;
  const Result junk = mf_run("mlp", "", "MF_CACHE_MAX_BYTES=lots");
  EXPECT_EQ(junk.status, 0) << junk.out;
  EXPECT_NE(junk.out.find("MF_CACHE_MAX_BYTES='lots' is not a byte count"), std::string::npos)
      << junk.out;
}

TEST_F(CompileCacheProcessTest, UnwritableDirectoryWarnsAndRuns) {
  const fs::path blocker = root_ / "file";
  std::ofstream(blocker) << "x";
  const Result r = sh(std::string(MF_BINARY) +
                      " run mlp --mode graph --set enable_compile_cache=true "
                      "--set compile_cache_path=" +
                      blocker.string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("cannot write to"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("running uncached"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output output:"), std::string::npos) << r.out;
}

}  // namespace
