#pragma once
// What a profile is written as, in one folder:
//   trace.json   Chrome's trace-event format (Perfetto, chrome://tracing): one complete event per
//                kernel run on its thread's track (args: mode, input types, FLOPs, bytes, rates),
//                each iteration as a span on the thread that ran it, the compile passes on a
//                track of their own;
//   summary.md   the ops by total time (count, total, mean, share of the iterations' time), then
//                each kernel (op and input types) against the machine: achieved GFLOP/s and GB/s
//                and the fraction of its roofline bound (the FMA peak, or the bandwidth times its
//                FLOPs per byte, whichever is lower), with the limits measured in the same run;
//   roofline.svg the roofline with each kernel as a point.
// Every file is written whole or not at all (a temporary name, then a rename).

#include <filesystem>
#include <string>

#include "runtime/machine_limits.h"
#include "runtime/profiler.h"

namespace mf::runtime {

// The three files into `dir` (made if missing). InvalidArgument naming the path when a file
// cannot be written; files already written stay whole.
void write_profile(const std::filesystem::path& dir, const Profile& profile,
                   const HardwareRates& machine);

// The texts alone, for tests and for callers that write elsewhere.
std::string profile_trace_json(const Profile& profile, const HardwareRates& machine);
std::string profile_summary(const Profile& profile, const HardwareRates& machine);
std::string profile_roofline_svg(const Profile& profile, const HardwareRates& machine);

// The machine's limits at `threads` threads, quickly (a smaller probe than `mf bench`'s: about a
// second).
HardwareRates measure_machine_for_profile(int threads);

}  // namespace mf::runtime
