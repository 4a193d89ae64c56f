#pragma once
// nn::Cell, MindSpore's building block: a network or layer with named parameters and named child
// cells. Calling a cell enters its scope ("Default/net-Mlp/fc1-Dense"), so every op it issues
// carries the scope in errors, dumps and reports.

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace mf::nn {

class Cell {
 public:
  explicit Cell(std::string class_name) : class_name_(std::move(class_name)) {}
  virtual ~Cell() = default;
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  // Runs forward() inside this cell's scope.
  Tensor operator()(const Tensor& x);
  virtual Tensor forward(const Tensor& x) = 0;

  const std::string& class_name() const { return class_name_; }
  // The name its parent gave it ("fc1"); "net" for a top-level cell.
  const std::string& instance_name() const { return instance_name_; }

  // Parameters of this cell and its descendants, in registration order: "fc1.weight", "fc1.bias",
  // ...
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Cell*>> named_children() const;
  // Replaces a parameter's value (same shape and dtype), e.g. with trained weights.
  void set_parameter(const std::string& dotted_name, const Tensor& value);

 protected:
  // Returns a reference that stays valid for the cell's life.
  Tensor& register_parameter(std::string name, Tensor value);
  template <typename C>
  C& register_child(std::string name, std::unique_ptr<C> child) {
    C& ref = *child;
    adopt(std::move(name), std::move(child));
    return ref;
  }

 private:
  void adopt(std::string name, std::unique_ptr<Cell> child);
  void collect_parameters(const std::string& prefix,
                          std::vector<std::pair<std::string, Tensor>>& out) const;

  std::string class_name_;
  std::string instance_name_ = "net";
  std::deque<std::pair<std::string, Tensor>> parameters_;  // deque: references stay valid
  std::vector<std::pair<std::string, std::unique_ptr<Cell>>> children_;
};

}  // namespace mf::nn
