#pragma once
// What the fusion passes share: which ops may join a fused kernel (by traits and the
// graph_kernel_flags op lists), growing clusters from a seed through its producers, and replacing
// a cluster by one `fused` node whose body subgraph holds the members.

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/compile_options.h"
#include "passes/fusion/fusion_report.h"

namespace mf::passes::fusion {

// InvalidArgument when a flag's list names an op that is not registered (or, for `expandable`,
// has no expander), listing what it accepts.
void check_op_list(const std::vector<std::string>& names, std::string_view flag, bool expandable);

// Why `node` cannot join any fused kernel under the flags, or "" when it can (an elementwise op
// with tile math or a reduction with row math, single output, not disabled).
std::string boundary_reason(const ir::Node& node, const FusionOptions& options);

// "mul#12": how dumps name a node.
std::string node_name(const ir::Node& node);

// The graphs fusion works on: `root` and its control-flow subgraphs, never fused bodies.
std::vector<ir::Graph*> graphs_to_fuse(ir::Graph& root);

// A fusion pass's run: fuse(graph, report) on each of graphs_to_fuse(root), one report for the pass
// (written to graph_kernel_dump/ when dumps are on); true when any call changed its graph.
bool fuse_each_graph(ir::Graph& root, std::string_view pass, const CompileOptions& options,
                     const std::function<bool(ir::Graph&, FusionReport&)>& fuse);

// Rules for growing one kind of cluster.
struct ClusterRules {
  std::string rule;             // for the dump: "elementwise chain", "stitched rows"
  int level = 1;                // the opt_level that enables the rule
  int current_level = 1;        // the opt_level in effect (named in rejections)
  bool multi_output = false;    // members may also be used outside (opt_level >= 2)
  bool stitch = false;          // reductions may feed members, broadcast over their rows
  bool recompute = false;       // a cheap producer used outside is duplicated into the kernel
  bool require_stitch = false;  // keep only clusters that stitch a reduction
  int limit = 200;              // composite_op_limit_size
  std::optional<int> reduce_fuse_depth;
};

// Rules with the settings every clustering pass takes from the options (current level, multiple
// outputs from opt_level 2, recompute, composite_op_limit_size, reduce_fuse_depth); the caller adds
// its own rule name, enabling level and stitch switches.
ClusterRules cluster_rules_from(const CompileOptions& options);

// Runs a Clusterer with `rules` over the graph and its subgraphs, writing the pass's fusion report.
// True iff anything was fused.
bool run_clustering(ir::Graph& graph, std::string_view pass_name, const ClusterRules& rules,
                    const CompileOptions& options);

// Grows clusters over each graph in reverse topological order and replaces each by a fused node.
// Promise: never creates a cycle, never exceeds the limit, and only builds bodies the fused-kernel
// evaluator accepts; every refused producer is reported with its reason.
class Clusterer {
 public:
  Clusterer(ClusterRules rules, const FusionOptions& options, FusionReport& report)
      : rules_(std::move(rules)), options_(options), report_(report) {}
  bool run(ir::Graph& graph);  // true iff it fused anything

 private:
  struct Cluster;
  enum class Added { kYes, kNo, kLater };
  bool grow_and_fuse(ir::Graph& graph, ir::Node* seed);
  // kLater: the producer is also read outside the cluster, and those readers may still join;
  // asked again with `last_chance`, it is recomputed, exported or refused.
  Added try_add(ir::Graph& graph, Cluster& c, ir::Node* consumer, ir::Node* producer,
                bool last_chance);
  void reject(const ir::Graph& graph, const ir::Node& candidate, const ir::Node& into,
              std::string reason);

  ClusterRules rules_;
  const FusionOptions& options_;
  FusionReport& report_;
  std::set<const ir::Node*> gone_;  // original nodes already fused (their pointers are dangling)
};

// Replaces `members` (nodes of `graph`; fused nodes among them are inlined) by one fused node
// with a new body subgraph. Returns null, erasing nothing, when the evaluator cannot run the body;
// `why` then holds the reason. `record` receives members, bytes saved and the kernel summary.
ir::Node* fuse_nodes(ir::Graph& graph, const std::vector<ir::Node*>& members, std::string* why,
                     FusedKernelRecord* record);

// True when some path leaves `members` and comes back (fusing them would create a cycle).
bool leaves_and_returns(const std::set<const ir::Node*>& members);

}  // namespace mf::passes::fusion
