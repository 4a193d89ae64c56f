// The process-wide group and the environment that describes it.

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/error.h"
#include "runtime/comm/communicator.h"

namespace mf::runtime::comm {
namespace {

std::mutex world_mutex;
std::unique_ptr<Communicator> the_world;
Communicator* world_pointer = nullptr;

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int env_int(const char* name, int min, int max, const char* meaning) {
  const char* text = env(name);
  MF_CHECK(text != nullptr, InvalidArgument, "communication.init: ", name, " is not set; it is ",
           meaning, " (mf launch sets it)");
  int value = 0;
  const char* end = text + std::strlen(text);
  const auto [ptr, ec] = std::from_chars(text, end, value);
  MF_CHECK(ec == std::errc() && ptr == end && value >= min && value <= max, InvalidArgument,
           "communication.init: ", name, "='", echo(text), "' must be an integer in [", min, ", ",
           max, "]; it is ", meaning);
  return value;
}

// A group of this process alone: every collective leaves its data as it is.
class SoloCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view backend() const override { return "solo"; }
  void all_reduce(void*, size_t, ir::DType, ReduceOp, std::string_view) override {}
  void all_gather(const void* in, void* out, size_t bytes, std::string_view) override {
    if (bytes > 0 && in != out) std::memmove(out, in, bytes);
  }
  void broadcast(void*, size_t, int root, std::string_view) override {
    MF_CHECK(root == 0, InvalidArgument, "Broadcast: root_rank ", root,
             " is not a worker of this group of 1");
  }
  void barrier(std::string_view) override {}
};

}  // namespace

std::unique_ptr<Communicator> solo_communicator() {
  return std::make_unique<SoloCommunicator>();
}

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kProd:
      return "prod";
  }
  return "sum";
}

WorldOptions world_options_from_env() {
  WorldOptions options;
  if (const char* role = env("MS_ROLE")) {
    MF_CHECK(std::strcmp(role, "MS_WORKER") == 0, InvalidArgument, "communication.init: MS_ROLE='",
             echo(role),
             "' is not run here: modeflow has no separate scheduler process (worker 0 serves the "
             "rendezvous at MS_SCHED_HOST:MS_SCHED_PORT); start only workers, with "
             "MS_ROLE=MS_WORKER");
  }
  options.size = env_int("MS_WORKER_NUM", 1, 4096, "the number of workers in the job");
  options.rank =
      env_int("MS_NODE_ID", 0, options.size - 1, "this worker's rank, from 0 to MS_WORKER_NUM - 1");
  if (const char* timeout = env("MF_COMM_TIMEOUT")) {
    (void)timeout;
    options.timeout = std::chrono::seconds(
        env_int("MF_COMM_TIMEOUT", 1, 86400, "how many seconds a collective may wait"));
  }
  if (const char* dir = env("MF_COMM_STORE_DIR");
      dir != nullptr && env("MS_SCHED_PORT") == nullptr) {
    options.store_dir = dir;
    return options;
  }
  const char* host = env("MS_SCHED_HOST");
  options.sched_host = host != nullptr ? host : "127.0.0.1";
  options.sched_port =
      env_int("MS_SCHED_PORT", 1, 65535, "the port at which worker 0 serves the rendezvous");
  return options;
}

void init_world(std::unique_ptr<Communicator> world) {
  std::lock_guard lock(world_mutex);
  MF_CHECK(the_world == nullptr, InvalidArgument,
           "communication.init: already initialized (worker ", the_world->rank(), " of ",
           the_world->size(), "); call release() before init() again");
  // A group of one has nothing to wait for: its collectives run where they are called.
  the_world = world->size() > 1 ? on_communication_thread(std::move(world)) : std::move(world);
  world_pointer = the_world.get();
}

Communicator* world() {
  return world_pointer;
}

void release_world() {
  std::unique_ptr<Communicator> released;
  {
    std::lock_guard lock(world_mutex);
    released = std::move(the_world);
    world_pointer = nullptr;
  }
  if (released == nullptr) return;
  try {
    released->barrier("release");
  } catch (const Error&) {
    // A group that already failed has nobody left to wait for.
  }
}

}  // namespace mf::runtime::comm
