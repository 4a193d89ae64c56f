#pragma once
// MindSpore's training cells. WithLossCell joins a network and its loss into one cell, so GRAPH
// mode traces and compiles forward and loss as one graph; TrainOneStepCell takes the gradient of
// that cell with respect to the optimizer's parameters (one compiled graph, forward and backward,
// in GRAPH mode; the tape in PYNATIVE) and lets the optimizer update them in place.

#include <memory>
#include <source_location>

#include "engine/autodiff/grad.h"
#include "engine/nn/cell.h"
#include "engine/train/grad_reducer.h"
#include "engine/train/loss.h"
#include "engine/train/optimizer.h"

namespace mf::nn {

// loss_fn(backbone(data), label), called with (data, label): the label is the cell's second
// input, so a compiled graph binds each step's labels at every call, and a label of another
// shape (the last, smaller batch) compiles that shape once, as the data's does.
class WithLossCell : public Cell {
 public:
  WithLossCell(std::shared_ptr<Cell> backbone, std::shared_ptr<Loss> loss_fn);
  Tensor operator()(const Tensor& data, const Tensor& label,
                    std::source_location where = std::source_location::current());
  using Cell::operator();
  Tensor forward(const Tensor& data) override;
  Cell& backbone() { return *backbone_; }
  Loss& loss_fn() { return *loss_; }

 private:
  std::shared_ptr<Cell> backbone_;
  std::shared_ptr<Loss> loss_;
};

// One training step per call: the loss of (data, label), its gradient with respect to the
// optimizer's parameters (seeded with `sens`), and the optimizer's update. Returns the loss.
// With parallel_mode=data_parallel the gradients are all-reduced over the workers of the group
// before the update (summed, or averaged with gradients_mean), and the first step gives every
// worker worker 0's parameters.
class TrainOneStepCell {
 public:
  // InvalidArgument when the optimizer trains a tensor that is not a parameter of the network.
  TrainOneStepCell(std::shared_ptr<WithLossCell> network, std::shared_ptr<Optimizer> optimizer,
                   double sens = 1.0);
  Tensor operator()(const Tensor& data, const Tensor& label,
                    std::source_location where = std::source_location::current());
  WithLossCell& network() { return *network_; }
  Optimizer& optimizer() { return *optimizer_; }
  // GRAPH mode: what the last step compiled or reused.
  const engine::GraphRunReport& graph_report() const { return grad_.graph_report(); }
  // The data-parallel reducer, once a data-parallel step has run (null before and otherwise).
  const DistributedGradReducer* grad_reducer() const { return reducer_.get(); }

 private:
  std::shared_ptr<WithLossCell> network_;
  std::shared_ptr<Optimizer> optimizer_;
  double sens_;
  GradFunction grad_;
  std::unique_ptr<DistributedGradReducer> reducer_;
  bool graph_reduces_ = false;  // the compiled step all-reduces the gradients itself
};

}  // namespace mf::nn
