// A gradient bucket's all-reduce split in two, so a compiled step overlaps it with the rest of
// the backward: all_reduce_start packs its inputs into one flat tensor (its output: what this
// worker contributes) and hands a copy of it to the communication thread; all_reduce_wait, placed
// where a reduced gradient is first needed, waits for that all-reduce and takes one gradient out
// of the sum (divided by the number of workers when `mean`). Every step between the two runs
// while the bucket travels. Outside a group of several workers both are plain copies.
//
// The started all-reduce works on its own copy, never on the graph's memory: if the step fails
// between start and wait, nothing the executor frees is written afterwards.

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "runtime/comm/communicator.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

struct InFlight {
  std::vector<char> sums;  // this worker's values, then the sums over the workers
  std::shared_ptr<comm::PendingCollective> pending;
};

// The started all-reduces, by the address of the start's output, which stays allocated (and so
// unique among the live ones) until its last wait has read it.
std::mutex in_flight_mutex;
std::unordered_map<const void*, std::shared_ptr<InFlight>> in_flight;

// Buffers of finished buckets, kept for the next step's buckets of the same size: a step's
// all-reduces then touch no fresh memory.
constexpr size_t kSpareBuffers = 16;
std::vector<std::vector<char>> spare_sums;

std::vector<char> sums_buffer(size_t bytes) {
  std::lock_guard lock(in_flight_mutex);
  for (auto it = spare_sums.begin(); it != spare_sums.end(); ++it) {
    if (it->size() == bytes) {
      std::vector<char> found = std::move(*it);
      spare_sums.erase(it);
      return found;
    }
  }
  return std::vector<char>(bytes);
}

void release_sums(std::vector<char> sums) {
  std::lock_guard lock(in_flight_mutex);
  if (spare_sums.size() == kSpareBuffers) spare_sums.erase(spare_sums.begin());
  spare_sums.push_back(std::move(sums));
}

int group_size() {
  comm::Communicator* world = comm::world();
  return world != nullptr ? world->size() : 1;
}

size_t bytes_of(const ir::TensorView& view) {
  return size_t(view.size()) * ir::dtype_size(view.type.dtype);
}

const ir::OpRegistration kAllReduceStart =
    ir::define_op("all_reduce_start")
        .inputs(1, -1)
        .attr("label", ir::AttrKind::kString, std::string("gradients"),
              "what the bucket holds, for errors")
        .traits(Trait::kSideEffect | Trait::kOpaque | Trait::kNoGradient)
        .infer([](std::span<const TensorType> in, const Attrs&) {
          int64_t total = 0;
          for (const TensorType& t : in) {
            MF_CHECK(t.dtype == in[0].dtype, InvalidArgument,
                     "all_reduce_start: every input must have one dtype; got ",
                     ir::dtype_name(in[0].dtype), " and ", ir::dtype_name(t.dtype));
            const auto sum = ir::checked_add(total, ir::checked_num_elements(t.shape, "a bucket"));
            MF_CHECK(sum.has_value(), InvalidArgument, "all_reduce_start: the bucket is too large");
            total = *sum;
          }
          MF_CHECK(in[0].dtype != DType::kBool, InvalidArgument,
                   "all_reduce_start: a Bool tensor is not reduced; cast it to Int32 first");
          return std::vector<TensorType>{{in[0].dtype, {total}}};
        })
        .kernel([](const ir::KernelContext& ctx) {
          const ir::TensorView& out = ctx.outputs[0];
          char* packed = static_cast<char*>(out.data);
          for (const ir::TensorView& in : ctx.inputs) {
            if (bytes_of(in) > 0) std::memcpy(packed, in.data, bytes_of(in));
            packed += bytes_of(in);
          }
          comm::Communicator* world = comm::world();
          if (world == nullptr || world->size() == 1 || out.size() == 0) return;
          auto flight = std::make_shared<InFlight>();
          flight->sums = sums_buffer(bytes_of(out));
          std::memcpy(flight->sums.data(), out.data, bytes_of(out));
          flight->pending = world->start_all_reduce(
              flight->sums.data(), size_t(out.size()), out.type.dtype, comm::ReduceOp::kSum,
              ir::attr_string(ctx.attrs, "label", "all_reduce_start"));
          std::lock_guard lock(in_flight_mutex);
          in_flight[out.data] = std::move(flight);
        })
        .reference([](std::span<const RefTensor> in, const Attrs&) {
          RefTensor out;
          for (const RefTensor& t : in) {
            out.values.insert(out.values.end(), t.values.begin(), t.values.end());
          }
          out.shape = {int64_t(out.values.size())};
          return std::vector<RefTensor>{out};
        })
        .samples(
            {sample({f32({2, 3}), f32({4})}), sample({f64({0, 2}), f64({3})}), sample({i32({5})})})
        .doc(
            "packs its inputs into one flat tensor and starts its all-reduce (sum) over the "
            "workers; all_reduce_wait takes the sums out");

const ir::OpRegistration kAllReduceWait =
    ir::define_op("all_reduce_wait")
        .arity(1)
        .attr("offset", ir::AttrKind::kInt, std::nullopt, "the first element taken out")
        .attr("shape", ir::AttrKind::kInts, std::nullopt, "the shape of what is taken out")
        .attr("mean", ir::AttrKind::kBool, false, "divide the sums by the number of workers")
        .attr("last_part", ir::AttrKind::kBool, false,
              "no later wait reads this bucket: its sums are released")
        .traits(Trait::kSideEffect | Trait::kOpaque | Trait::kNoGradient)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          MF_CHECK(in[0].shape.size() == 1, InvalidArgument,
                   "all_reduce_wait: its input is all_reduce_start's flat output; got rank ",
                   in[0].shape.size());
          const int64_t offset = ir::attr_int(attrs, "offset", "all_reduce_wait");
          const std::vector<int64_t>& dims = ir::attr_ints(attrs, "shape", "all_reduce_wait");
          for (int64_t d : dims) {
            MF_CHECK(d >= 0, InvalidArgument, "all_reduce_wait: shape ", ints_to_string(dims),
                     " has a negative dimension");
          }
          const Shape shape(dims.begin(), dims.end());
          const int64_t count = ir::checked_num_elements(shape, "all_reduce_wait's shape");
          MF_CHECK(offset >= 0 && offset <= in[0].shape[0] && count <= in[0].shape[0] - offset,
                   InvalidArgument, "all_reduce_wait: elements [", offset, ", ", offset, " + ",
                   count, ") are outside the bucket of ", in[0].shape[0]);
          MF_CHECK(!ir::attr_bool(attrs, "mean", "all_reduce_wait") || ir::is_floating(in[0].dtype),
                   InvalidArgument, "all_reduce_wait: mean needs floating sums, got ",
                   ir::dtype_name(in[0].dtype));
          return std::vector<TensorType>{{in[0].dtype, shape}};
        })
        .kernel([](const ir::KernelContext& ctx) {
          const ir::TensorView& in = ctx.inputs[0];
          const ir::TensorView& out = ctx.outputs[0];
          std::shared_ptr<InFlight> flight;
          {
            std::lock_guard lock(in_flight_mutex);
            auto it = in_flight.find(in.data);
            if (it != in_flight.end()) {
              flight = it->second;
              if (ir::attr_bool(ctx.attrs, "last_part", "all_reduce_wait")) in_flight.erase(it);
            }
          }
          const int workers = group_size();
          const char* sums = static_cast<const char*>(in.data);
          if (workers > 1 && in.size() > 0) {
            MF_CHECK(flight != nullptr && flight->sums.size() == bytes_of(in), Internal,
                     "all_reduce_wait: no all-reduce was started for this bucket; its input must "
                     "be an all_reduce_start's output, and a wait with last_part must be the "
                     "bucket's last");
            flight->pending->wait();
            sums = flight->sums.data();
          }
          const int64_t first = ir::attr_int(ctx.attrs, "offset", "all_reduce_wait");
          // Inference checked this; a plan from elsewhere (a damaged cache entry) is checked again
          // before any byte is read.
          MF_CHECK(first >= 0 && first <= in.size() && out.size() <= in.size() - first, Internal,
                   "all_reduce_wait: elements [", first, ", ", first, " + ", out.size(),
                   ") are outside the bucket of ", in.size());
          const size_t offset = size_t(first);
          const char* from = sums + offset * ir::dtype_size(in.type.dtype);
          if (ir::attr_bool(ctx.attrs, "mean", "all_reduce_wait") && workers > 1) {
            visit_float(out.type.dtype, [&](auto tag) {
              using T = decltype(tag);
              const T factor = T(1.0 / workers);
              const T* src = reinterpret_cast<const T*>(from);
              T* dst = out.as<T>();
              const int64_t n = out.size();
              for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * factor;
            });
          } else if (bytes_of(out) > 0) {
            std::memcpy(out.data, from, bytes_of(out));
          }
          if (flight != nullptr && ir::attr_bool(ctx.attrs, "last_part", "all_reduce_wait")) {
            release_sums(std::move(flight->sums));
          }
        })
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          const int64_t offset = ir::attr_int(attrs, "offset", "all_reduce_wait");
          const std::vector<int64_t>& dims = ir::attr_ints(attrs, "shape", "all_reduce_wait");
          RefTensor out = ref_tensor(Shape(dims.begin(), dims.end()));
          for (size_t i = 0; i < out.values.size(); ++i) out.values[i] = in[0].values[offset + i];
          return std::vector<RefTensor>{out};
        })
        .samples(
            {sample({f32({10})}, {{"offset", int64_t{2}}, {"shape", std::vector<int64_t>{2, 3}}}),
             sample({f64({6})}, {{"offset", int64_t{0}},
                                 {"shape", std::vector<int64_t>{6}},
                                 {"mean", true},
                                 {"last_part", true}}),
             sample({f32({5})}, {{"offset", int64_t{0}}, {"shape", std::vector<int64_t>{0, 2}}}),
             sample({i64({4})}, {{"offset", int64_t{3}}, {"shape", std::vector<int64_t>{1}}})})
        .doc(
            "waits for all_reduce_start's all-reduce and takes `shape` elements from `offset` "
            "out of the sums (divided by the number of workers when mean)");

}  // namespace
}  // namespace mf::runtime::ops
