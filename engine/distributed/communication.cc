#include "engine/distributed/communication.h"

#include <cstdlib>

#include "base/error.h"
#include "context/parallel_context.h"
#include "runtime/comm/communicator.h"

namespace mf::communication {
namespace {

runtime::comm::Communicator& group(const char* function) {
  runtime::comm::Communicator* world = runtime::comm::world();
  MF_CHECK(world != nullptr, InvalidArgument, "communication.", function,
           ": the group is not initialized; call communication.init() first");
  return *world;
}

}  // namespace

void init(const std::optional<std::string>& backend_name) {
  if (backend_name.has_value()) {
    const std::string& name = *backend_name;
    MF_CHECK(name != "hccl" && name != "nccl", Unsupported, "communication.init: backend '", name,
             "' needs ", name == "hccl" ? "Ascend" : "GPU",
             " devices; on CPU leave backend_name unset (Gloo over TCP)");
    MF_CHECK(name == "gloo" || name == "mccl", InvalidArgument, "communication.init: backend '",
             echo(name), "' is not known; use None, 'gloo' or 'mccl'");
  }
  MF_CHECK(runtime::comm::world() == nullptr, InvalidArgument,
           "communication.init: already initialized (worker ", runtime::comm::world()->rank(),
           " of ", runtime::comm::world()->size(), "); call release() before init() again");
  const char* workers = std::getenv("MS_WORKER_NUM");
  if (workers == nullptr || *workers == '\0') {
    runtime::comm::init_world(runtime::comm::solo_communicator());
    return;
  }
  auto world = runtime::comm::connect_gloo(runtime::comm::world_options_from_env());
  const int size = world->size(), rank = world->rank();
  runtime::comm::init_world(std::move(world));
  if (size > 1 && context::get_auto_parallel_context("device_num").get<int>() == 1) {
    context::set_auto_parallel_context(context::Json{{"device_num", size}, {"global_rank", rank}});
  }
}

bool initialized() {
  return runtime::comm::world() != nullptr;
}
int get_rank() {
  return group("get_rank").rank();
}
int get_group_size() {
  return group("get_group_size").size();
}
std::string backend() {
  return std::string(group("backend").backend());
}
void release() {
  runtime::comm::release_world();
}

}  // namespace mf::communication
