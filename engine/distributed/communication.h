#pragma once
// MindSpore's mindspore.communication: init() joins the job this process is a worker of (the
// environment that `mf launch` sets), get_rank() / get_group_size() say where it stands, release()
// leaves. A process started without MS_WORKER_NUM forms a group of its own, so a data-parallel
// script also runs alone.

#include <optional>
#include <string>

namespace mf::communication {

// backend_name: unset, "gloo" or "mccl" (MindSpore's CPU backend name) all mean Gloo over TCP;
// "hccl" and "nccl" are Unsupported (they need Ascend or GPU devices). With more than one worker,
// sets the auto-parallel context's device_num and global_rank to the group's when device_num is
// unset, so dumps and cache entries go to rank_<id>/.
void init(const std::optional<std::string>& backend_name = std::nullopt);
bool initialized();
// InvalidArgument before init().
int get_rank();
int get_group_size();
std::string backend();
// Waits for every worker at a barrier, then leaves the group; nothing when not initialized.
void release();

}  // namespace mf::communication
