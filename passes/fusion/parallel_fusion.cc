// parallel-fusion (opt_level 3, or --enable_parallel_fusion below it): independent small
// elementwise kernels (fused or single ops) over the same shape run as one kernel with several
// outputs: one launch and one pass over the tiles instead of several.

#include <deque>
#include <map>
#include <unordered_set>

#include "base/error.h"
#include "passes/fusion/cluster.h"
#include "passes/fusion/fusion_passes.h"
#include "runtime/fused_kernel.h"

namespace mf::passes {
namespace {

// Kernels up to this many elements count as small: below it launch and pass overheads dominate.
constexpr int64_t kSmallElements = int64_t{1} << 16;

// True when some path of uses leads from `from` to `to`.
bool reaches(const ir::Node* from, const ir::Node* to) {
  std::deque<const ir::Node*> work{from};
  std::unordered_set<const ir::Node*> seen{from};
  while (!work.empty()) {
    const ir::Node* n = work.front();
    work.pop_front();
    for (size_t k = 0; k < n->num_outputs(); ++k) {
      for (const ir::Use& use : n->uses(k)) {
        if (use.user == nullptr) continue;
        if (use.user == to) return true;
        if (seen.insert(use.user).second) work.push_back(use.user);
      }
    }
  }
  return false;
}

// Promise: merges only kernels with no path between them, so no cycle can form.
class ParallelFusion final : public Pass {
 public:
  explicit ParallelFusion(CompileOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "parallel-fusion"; }

  bool run(ir::Graph& graph) override {
    return fusion::fuse_each_graph(
        graph, name(), options_,
        [this](ir::Graph& g, fusion::FusionReport& report) { return fuse_in(g, report); });
  }

 private:
  // The shape all of a candidate's outputs have, or nullopt when it is no candidate.
  std::optional<ir::Shape> candidate_shape(const ir::Graph& graph, const ir::Node& node) const {
    if (node.num_outputs() == 0) return std::nullopt;
    const ir::Shape& shape = node.output_type(0).shape;
    for (size_t k = 0; k < node.num_outputs(); ++k) {
      if (node.output_type(k).shape != shape) return std::nullopt;
    }
    if (ir::num_elements(shape) > kSmallElements || ir::num_elements(shape) == 0) {
      return std::nullopt;
    }
    if (runtime::is_fused(node)) {
      const ir::Graph* body =
          graph.resolve_subgraph(ir::attr_string(node.attrs(), "graph", node.op()));
      if (body == nullptr) return std::nullopt;
      for (const ir::Node& n : body->nodes()) {
        if (n.def()->has(ir::Trait::kReduce) || n.output_type().shape != shape) return std::nullopt;
      }
      return shape;
    }
    if (!fusion::boundary_reason(node, options_.fusion).empty() ||
        node.def()->has(ir::Trait::kReduce)) {
      return std::nullopt;
    }
    return shape;
  }

  bool fuse_in(ir::Graph& graph, fusion::FusionReport& report) {
    std::map<ir::Shape, std::vector<std::vector<ir::Node*>>> groups;
    for (ir::Node* node : graph.topological_order()) {
      const std::optional<ir::Shape> shape = candidate_shape(graph, *node);
      if (!shape) continue;
      auto& sets = groups[*shape];
      bool placed = false;
      for (auto& set : sets) {
        if (static_cast<int>(set.size()) >= options_.fusion.composite_op_limit_size) continue;
        bool independent = true;
        for (const ir::Node* m : set) independent = independent && !reaches(m, node);
        if (!independent) continue;
        set.push_back(node);
        placed = true;
        break;
      }
      if (!placed) sets.push_back({node});
    }
    bool changed = false;
    for (auto& [shape, sets] : groups) {
      for (auto& set : sets) {
        if (set.size() < 2) continue;
        std::vector<ir::Node*> members;
        const std::unordered_set<const ir::Node*> in(set.begin(), set.end());
        for (ir::Node& n : graph.nodes()) {
          if (in.count(&n) != 0) members.push_back(&n);
        }
        std::vector<std::string> names;
        for (const ir::Node* m : members) names.push_back(fusion::node_name(*m));
        fusion::FusedKernelRecord record;
        record.rule = ::mf::detail::str_cat(
            "parallel: ", members.size(), " independent kernels over ", ir::shape_to_string(shape));
        record.level = 3;
        std::string why;
        if (fusion::fuse_nodes(graph, members, &why, &record) == nullptr) {
          report.rejected({graph.name(), names.front(), "with its parallel peers", why});
          continue;
        }
        report.fused(std::move(record));
        changed = true;
      }
    }
    return changed;
  }

  CompileOptions options_;
};

}  // namespace

std::unique_ptr<Pass> make_parallel_fusion(const CompileOptions& options) {
  return std::make_unique<ParallelFusion>(options);
}

}  // namespace mf::passes
