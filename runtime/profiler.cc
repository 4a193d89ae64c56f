#include "runtime/profiler.h"

#include <mutex>
#include <string>

#include "base/error.h"

namespace mf::runtime {
namespace {

struct Recorder {
  std::mutex mutex;
  Profile profile;
  size_t max_events = 0;
  std::chrono::steady_clock::time_point origin;
};

Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: threads may record during exit
  return *r;
}

// Each thread's track number and name, assigned on its first event of a profile.
struct ThreadTrack {
  uint64_t generation = 0;  // the profile the number belongs to
  int number = -1;
  std::string name;
};
thread_local ThreadTrack tls_track;
std::atomic<uint64_t> generation{0};

// Under the recorder's mutex: the calling thread's track in the current profile.
int track_locked(Recorder& r) {
  const uint64_t g = generation.load(std::memory_order_relaxed);
  if (tls_track.generation != g || tls_track.number < 0) {
    tls_track.generation = g;
    tls_track.number = int(r.profile.thread_names.size());
    r.profile.thread_names.push_back(
        tls_track.name.empty() ? "thread " + std::to_string(tls_track.number) : tls_track.name);
  }
  return tls_track.number;
}

std::string type_text(const ir::TensorType& t) {
  const char* short_name = "?";
  switch (t.dtype) {
    case ir::DType::kFloat32:
      short_name = "f32";
      break;
    case ir::DType::kFloat64:
      short_name = "f64";
      break;
    case ir::DType::kInt32:
      short_name = "i32";
      break;
    case ir::DType::kInt64:
      short_name = "i64";
      break;
    case ir::DType::kBool:
      short_name = "bool";
      break;
  }
  return short_name + ir::shape_to_string(t.shape);
}

}  // namespace

std::atomic<bool> Profiler::active_{false};

void Profiler::start(size_t max_events) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  MF_CHECK(
      !active_.load(), InvalidArgument,
      "a profile is already on; stop it (Profiler.analyse() or stop()) before starting another");
  MF_CHECK(max_events >= 1, InvalidArgument, "the profiler must keep at least one event");
  r.profile = Profile{};
  r.max_events = max_events;
  r.origin = std::chrono::steady_clock::now();
  generation.fetch_add(1, std::memory_order_relaxed);
  active_.store(true, std::memory_order_release);
}

Profile Profiler::stop() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  MF_CHECK(active_.load(), InvalidArgument, "no profile is on; start one first");
  active_.store(false, std::memory_order_release);
  r.profile.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - r.origin)
                              .count();
  return std::move(r.profile);
}

int64_t Profiler::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              recorder().origin)
      .count();
}

void Profiler::record(ProfileEvent event) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!active_.load(std::memory_order_relaxed)) return;  // stopped while this event ran
  event.thread = track_locked(r);
  if (r.profile.events.size() >= r.max_events) {
    ++r.profile.dropped;
    return;
  }
  r.profile.events.push_back(std::move(event));
}

void profile_memory(double reserved_bytes) {
  if (!Profiler::active()) return;
  ProfileEvent e;
  e.kind = ProfileEventKind::kMemory;
  e.name = "pool reserved";
  e.start_ns = Profiler::now_ns();
  e.bytes = reserved_bytes;
  Profiler::record(std::move(e));
}

void profile_thread_name(std::string_view name) {
  if (tls_track.name.empty()) tls_track.name = std::string(name);
}

KernelCost kernel_cost(const ir::KernelContext& ctx) {
  KernelCost cost;
  const auto bytes = [](const ir::TensorView& v) {
    return double(ir::num_elements(v.type.shape)) * double(ir::dtype_size(v.type.dtype));
  };
  for (const ir::TensorView& v : ctx.inputs) cost.bytes += bytes(v);
  for (const ir::TensorView& v : ctx.outputs) cost.bytes += bytes(v);
  const double out = ctx.outputs.empty() ? 0 : double(ir::num_elements(ctx.outputs[0].type.shape));
  const std::string_view op = ctx.op_name;
  if ((op == "matmul" || op == "batch_matmul" || op == "matmul_bias") && ctx.inputs.size() >= 2) {
    // out (..., M, N) = a (..., M, K) x b: K is a's last axis, or its first with transpose_a.
    const ir::Shape& a = ctx.inputs[0].type.shape;
    const auto t = ctx.attrs.find("transpose_a");
    const bool transposed = t != ctx.attrs.end() && std::get<bool>(t->second);
    const int64_t k = a.size() < 2 ? (a.empty() ? 1 : a[0])
                      : transposed ? a[a.size() - 2]
                                   : a.back();
    cost.flops = 2 * out * double(k) + (op == "matmul_bias" ? out : 0);  // + the bias's adds
  } else if (op == "conv2d" && ctx.inputs.size() >= 2) {
    const ir::Shape& w = ctx.inputs[1].type.shape;  // (O, C/groups, kH, kW)
    cost.flops = 2 * out * double(w[1] * w[2] * w[3]);
  } else if ((op == "conv2d_grad_input" || op == "conv2d_grad_weight") && ctx.inputs.size() >= 2 &&
             !ctx.outputs.empty()) {
    // The forward's products, one per (dy element, weight tap of its group): dy is the first input
    // of conv2d_grad_input (with the weight second), the second of conv2d_grad_weight (whose
    // output is the weight).
    const bool input_grad = op == "conv2d_grad_input";
    const ir::Shape& w = input_grad ? ctx.inputs[1].type.shape : ctx.outputs[0].type.shape;
    const double dy = double(ir::num_elements(ctx.inputs[input_grad ? 0 : 1].type.shape));
    cost.flops = 2 * dy * double(w[1] * w[2] * w[3]);
  } else if (op == "conv_transpose2d" && ctx.inputs.size() >= 2) {
    const ir::Shape& w = ctx.inputs[1].type.shape;  // (C, O/groups, kH, kW)
    cost.flops =
        2 * double(ir::num_elements(ctx.inputs[0].type.shape)) * double(w[1] * w[2] * w[3]);
  } else {
    cost.flops = out;
  }
  return cost;
}

namespace {
thread_local const char* tls_current_kernel = nullptr;
}  // namespace

const char* profile_current_kernel() {
  return tls_current_kernel;
}

KernelTimer::KernelTimer(const ir::KernelContext& ctx, const char* mode)
    : ctx_(ctx), mode_(mode), on_(Profiler::active()), start_(on_ ? Profiler::now_ns() : 0) {
  if (on_) {
    outer_kernel_ = tls_current_kernel;
    tls_current_kernel = ctx.op_name.data();
  }
}

WorkerTimer::WorkerTimer(const char* kernel, int worker)
    : kernel_(kernel),
      on_(kernel != nullptr && Profiler::active()),
      start_(on_ ? Profiler::now_ns() : 0) {
  if (on_) profile_thread_name("intra-op worker " + std::to_string(worker));
}

WorkerTimer::~WorkerTimer() {
  if (!on_ || chunks_ == 0) return;
  ProfileEvent e;
  e.kind = ProfileEventKind::kWorker;
  e.name = kernel_;
  e.start_ns = start_;
  e.duration_ns = Profiler::now_ns() - start_;
  e.chunks = chunks_;
  Profiler::record(std::move(e));
}

KernelTimer::~KernelTimer() {
  if (!on_) return;
  tls_current_kernel = outer_kernel_;
  ProfileEvent e;
  e.kind = ProfileEventKind::kKernel;
  e.name = std::string(ctx_.op_name);
  for (const ir::TensorView& v : ctx_.inputs) {
    e.shapes += (e.shapes.empty() ? "" : ", ") + type_text(v.type);
  }
  e.mode = mode_;
  e.start_ns = start_;
  e.duration_ns = Profiler::now_ns() - start_;
  const KernelCost cost = kernel_cost(ctx_);
  e.flops = cost.flops;
  e.bytes = cost.bytes;
  Profiler::record(std::move(e));
}

SpanTimer::~SpanTimer() {
  if (!on_) return;
  ProfileEvent e;
  e.kind = kind_;
  e.name = std::move(name_);
  e.mode = mode_;
  e.start_ns = start_;
  e.duration_ns = Profiler::now_ns() - start_;
  Profiler::record(std::move(e));
}

}  // namespace mf::runtime
