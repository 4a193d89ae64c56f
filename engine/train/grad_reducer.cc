#include "engine/train/grad_reducer.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "engine/ops.h"
#include "ir/graph.h"
#include "runtime/eager_executor.h"

namespace mf::nn {
namespace {

using runtime::comm::Communicator;

uint64_t fnv1a(uint64_t hash, std::string_view bytes) {
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

template <typename T>
void scale(void* data, size_t count, double factor) {
  T* p = static_cast<T*>(data);
  const T f = T(factor);
  for (size_t i = 0; i < count; ++i) p[i] = p[i] * f;
}

void scale_bytes(void* data, size_t count, DType dtype, double factor) {
  switch (dtype) {
    case DType::kFloat32:
      return scale<float>(data, count, factor);
    case DType::kFloat64:
      return scale<double>(data, count, factor);
    default:
      MF_FAIL(InvalidArgument,
              "DistributedGradReducer: gradients_mean needs floating gradients, got ",
              ir::dtype_name(dtype));
  }
}

std::vector<std::vector<size_t>> make_buckets(const std::vector<Tensor>& parameters,
                                              const GradReducerOptions& options) {
  const size_t n = parameters.size();
  std::vector<std::vector<size_t>> buckets;
  if (!options.split_indices.empty()) {
    std::vector<size_t> starts{0};
    for (int split : options.split_indices) {
      MF_CHECK(split > 0 && size_t(split) < n, InvalidArgument,
               "all_reduce_fusion_config: split index ", split, " is outside the ", n,
               " gradients; each index must be in [1, ", n, ")");
      starts.push_back(size_t(split));
    }
    starts.push_back(n);
    // Backward order: the last group's gradients are ready first.
    for (size_t g = starts.size() - 1; g-- > 0;) {
      std::vector<size_t> bucket;
      for (size_t i = starts[g + 1]; i-- > starts[g];) bucket.push_back(i);
      buckets.push_back(std::move(bucket));
    }
  } else {
    size_t bytes = 0;
    for (size_t i = n; i-- > 0;) {
      if (buckets.empty() || bytes + parameters[i].nbytes() > options.bucket_bytes) {
        if (buckets.empty() || !buckets.back().empty()) buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(i);
      bytes += parameters[i].nbytes();
    }
  }
  // One all-reduce carries one dtype: a bucket is split where the dtype changes.
  std::vector<std::vector<size_t>> typed;
  for (const auto& bucket : buckets) {
    typed.emplace_back();
    for (size_t i : bucket) {
      if (!typed.back().empty() &&
          parameters[typed.back().back()].dtype() != parameters[i].dtype()) {
        typed.emplace_back();
      }
      typed.back().push_back(i);
    }
  }
  return typed;
}

}  // namespace

DistributedGradReducer::DistributedGradReducer(std::vector<std::string> names,
                                               std::vector<Tensor> parameters,
                                               GradReducerOptions options)
    : names_(std::move(names)), parameters_(std::move(parameters)), options_(std::move(options)) {
  MF_CHECK(names_.size() == parameters_.size(), Internal,
           "DistributedGradReducer: names and parameters differ in count");
  group();
  buckets_ = make_buckets(parameters_, options_);
}

Communicator& DistributedGradReducer::group() const {
  Communicator* world = runtime::comm::world();
  MF_CHECK(world != nullptr, InvalidArgument,
           "parallel_mode=data_parallel: no group is initialized; call "
           "communication.init() before the first training step (start the workers with mf "
           "launch)");
  return *world;
}

std::vector<Tensor> DistributedGradReducer::operator()(const std::vector<Tensor>& gradients) {
  MF_CHECK(gradients.size() == parameters_.size(), InvalidArgument,
           "DistributedGradReducer: ", gradients.size(), " gradients for ", parameters_.size(),
           " parameters");
  Communicator& world = group();
  std::vector<Tensor> reduced(gradients.size());
  for (size_t i = 0; i < gradients.size(); ++i) {
    MF_CHECK(gradients[i].defined() && gradients[i].type() == parameters_[i].type(),
             InvalidArgument, "DistributedGradReducer: the gradient of '", echo(names_[i]), "' is ",
             gradients[i].defined() ? ir::type_to_string(gradients[i].type()) : "undefined",
             "; it must be ", ir::type_to_string(parameters_[i].type()));
  }
  // No sync first: op by op, the backward may still be running on the queue. Reading a bucket's
  // gradients waits for those tensors only, so the first buckets (the last layers', which the
  // backward produces first) travel while the queue computes the gradients of earlier layers.
  using Clock = std::chrono::steady_clock;
  double seconds = 0;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> reduce_spans;
  // When the backward is still on the op queue, a watcher notes when its last task ends, so the
  // report can say how much of the communication the backward hid.
  uint64_t last_task = 0;
  for (const Tensor& g : gradients) last_task = std::max(last_task, g.impl()->ready_seq);
  runtime::EagerExecutor& queue = runtime::default_eager_executor();
  Clock::time_point backward_end = Clock::now();
  std::thread watcher;
  if (last_task != 0 && !queue.is_done(last_task)) {
    watcher = std::thread([&queue, last_task, &backward_end] {
      while (!queue.is_done(last_task)) std::this_thread::sleep_for(std::chrono::microseconds(50));
      backward_end = Clock::now();
    });
  }
  struct JoinOnExit {
    std::thread& thread;
    ~JoinOnExit() {
      if (thread.joinable()) thread.join();
    }
  } join_on_exit{watcher};
  std::vector<char> packed;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const std::vector<size_t>& bucket = buckets_[b];
    const DType dtype = parameters_[bucket.front()].dtype();
    size_t bytes = 0;
    for (size_t i : bucket) bytes += gradients[i].nbytes();
    packed.resize(bytes);
    size_t offset = 0;
    for (size_t i : bucket) {
      if (gradients[i].nbytes() > 0) {
        std::memcpy(packed.data() + offset, gradients[i].raw_data(), gradients[i].nbytes());
      }
      offset += gradients[i].nbytes();
    }
    const size_t count = bytes / ir::dtype_size(dtype);
    const auto start = Clock::now();
    world.all_reduce(
        packed.data(), count, dtype, runtime::comm::ReduceOp::kSum,
        "gradients bucket " + std::to_string(b) + " (" + echo(names_[bucket.front()]) + ", ...)");
    reduce_spans.emplace_back(start, Clock::now());
    seconds += std::chrono::duration<double>(reduce_spans.back().second - start).count();
    if (options_.mean && world.size() > 1) {
      scale_bytes(packed.data(), count, dtype, 1.0 / world.size());
    }
    offset = 0;
    for (size_t i : bucket) {
      reduced[i] = Tensor::empty(parameters_[i].shape(), dtype);
      if (gradients[i].nbytes() > 0) {
        std::memcpy(reduced[i].mutable_raw_data(), packed.data() + offset, gradients[i].nbytes());
      }
      offset += gradients[i].nbytes();
    }
  }
  last_reduce_seconds_ = seconds;
  // Every gradient has been read, so the backward is over and the watcher ends at once.
  if (watcher.joinable()) watcher.join();
  // The communication that ran while the backward was still running: what the backward hid.
  double overlapped = 0;
  for (const auto& [start, end] : reduce_spans) {
    if (start < backward_end) {
      overlapped += std::chrono::duration<double>(std::min(end, backward_end) - start).count();
    }
  }
  last_overlap_seconds_ = overlapped;
  return reduced;
}

void DistributedGradReducer::insert_into(ir::Graph& graph, size_t first_gradient_output) const {
  MF_CHECK(graph.outputs().size() == first_gradient_output + parameters_.size(), Internal,
           "DistributedGradReducer: the graph has ", graph.outputs().size(), " outputs, not ",
           parameters_.size(), " gradients after ", first_gradient_output);
  graph.sort_nodes();
  std::unordered_map<const ir::Node*, size_t> position;
  for (const ir::Node& node : graph.nodes()) position.emplace(&node, position.size());
  const ir::NodeInfo info{"Gradients/Default/grad_reducer-DistributedGradReducer", ""};
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const std::vector<size_t>& bucket = buckets_[b];
    std::vector<ir::Value> gradients;
    const ir::Node* last = nullptr;
    for (size_t i : bucket) {
      const ir::Value g = graph.outputs()[first_gradient_output + i];
      gradients.push_back(g);
      if (g.node() != nullptr && (last == nullptr || position.at(g.node()) > position.at(last))) {
        last = g.node();
      }
    }
    // Right after the bucket's last gradient, so the bucket travels during the rest of the
    // backward; a bucket of parameters and constants alone goes first.
    ir::Node* before = graph.num_nodes() > 0 ? &*graph.nodes().begin() : nullptr;
    if (last != nullptr) {
      auto it = graph.nodes().begin();
      while (&*it != last) ++it;
      ++it;
      before = it == graph.nodes().end() ? nullptr : &*it;
    }
    const std::string label =
        "gradients bucket " + std::to_string(b) + " (" + echo(names_[bucket.front()]) + ", ...)";
    ir::Node* start =
        before != nullptr
            ? graph.insert_node(before, "all_reduce_start", gradients, {{"label", label}}, info)
            : graph.add_node("all_reduce_start", gradients, {{"label", label}}, info);
    int64_t offset = 0;
    for (size_t k = 0; k < bucket.size(); ++k) {
      const size_t i = bucket[k];
      const ir::Shape& shape = parameters_[i].shape();
      ir::Node* wait = graph.add_node("all_reduce_wait", {start->output()},
                                      {{"offset", offset},
                                       {"shape", std::vector<int64_t>(shape.begin(), shape.end())},
                                       {"mean", options_.mean},
                                       {"last_part", k + 1 == bucket.size()}},
                                      info);
      graph.set_output(first_gradient_output + i, wait->output());
      offset += parameters_[i].numel();
    }
  }
}

void DistributedGradReducer::broadcast_parameters() {
  Communicator& world = group();
  // What this worker trains, in three numbers: a worker with another network, another
  // parameter order or other shapes differs in at least one.
  uint64_t hash = 0xcbf29ce484222325ull;
  int64_t elements = 0;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    hash = fnv1a(hash, names_[i]);
    hash = fnv1a(hash, ir::type_to_string(parameters_[i].type()));
    elements += parameters_[i].numel();
  }
  const int64_t mine[4] = {int64_t(parameters_.size()), elements, int64_t(hash),
                           int64_t(options_.device_num)};
  std::vector<int64_t> all(size_t(4 * world.size()));
  world.all_gather(mine, all.data(), sizeof mine, "parameter check");
  for (int r = 0; r < world.size(); ++r) {
    const int64_t device_num = all[size_t(4 * r + 3)];
    MF_CHECK(device_num == 1 || device_num == world.size(), InvalidArgument,
             "data_parallel: worker ", r, " has device_num=", device_num, " but the group has ",
             world.size(), " workers; set device_num to the number of workers or leave it unset");
  }
  for (int r = 1; r < world.size(); ++r) {
    const int64_t* theirs = &all[size_t(4 * r)];
    MF_CHECK(theirs[0] == all[0] && theirs[1] == all[1] && theirs[2] == all[2], InvalidArgument,
             "data_parallel: worker ", r, " trains ", theirs[0], " parameters of ", theirs[1],
             " elements, worker 0 ", all[0], " of ", all[1],
             theirs[0] == all[0] && theirs[1] == all[1] ? " (names or shapes differ)" : "",
             "; every worker must build the same network and optimizer");
  }
  ops::sync();
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (parameters_[i].nbytes() == 0) continue;
    world.broadcast(parameters_[i].mutable_raw_data(), parameters_[i].nbytes(), 0,
                    "parameter " + echo(names_[i]));
  }
}

}  // namespace mf::nn
