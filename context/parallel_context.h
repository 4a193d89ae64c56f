#pragma once
// The auto-parallel context (set/get/reset_auto_parallel_context) and the parameter-server context
// (set/get/reset_ps_context), with MindSpore's keys and defaults. enable_ps=true is Unsupported
// here.

#include "context/context.h"

namespace mf::context {

// Sets keys of the auto-parallel context (device_num, global_rank, parallel_mode, ...);
// all-or-nothing.
void set_auto_parallel_context(const Json& values);
Json get_auto_parallel_context(std::string_view key);
// device_num 1, global_rank 0, parallel_mode "stand_alone", ... (see key_table.cc).
void reset_auto_parallel_context();

void set_ps_context(const Json& values);
Json get_ps_context(std::string_view key);
void reset_ps_context();

}  // namespace mf::context
