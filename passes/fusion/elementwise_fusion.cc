// elementwise-fusion (opt_level 1): chains of elementwise and broadcast ops, with reductions over
// trailing axes as their tails, become one `fused` node each. From opt_level 2 a kernel may have
// several outputs; with --enable_recompute_fusion a cheap producer that other kernels also read
// is duplicated into this one rather than written to memory and read back.

#include "passes/fusion/cluster.h"
#include "passes/fusion/fusion_passes.h"

namespace mf::passes {
namespace {

// Promise: every fused node it creates runs bit for bit as its members did; the dump lists each
// kernel and each refused producer with the reason.
class ElementwiseFusion final : public Pass {
 public:
  explicit ElementwiseFusion(CompileOptions options) : options_(std::move(options)) {
    fusion::check_op_list(options_.fusion.enable_cluster_ops, "--enable_cluster_ops", false);
    fusion::check_op_list(options_.fusion.enable_cluster_ops_only, "--enable_cluster_ops_only",
                          false);
    fusion::check_op_list(options_.fusion.disable_cluster_ops, "--disable_cluster_ops", false);
  }

  std::string_view name() const override { return "elementwise-fusion"; }

  bool run(ir::Graph& graph) override {
    fusion::FusionReport report(std::string(name()), options_);
    fusion::ClusterRules rules;
    rules.rule = "elementwise chain";
    rules.level = options_.fusion_level >= 2 ? 2 : 1;
    rules.current_level = options_.fusion_level;
    rules.multi_output = options_.fusion_level >= 2;
    rules.recompute = options_.fusion.recompute;
    rules.limit = options_.fusion.composite_op_limit_size;
    rules.reduce_fuse_depth = options_.fusion.reduce_fuse_depth;
    fusion::Clusterer clusterer(rules, options_.fusion, report);
    bool changed = false;
    for (ir::Graph* g : fusion::graphs_to_fuse(graph)) changed |= clusterer.run(*g);
    report.write();
    return changed;
  }

 private:
  CompileOptions options_;
};

}  // namespace

std::unique_ptr<Pass> make_elementwise_fusion(const CompileOptions& options) {
  return std::make_unique<ElementwiseFusion>(options);
}

}  // namespace mf::passes
