// expand-composite-ops (opt_level 1): composite ops (Trait::kComposite with an expander declared
// beside the op) become the basic ops their expander builds, so elementwise-fusion can cluster
// them. Elementwise composites (sigmoid, gelu, square: ops with their own tile math) need no
// expansion to fuse and stay whole unless named. By default an op expands only where its
// expansion reproduces its kernel bit for bit;
// --enable_expand_ops=op expands it wherever the shapes allow (rounding may then differ within the
// op's tolerance), --enable_expand_ops_only=a,b expands only those, --disable_expand_ops never.

#include <algorithm>

#include "base/error.h"
#include "passes/fusion/cluster.h"
#include "passes/fusion/fusion_passes.h"

namespace mf::passes {
namespace {

bool listed(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Promise: replaces each expanded node's outputs by its expansion and removes the node; ops it
// does not expand stay whole and are reported with the reason.
class ExpandCompositeOps final : public Pass {
 public:
  explicit ExpandCompositeOps(CompileOptions options) : options_(std::move(options)) {
    const FusionOptions& f = options_.fusion;
    fusion::check_op_list(f.enable_expand_ops, "--enable_expand_ops", true);
    fusion::check_op_list(f.enable_expand_ops_only, "--enable_expand_ops_only", true);
    fusion::check_op_list(f.disable_expand_ops, "--disable_expand_ops", true);
  }

  std::string_view name() const override { return "expand-composite-ops"; }

  bool run(ir::Graph& graph) override {
    return fusion::fuse_each_graph(
        graph, name(), options_,
        [this](ir::Graph& g, fusion::FusionReport& report) { return expand_in(g, report); });
  }

 private:
  bool expand_in(ir::Graph& graph, fusion::FusionReport& report) {
    const FusionOptions& f = options_.fusion;
    std::vector<ir::Node*> nodes;
    for (ir::Node& node : graph.nodes()) {
      if (node.def() != nullptr && node.def()->has(ir::Trait::kComposite) && node.def()->expander) {
        nodes.push_back(&node);
      }
    }
    bool changed = false;
    for (ir::Node* node : nodes) {
      const std::string& op = node->op();
      const std::string who = fusion::node_name(*node);
      if (listed(f.disable_expand_ops, op)) {
        report.rejected({graph.name(), who, "", "disabled by --disable_expand_ops=" + op});
        continue;
      }
      if (!f.enable_expand_ops_only.empty() && !listed(f.enable_expand_ops_only, op)) {
        report.rejected({graph.name(), who, "", "not in --enable_expand_ops_only"});
        continue;
      }
      const bool forced = listed(f.enable_expand_ops, op) || listed(f.enable_expand_ops_only, op);
      if (!forced && node->def()->elementwise.has_value()) {
        // Its tile math already joins a fused kernel as one member, evaluated in registers; the
        // basic ops would each add a pass over the tile (gelu_tanh: 11). Measured on the
        // elementwise net: 8.3 ms whole against 10.5-11.7 ms expanded
        // (docs/perf-log/modes-and-fusion.md, §3.2).
        report.rejected({graph.name(), who, "",
                         "an elementwise composite joins a fused kernel whole, in one pass; name "
                         "it in --enable_expand_ops to expand it into basic ops"});
        continue;
      }
      const size_t before = graph.num_nodes();
      const int64_t first_new = next_id(graph);
      const std::vector<ir::Value> values = node->def()->expander(graph, *node, !forced);
      if (values.empty()) {
        report.rejected(
            {graph.name(), who, "",
             forced ? "its expansion does not apply to " + ir::type_to_string(node->input(0).type())
                    : "its expansion would not reproduce the kernel bit for bit on " +
                          ir::type_to_string(node->input(0).type()) +
                          " (name it in --enable_expand_ops to expand anyway)"});
        continue;
      }
      const size_t added = graph.num_nodes() - before;
      if (has_reduction_since(graph, first_new) && (!stitch_ || !forced)) {
        // A composite with reductions (softmax, log_softmax, layer_norm) has a row kernel that
        // makes one pass over each row in L1; its stitched expansion is slower (softmax over
        // (4096, 1024): 1.9 ms whole, 4.8 ms stitched, one thread;
        // docs/perf-log/modes-and-fusion.md, §3.2), and without stitching its reductions would be
        // kernels of their own. Expanded only when named.
        erase_since(graph, first_new);
        report.rejected(
            {graph.name(), who, "",
             stitch_ ? "its own kernel does the reductions in one pass over each row, faster than "
                       "its stitched expansion; name it in --enable_expand_ops to expand it"
                     : "its expansion has reductions, which only pay off stitched (opt_level 3 "
                       "or --enable_stitch_fusion); kept whole"});
        continue;
      }
      for (size_t k = 0; k < values.size(); ++k) graph.replace_all_uses(node->output(k), values[k]);
      graph.erase_node(node);
      report.note(detail::str_cat("expanded ", who, " into ", added, " basic ops",
                                  forced ? " (by request; rounding may differ)" : " (bit-exact)"));
      changed = true;
    }
    return changed;
  }

  // Node ids only grow: nodes an expander adds have ids from next_id() on.
  static int64_t next_id(const ir::Graph& graph) {
    int64_t id = 0;
    for (const ir::Node& n : graph.nodes()) id = std::max(id, n.id() + 1);
    return id;
  }

  static bool has_reduction_since(const ir::Graph& graph, int64_t first) {
    for (const ir::Node& n : graph.nodes()) {
      if (n.id() >= first && n.def()->has(ir::Trait::kReduce)) return true;
    }
    return false;
  }

  // Removes the nodes an expander added (nothing uses them yet), latest first.
  static void erase_since(ir::Graph& graph, int64_t first) {
    std::vector<ir::Node*> added;
    for (ir::Node& n : graph.nodes()) {
      if (n.id() >= first) added.push_back(&n);
    }
    for (auto it = added.rbegin(); it != added.rend(); ++it) graph.erase_node(*it);
    graph.erase_unused_constants();
  }

  CompileOptions options_;
  bool stitch_ = options_.fusion_level >= 3 || options_.fusion.stitch;
};

}  // namespace

std::unique_ptr<Pass> make_expand_composite_ops(const CompileOptions& options) {
  return std::make_unique<ExpandCompositeOps>(options);
}

}  // namespace mf::passes
