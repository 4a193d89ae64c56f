#pragma once
// Inter-op parallelism for both graph executors: a plan's steps as a dependency graph on a few
// threads, each step started once every step it depends on has finished.

#include <functional>

#include "runtime/plan.h"

namespace mf::runtime::detail {

// Runs every step of `plan` on at most `parallelism` threads (a oneTBB arena), step s only after
// all of plan.steps[s].depends_on; run_one(s) runs step s (and whatever the executor does after
// it, such as releasing buffers whose last reader it was). When a step finishes, the first of its
// successors that became ready runs next on the same thread; only further ready successors become
// tasks of their own. The first exception stops launching new steps and is rethrown once every
// running step has ended.
void run_steps_in_parallel(const Plan& plan, int parallelism,
                           const std::function<void(int step)>& run_one);

}  // namespace mf::runtime::detail
