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
    fusion::ClusterRules rules = fusion::cluster_rules_from(options_);
    rules.rule = "elementwise chain";
    rules.level = options_.fusion_level >= 2 ? 2 : 1;
    return fusion::run_clustering(graph, name(), rules, options_);
  }

 private:
  CompileOptions options_;
};

}  // namespace

std::unique_ptr<Pass> make_elementwise_fusion(const CompileOptions& options) {
  return std::make_unique<ElementwiseFusion>(options);
}

}  // namespace mf::passes
