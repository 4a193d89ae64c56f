#include "engine/train/train_cells.h"

#include <cmath>

#include "engine/engine_state.h"
#include "engine/ops.h"

namespace mf::nn {

WithLossCell::WithLossCell(std::shared_ptr<Cell> backbone, std::shared_ptr<Loss> loss_fn)
    : Cell("WithLossCell"), backbone_(std::move(backbone)), loss_(std::move(loss_fn)) {
  MF_CHECK(backbone_ != nullptr, InvalidArgument, "WithLossCell: the backbone network is null");
  MF_CHECK(loss_ != nullptr, InvalidArgument, "WithLossCell: the loss function is null");
  adopt_shared("_backbone", backbone_);
}

Tensor WithLossCell::operator()(const Tensor& data, const Tensor& label,
                                std::source_location where) {
  MF_CHECK(label.defined(), InvalidArgument, "WithLossCell: the label tensor is undefined");
  const std::vector<Tensor> inputs{data, label};
  return Cell::operator()(std::span<const Tensor>(inputs), where);
}

Tensor WithLossCell::forward(const Tensor& data) {
  return (*loss_)((*backbone_)(data), extra_input(0));
}

namespace {

std::vector<Tensor> checked_weights(WithLossCell& network, const Optimizer& optimizer) {
  const auto parameters = network.named_parameters();
  const auto& names = optimizer.parameter_names();
  for (size_t i = 0; i < optimizer.parameters().size(); ++i) {
    bool found = false;
    for (const auto& [name, p] : parameters)
      found = found || p.impl() == optimizer.parameters()[i].impl();
    MF_CHECK(found, InvalidArgument, "TrainOneStepCell: the optimizer trains '", echo(names[i]),
             "', which is not a parameter of the network; build the optimizer from the "
             "network's trainable_params()");
  }
  return optimizer.parameters();
}

}  // namespace

TrainOneStepCell::TrainOneStepCell(std::shared_ptr<WithLossCell> network,
                                   std::shared_ptr<Optimizer> optimizer, double sens)
    : network_(std::move(network)),
      optimizer_(std::move(optimizer)),
      sens_(sens),
      grad_([&]() -> GradFunction {
        MF_CHECK(network_ != nullptr && optimizer_ != nullptr, InvalidArgument,
                 "TrainOneStepCell: the network and the optimizer must not be null");
        MF_CHECK(std::isfinite(sens), InvalidArgument,
                 "TrainOneStepCell: sens must be a finite number, got ", sens);
        return GradFunction(
            *network_,
            GradSpec{.input = false, .weights = checked_weights(*network_, *optimizer_)});
      }()) {}

Tensor TrainOneStepCell::operator()(const Tensor& data, const Tensor& label,
                                    std::source_location where) {
  const auto policy = engine::current_policy();
  const bool data_parallel = policy->parallel_mode.value == context::ParallelMode::kDataParallel;
  if (data_parallel) {
    GradReducerOptions options{.mean = policy->gradients_mean.value,
                               .split_indices = policy->all_reduce_fusion_config.value,
                               .device_num = policy->device_num.value};
    const bool first = reducer_ == nullptr;
    if (first || reducer_->options().mean != options.mean ||
        reducer_->options().split_indices != options.split_indices ||
        reducer_->options().device_num != options.device_num) {
      auto reducer = std::make_unique<DistributedGradReducer>(
          optimizer_->parameter_names(), optimizer_->parameters(), std::move(options));
      if (first) reducer->broadcast_parameters();
      reducer_ = std::move(reducer);
      // A compiled step starts each bucket inside its backward. With one bucket there is nothing
      // left to overlap once its last gradient is ready, so it goes after the step, which then
      // copies the gradients once less.
      graph_reduces_ = reducer_->buckets().size() > 1;
      if (graph_reduces_) {
        grad_.set_graph_rewrite([reducer = reducer_.get()](ir::Graph& graph, size_t first_output) {
          reducer->insert_into(graph, first_output);
        });
      } else {
        grad_.set_graph_rewrite(nullptr);
      }
    }
  } else if (reducer_ != nullptr) {
    reducer_.reset();
    graph_reduces_ = false;
    grad_.set_graph_rewrite(nullptr);
  }
  MF_CHECK(label.defined(), InvalidArgument, "TrainOneStepCell: the label tensor is undefined");
  runtime::comm::take_overlap_stats();  // counts this step's all-reduces only
  const std::vector<Tensor> inputs{data, label};
  Gradients result = grad_(std::span<const Tensor>(inputs), Tensor(), where);
  if (data_parallel) {
    if (graph_reduces_ && grad_.graph_report().ran) {
      // The compiled step reduced the gradients itself.
      const runtime::comm::OverlapStats stats = runtime::comm::take_overlap_stats();
      reducer_->note_compiled_step(stats.seconds, stats.hidden_seconds);
    } else {
      result.weights = (*reducer_)(result.weights);
    }
  }
  if (sens_ != 1.0) {
    // Every backward rule is linear in its seed: scaling the gradients is seeding with sens.
    for (Tensor& g : result.weights) g = ops::mul(g, ops::scalar(sens_, g.dtype()));
  }
  optimizer_->step(result.weights);
  return result.value;
}

}  // namespace mf::nn
