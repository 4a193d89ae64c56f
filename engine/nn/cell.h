#pragma once
// nn::Cell, MindSpore's building block: a network or layer with named parameters and named child
// cells. Calling a cell enters its scope ("Default/net-Mlp/fc1-Dense"), so every op it issues
// carries the scope in errors, dumps and reports.

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "context/policy.h"
#include "engine/tensor.h"

namespace mf::engine {
class CompiledCache;
struct GraphRunReport;
}  // namespace mf::engine

namespace mf::nn {

// A network's own compile settings; they beat the context's jit_config, as in MindSpore's
// JitConfig.
struct JitConfig {
  std::string jit_level;  // "O0", "O1", "O2" or empty (the context decides)
};

class Cell {
 public:
  explicit Cell(std::string class_name);
  virtual ~Cell();
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  // Runs forward() inside this cell's scope: op by op in PYNATIVE mode; in GRAPH mode the top-level
  // call traces, compiles (once per input signature and settings) and runs the compiled graph.
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

  // Throws InvalidArgument for a level other than O0, O1, O2 or empty.
  void set_jit_config(const JitConfig& config);
  std::optional<context::JitLevel> jit_level() const { return jit_level_; }
  // What the last GRAPH-mode call did (compiled or reused, times, executor, dumps).
  const engine::GraphRunReport& graph_report() const;
  // Drops compiled forms (the next GRAPH-mode call compiles again).
  void clear_compiled();

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
  std::optional<context::JitLevel> jit_level_;
  std::unique_ptr<engine::CompiledCache> compiled_;
  std::deque<std::pair<std::string, Tensor>> parameters_;  // deque: references stay valid
  std::vector<std::pair<std::string, std::unique_ptr<Cell>>> children_;
};

}  // namespace mf::nn
