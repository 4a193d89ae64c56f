// `mf launch` as a user meets it: each worker gets its rank and the job's variables, its output in
// its own log (and on stdout with --join=true), and when a worker fails the launcher names it (exit
// status or signal), stops the others after --cluster_time_out and exits non-zero. Bad input is
// refused before any directory, log or worker exists; SIGTERM to the launcher reaches the workers.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "mf_cli.h"
#include "tests/unique_temp_path.h"

extern char** environ;

namespace mf {
namespace {

namespace fs = std::filesystem;
using testing::run_mf;
using testing::run_mf_with_env;
using testing::slurp;

constexpr int kWorkerFailed = 3;  // mf launch's exit status when a worker failed

class LaunchCliTest : public ::testing::Test {
 protected:
  fs::path dir_ = testing::unique_temp_path("mf_launch_cli");
  fs::path logs_ = dir_ / "logs";  // made by the launcher
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }

  std::string launch(const std::string& options) const {
    return "launch --log_dir=" + logs_.string() + " " + options;
  }
  std::string log(int rank) const {
    return slurp(logs_ / ("worker_" + std::to_string(rank) + ".log"));
  }
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(LaunchCliTest, EveryWorkerGetsItsRankAndLogsItsLines) {
  const std::string print =
      "sh -c 'echo rank=$MS_NODE_ID of $MS_WORKER_NUM at "
      "$MS_SCHED_HOST:$MS_SCHED_PORT'";
  const auto run = run_mf(launch("--worker_num=2 --join=true -- " + print));
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "[worker 0] rank=0 of 2 at 127.0.0.1:8118\n")) << run.out;
  EXPECT_TRUE(contains(run.out, "[worker 1] rank=1 of 2 at 127.0.0.1:8118\n")) << run.out;
  EXPECT_EQ(log(0), "rank=0 of 2 at 127.0.0.1:8118\n");
  EXPECT_EQ(log(1), "rank=1 of 2 at 127.0.0.1:8118\n");
  EXPECT_TRUE(contains(run.err, "mf launch: all 2 workers exited with status 0")) << run.err;

  // Without --join (false by default) the lines go to the logs only, which start afresh.
  const auto quiet =
      run_mf(launch("--worker_num=3 --master_addr=10.1.2.3 --master_port=9000 -- " + print));
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.out, "");
  EXPECT_EQ(log(0), "rank=0 of 3 at 10.1.2.3:9000\n");
  EXPECT_EQ(log(2), "rank=2 of 3 at 10.1.2.3:9000\n");
  EXPECT_EQ(run_mf(launch("--worker_num=1 --join=false -- " + print)).out, "");
}

TEST_F(LaunchCliTest, StdoutStderrAndAnUnfinishedLastLineAllReachTheLog) {
  const auto run =
      run_mf(launch("--worker_num=1 -- sh -c 'echo out; echo err >&2; printf \"no newline\"'"));
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(log(0), "out\nerr\nno newline\n");
}

TEST_F(LaunchCliTest, TheEnvironmentOfASecondNode) {
  // The launcher's own variables pass through; its RANK_ID is replaced by the worker's.
  const auto run = run_mf_with_env(
      "RANK_ID=99 MF_LAUNCH_TEST_VAR=kept",
      launch("--worker_num=2 --local_worker_num=1 --node_rank=1 -- sh -c 'echo $MS_NODE_ID "
             "$RANK_ID $RANK_SIZE $LOCAL_RANK $MS_LOCAL_WORKER_NUM $MS_ROLE $MF_LAUNCH_TEST_VAR'"));
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(log(1), "1 1 2 0 1 MS_WORKER kept\n");
  EXPECT_FALSE(fs::exists(logs_ / "worker_0.log")) << "rank 0 belongs to the other node";
  EXPECT_TRUE(contains(run.err, "started ranks 1..1 of 2")) << run.err;
}

TEST_F(LaunchCliTest, AWorkerThatExitsNonZeroIsNamedWithItsStatus) {
  const auto run =
      run_mf(launch("--worker_num=2 -- sh -c '[ $MS_NODE_ID = 1 ] && exit 3; exit 0'"));
  EXPECT_EQ(run.code, kWorkerFailed);
  EXPECT_TRUE(contains(run.err, "1 of 2 workers failed, worker 1 first")) << run.err;
  EXPECT_TRUE(contains(run.err, "mf launch: worker 1 (pid ")) << run.err;
  EXPECT_TRUE(contains(
      run.err, ") exited with status 3; its log: " + (logs_ / "worker_1.log").string() + "\n"))
      << run.err;
  EXPECT_FALSE(contains(run.err, "worker 0 (pid")) << "worker 0 exited 0: " << run.err;
}

TEST_F(LaunchCliTest, AWorkerKilledByASignalIsNamedWithTheSignal) {
  const auto run =
      run_mf(launch("--worker_num=2 -- sh -c '[ $MS_NODE_ID = 1 ] && kill -9 $$; exit 0'"));
  EXPECT_EQ(run.code, kWorkerFailed);
  EXPECT_TRUE(contains(run.err, "mf launch: worker 1 (pid ")) << run.err;
  EXPECT_TRUE(contains(run.err, ") was killed by signal 9 (SIGKILL); its log: ")) << run.err;
}

// Worker 0 would sleep 100 s: the launcher stops it 1 s after worker 1 failed. The bound on the
// run's length is far from a measurement: waiting for the sleep would take 100 s.
TEST_F(LaunchCliTest, AfterAFailureTheOthersAreStoppedAtTheTimeOut) {
  const auto start = std::chrono::steady_clock::now();
  const auto run = run_mf(launch(
      "--worker_num=2 --cluster_time_out=1 -- sh -c '[ $MS_NODE_ID = 1 ] && exit 3; sleep 100'"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_EQ(run.code, kWorkerFailed);
  EXPECT_TRUE(contains(run.err, "2 of 2 workers failed, worker 1 first")) << run.err;
  EXPECT_TRUE(contains(run.err,
                       ") was stopped by the launcher (worker 1 failed and "
                       "--cluster_time_out=1 s passed) and was killed by signal 15 "
                       "(SIGTERM); its log: " +
                           (logs_ / "worker_0.log").string()))
      << run.err;
  EXPECT_TRUE(contains(run.err, ") exited with status 3")) << run.err;
  EXPECT_TRUE(contains(log(0), "mf launch: worker 1 failed and --cluster_time_out=1 s passed"))
      << log(0);
}

// A worker that ignores SIGTERM gets SIGKILL 5 s later. Worker 1 fails only once worker 0 ignores
// SIGTERM (a file says so): with --cluster_time_out=0 the SIGTERM could otherwise come first.
TEST_F(LaunchCliTest, AWorkerThatIgnoresSigtermIsKilled) {
  const std::string ready = (dir_ / "ignoring").string();
  const auto run = run_mf(launch(
      "--worker_num=2 --cluster_time_out=0 -- sh -c 'if [ $MS_NODE_ID = 1 ]; then for i in $(seq "
      "200); do [ -e " +
      ready + " ] && break; sleep 0.05; done; exit 3; fi; trap \"\" TERM; touch " + ready +
      "; sleep 100'"));
  EXPECT_EQ(run.code, kWorkerFailed);
  EXPECT_TRUE(contains(run.err,
                       "--cluster_time_out=0 s passed) and was killed by signal 9 "
                       "(SIGKILL)"))
      << run.err;
}

// Whether `pid` runs (a zombie waiting for its new parent to reap it has ended).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

// What a worker of a failed job started in the background does not outlive the launcher.
TEST_F(LaunchCliTest, AFailedJobLeavesNothingRunning) {
  const fs::path pid_file = dir_ / "background.pid";
  const auto run = run_mf(
      launch("--worker_num=1 -- sh -c 'sleep 100 & echo $! >" + pid_file.string() + "; exit 3'"));
  EXPECT_EQ(run.code, kWorkerFailed);
  const pid_t background = std::stoi(slurp(pid_file));
  for (int i = 0; i < 200 && running(background); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(running(background));
}

TEST_F(LaunchCliTest, BadInputIsRefusedBeforeAnythingStarts) {
  std::ofstream(dir_ / "file") << "x";
  const std::string ok = " -- sh -c 'echo started'";
  const struct {
    std::string options;
    std::string error;
  } cases[] = {
      {"--worker_num=2", "error: mf launch needs the workers' command after `--`"},
      {"--worker_num=2 --", "error: mf launch needs the workers' command after `--`"},
      {"--worker_num=0" + ok, "error: --worker_num must be in [1, 4096], got 0"},
      {"--worker_num=4097" + ok, "error: --worker_num must be in [1, 4096], got 4097"},
      {"--worker_num=2 --local_worker_num=3" + ok,
       "error: --local_worker_num must be in [1, --worker_num=2], got 3"},
      {"--worker_num=2 --local_worker_num=0" + ok,
       "error: --local_worker_num must be in [1, --worker_num=2], got 0"},
      {"--worker_num=4 --local_worker_num=2 --node_rank=2" + ok,
       "error: the ranks of --node_rank=2 with --local_worker_num=2 go beyond --worker_num=4"},
      {"--worker_num=2 --node_rank=-1" + ok, "error: --node_rank must be at least 0, got -1"},
      {"--worker_num=2 --master_port=0" + ok, "error: --master_port must be in [1, 65535], got 0"},
      {"--worker_num=2 --master_port=65536" + ok,
       "error: --master_port must be in [1, 65535], got 65536"},
      {"--worker_num=2 --cluster_time_out=-1" + ok,
       "error: --cluster_time_out must be at least 0 seconds, got -1"},
      {"--worker_num=2 --master_addr ''" + ok,
       "error: --master_addr needs a host name or address, got ''"},
      // An empty value after '=' makes the parser take the `--` that follows (with an option
      // in the command, as in `sh -c`, that is a usage error already).
      {"--worker_num=2 --master_addr= -- echo started",
       "error: --master_addr needs a host name or address, got '--'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.options);
    const auto run = run_mf(launch(c.options));
    EXPECT_EQ(run.code, 1);
    EXPECT_TRUE(contains(run.err, c.error)) << run.err;
    EXPECT_FALSE(contains(run.err, "mf launch: started")) << run.err;
    EXPECT_FALSE(fs::exists(logs_));
  }
  // A log directory that cannot be made: below a regular file.
  const fs::path below_file = dir_ / "file" / "logs";
  const auto bad_dir = run_mf("launch --worker_num=1 --log_dir=" + below_file.string() + ok);
  EXPECT_EQ(bad_dir.code, 1);
  EXPECT_TRUE(
      contains(bad_dir.err, "error: --log_dir '" + below_file.string() + "' cannot be created: "))
      << bad_dir.err;
  for (const char* empty : {"--log_dir ''", "--log_dir="}) {
    const auto run = run_mf(std::string("launch --worker_num=1 ") + empty + " -- echo started");
    EXPECT_EQ(run.code, 1);
    EXPECT_TRUE(contains(run.err, "error: --log_dir needs a directory, got '")) << run.err;
  }
  // A missing --worker_num is a usage error.
  const auto no_count = run_mf(launch(ok));
  EXPECT_EQ(no_count.code, 2);
  EXPECT_TRUE(contains(no_count.err, "--worker_num is required")) << no_count.err;
  EXPECT_FALSE(fs::exists(logs_));
}

TEST_F(LaunchCliTest, ACommandThatDoesNotExistIsRefusedBeforeAnythingStarts) {
  const auto run = run_mf(launch("--worker_num=2 -- mf_launch_no_such_command --flag"));
  EXPECT_EQ(run.code, 1);
  EXPECT_TRUE(contains(run.err,
                       "error: cannot execute 'mf_launch_no_such_command': no executable "
                       "of that name in PATH"))
      << run.err;
  EXPECT_FALSE(fs::exists(logs_));
  const auto path = run_mf(launch("--worker_num=1 -- " + (dir_ / "missing.sh").string()));
  EXPECT_EQ(path.code, 1);
  EXPECT_TRUE(contains(path.err, "missing.sh': No such file or directory")) << path.err;
}

// A file that passes the checks but that exec refuses (its interpreter is missing): the worker
// writes why into its log and exits 127, and the launcher reports it as a failed worker.
TEST_F(LaunchCliTest, ACommandThatExecRefusesFailsItsWorkerWithStatus127) {
  const fs::path script = dir_ / "bad_interpreter.sh";
  std::ofstream(script) << "#!/mf_launch/no/such/interpreter\n";
  fs::permissions(script, fs::perms::owner_all);
  const auto run = run_mf(launch("--worker_num=1 -- " + script.string()));
  EXPECT_EQ(run.code, kWorkerFailed);
  EXPECT_TRUE(contains(run.err, ") exited with status 127; its log: ")) << run.err;
  EXPECT_EQ(log(0),
            "mf launch: cannot execute '" + script.string() + "': No such file or directory\n");
}

// SIGTERM to the launcher reaches every worker's process group (the sleeps too); the launcher
// exits 128 + 15 once they have ended.
TEST_F(LaunchCliTest, SigtermToTheLauncherIsPassedOnToEveryWorker) {
  const std::string out = (dir_ / "out.txt").string(), err = (dir_ / "err.txt").string();
  const std::vector<std::string> args = {
      MF_BINARY, "launch", "--worker_num=2",       "--log_dir=" + logs_.string(), "--",
      "sh",      "-c",     "echo ready; sleep 100"};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&files, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, MF_BINARY, &files, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&files);
  // A failed assertion below leaves no launcher behind (its workers follow it).
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  // Both workers have started when both logs say so.
  for (int i = 0; i < 600 && !(contains(log(0), "ready") && contains(log(1), "ready")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(contains(log(0), "ready") && contains(log(1), "ready"));
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  reaper.pid = -1;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  const std::string errors = slurp(err);
  EXPECT_TRUE(contains(errors,
                       "mf launch: interrupted by SIGTERM, which was passed on to every "
                       "worker"))
      << errors;
  for (const char* rank : {"worker 0 (pid ", "worker 1 (pid "}) {
    EXPECT_TRUE(contains(errors, rank)) << errors;
  }
  EXPECT_TRUE(contains(errors, ") was killed by signal 15 (SIGTERM)")) << errors;
}

}  // namespace
}  // namespace mf
