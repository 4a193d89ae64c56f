#pragma once
// The profiler's recorder: while a profile is on, every kernel run (both modes, fused kernels
// included), every compile pass and every iteration is an event with its thread, start and
// duration; a kernel's event also carries its input shapes, its FLOPs and the bytes it reads and
// writes, so a report can judge it against the machine's limits (runtime/profile_report.h).
//
// Off, the cost at each kernel is one relaxed atomic load. On, an event is a clock read at each
// end and a push under a mutex (measured in docs/profiler.md). At most `max_events` are kept; the
// rest are counted as dropped, and the report says so.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/op_def.h"

namespace mf::runtime {

// Kernel runs, compile passes, the other compile phases (trace, cache lookup and store, preparing
// kernels), iterations, and memory: the pool reserving a block from the system (`bytes` is what
// it then holds in all).
// kWorker: an intra-op worker thread's share of one kernel's parallel chunks, from its first
// chunk's start to its last one's end (the calling thread's share is inside its kernel event).
enum class ProfileEventKind : uint8_t { kKernel, kPass, kPhase, kIteration, kMemory, kWorker };

struct ProfileEvent {
  ProfileEventKind kind = ProfileEventKind::kKernel;
  std::string name;    // the op, the pass, or "iteration N"
  std::string shapes;  // a kernel's input types: "f32(1, 64, 56, 56), f32(64, 64, 3, 3)"
  std::string mode;    // "PYNATIVE" or "GRAPH" for kernels and iterations
  int thread = 0;      // a small number per thread (see profile_thread_name)
  int64_t start_ns = 0, duration_ns = 0;  // from the profile's start
  double flops = 0, bytes = 0;            // kernels; bytes also for memory events
  int64_t chunks = 0;                     // worker events: the chunks that thread ran
};

struct Profile {
  std::vector<ProfileEvent> events;
  std::vector<std::string> thread_names;  // index: ProfileEvent::thread
  size_t dropped = 0;                     // events past max_events, not kept
  int64_t duration_ns = 0;                // from start to stop
};

// FLOPs and bytes of one kernel run: bytes are every input and output once; FLOPs are 2 per
// multiply-add for matmul, batch_matmul, conv2d and conv_transpose2d, and one per output element
// for everything else.
struct KernelCost {
  double flops = 0, bytes = 0;
};
KernelCost kernel_cost(const ir::KernelContext& ctx);

class Profiler {
 public:
  static bool active() { return active_.load(std::memory_order_relaxed); }
  // InvalidArgument when one is already on (one profile at a time in a process).
  static void start(size_t max_events = 1'000'000);
  // Ends the profile and returns what it recorded. InvalidArgument when none is on.
  static Profile stop();
  static void record(ProfileEvent event);
  static int64_t now_ns();  // since the profile's start

 private:
  static std::atomic<bool> active_;
};

// A memory event: the pool now reserves `reserved_bytes` from the system.
void profile_memory(double reserved_bytes);

// Names the calling thread's track in the trace ("PYNATIVE queue"); the first name given stays.
void profile_thread_name(std::string_view name);

// The op of the kernel the calling thread is running under a KernelTimer, or null: what an
// intra-op worker's events are named after.
const char* profile_current_kernel();

// Times one kernel run when a profile is on.
class KernelTimer {
 public:
  KernelTimer(const ir::KernelContext& ctx, const char* mode);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  const ir::KernelContext& ctx_;
  const char* mode_;
  bool on_;
  int64_t start_;
  const char* outer_kernel_ = nullptr;  // restored at the end (a kernel inside a kernel)
};

// Records an intra-op worker's share of the current kernel's chunks when a profile is on: made on
// the worker before its first chunk, told of each chunk, recorded (if it ran any) at its end.
class WorkerTimer {
 public:
  WorkerTimer(const char* kernel, int worker);
  void chunk_done() { ++chunks_; }
  ~WorkerTimer();
  WorkerTimer(const WorkerTimer&) = delete;
  WorkerTimer& operator=(const WorkerTimer&) = delete;

 private:
  const char* kernel_;
  bool on_;
  int64_t start_;
  int64_t chunks_ = 0;
};

// Times a named span (a pass, an iteration) when a profile is on.
class SpanTimer {
 public:
  SpanTimer(ProfileEventKind kind, std::string name, const char* mode = "")
      : kind_(kind),
        name_(Profiler::active() ? std::move(name) : std::string()),
        mode_(mode),
        on_(Profiler::active()),
        start_(on_ ? Profiler::now_ns() : 0) {}
  ~SpanTimer();
  SpanTimer(const SpanTimer&) = delete;
  SpanTimer& operator=(const SpanTimer&) = delete;

 private:
  ProfileEventKind kind_;
  std::string name_;
  const char* mode_;
  bool on_;
  int64_t start_;
};

}  // namespace mf::runtime
