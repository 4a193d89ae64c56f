// stitch-fusion (opt_level 3, or --enable_stitch_fusion below it): a reduction whose result is
// broadcast back over the same rows joins the elementwise ops that read it, so softmax and
// layer_norm become one kernel that reads each row once per reduction and once for the output.
// Runs before elementwise-fusion, which takes whatever does not stitch.

#include "passes/fusion/cluster.h"
#include "passes/fusion/fusion_passes.h"

namespace mf::passes {
namespace {

// Promise: only builds kernels that stitch at least one reduction; bit for bit as unfused.
class StitchFusion final : public Pass {
 public:
  explicit StitchFusion(CompileOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "stitch-fusion"; }

  bool run(ir::Graph& graph) override {
    fusion::ClusterRules rules = fusion::cluster_rules_from(options_);
    rules.rule = "stitched rows (reduce -> broadcast -> elementwise)";
    rules.level = 3;
    rules.stitch = true;
    rules.require_stitch = true;
    return fusion::run_clustering(graph, name(), rules, options_);
  }

 private:
  CompileOptions options_;
};

}  // namespace

std::unique_ptr<Pass> make_stitch_fusion(const CompileOptions& options) {
  return std::make_unique<StitchFusion>(options);
}

}  // namespace mf::passes
