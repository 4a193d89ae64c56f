#pragma once
// MindSpore's nn.DistributedGradReducer: sums (or averages) each worker's gradients over the
// workers of the group, so every worker applies the same update. Gradients travel in buckets
// (packed into one buffer per all-reduce): all_reduce_fusion_config's split points when given,
// else buckets of about 4 MiB, filled in backward order (last parameters first, as a backward
// produces them). Op by op (PYNATIVE, asynchronous), a bucket is sent as soon as its gradients
// are computed, while the queue goes on with the rest of the backward. In a compiled step (GRAPH)
// with several buckets the all-reduces are nodes of the step's graph (insert_into): each bucket
// starts right after the node that computes its last gradient, on the communication thread, and
// is waited for at the outputs.

#include <string>
#include <vector>

#include "engine/tensor.h"
#include "runtime/comm/communicator.h"

namespace mf::ir {
class Graph;
}

namespace mf::nn {

struct GradReducerOptions {
  bool mean = false;               // divide the sums by the number of workers
  std::vector<int> split_indices;  // a bucket starts at each gradient index (empty: by size)
  size_t bucket_bytes = size_t{4} << 20;
  // The auto-parallel context's device_num on this worker: 1 (unset) or the group's size.
  int device_num = 1;
};

class DistributedGradReducer {
 public:
  // `names` and `parameters`: what the gradients belong to, in order. InvalidArgument when the
  // group is not initialized.
  DistributedGradReducer(std::vector<std::string> names, std::vector<Tensor> parameters,
                         GradReducerOptions options);

  // The reduced gradients, one per parameter, of the parameters' types.
  std::vector<Tensor> operator()(const std::vector<Tensor>& gradients);

  // Checks that every worker trains the same parameters (names, shapes and dtypes) with a
  // device_num that fits the group, then gives every worker worker 0's values, in place.
  // InvalidArgument on every worker, naming the first worker that differs.
  void broadcast_parameters();

  // GRAPH mode: puts the all-reduces into a differentiated graph whose outputs from
  // `first_gradient_output` on are the parameters' gradients, in order: an all_reduce_start per
  // bucket after the node computing its last gradient, and an all_reduce_wait per gradient in
  // place of the output.
  void insert_into(ir::Graph& graph, size_t first_gradient_output) const;
  // GRAPH mode: what the compiled step's all-reduces took, for last_reduce_seconds and
  // last_overlap_seconds.
  void note_compiled_step(double reduce_seconds, double overlap_seconds) {
    last_reduce_seconds_ = reduce_seconds;
    last_overlap_seconds_ = overlap_seconds;
  }
  const GradReducerOptions& options() const { return options_; }

  // The buckets, as ranges of gradient indices in reduction order (for tests and dumps).
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }
  // Seconds spent in all-reduce by the last call.
  double last_reduce_seconds() const { return last_reduce_seconds_; }
  // Of those, the seconds during which the backward was still computing gradients (on the op
  // queue, or in the compiled step): the communication it hid.
  double last_overlap_seconds() const { return last_overlap_seconds_; }

 private:
  runtime::comm::Communicator& group() const;
  std::vector<std::string> names_;
  std::vector<Tensor> parameters_;
  GradReducerOptions options_;
  std::vector<std::vector<size_t>> buckets_;
  double last_reduce_seconds_ = 0;
  double last_overlap_seconds_ = 0;
};

}  // namespace mf::nn
