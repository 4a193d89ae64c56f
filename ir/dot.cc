#include "ir/dot.h"

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "base/file_reader.h"

namespace mf::ir {

namespace {

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Scopes split on '/' into a tree, so "Default/net-Mlp/fc1-Dense" nests inside "Default/net-Mlp".
struct ScopeTree {
  std::map<std::string, std::unique_ptr<ScopeTree>> children;
  std::vector<const Node*> nodes;

  void add(std::string_view scope, const Node* node) {
    ScopeTree* at = this;
    while (!scope.empty()) {
      const size_t slash = scope.find('/');
      const std::string part(scope.substr(0, slash));
      auto& child = at->children[part];
      if (!child) child = std::make_unique<ScopeTree>();
      at = child.get();
      scope = slash == std::string_view::npos ? std::string_view() : scope.substr(slash + 1);
    }
    at->nodes.push_back(node);
  }
};

class DotWriter {
 public:
  explicit DotWriter(const Graph& graph) : graph_(graph) {
    size_t i = 0;
    for (const Node& node : graph.nodes()) ids_[&node] = i++;
  }

  std::string run() {
    out_ << "digraph \"" << escape(graph_.name()) << "\" {\n";
    out_ << "  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
    for (size_t i = 0; i < graph_.num_parameters(); ++i) {
      const Parameter* p = graph_.parameter(i);
      out_ << "  p" << i << " [shape=ellipse" << (p->is_weight() ? ", style=filled" : "")
           << ", label=\"" << escape(p->name()) << "\\n"
           << escape(type_to_string(p->type())) << "\"];\n";
    }
    for (size_t i = 0; i < graph_.num_constants(); ++i) {
      out_ << "  c" << i << " [shape=box, style=dashed, label=\"const" << i + 1 << "\\n"
           << escape(type_to_string(graph_.constant(i)->type())) << "\"];\n";
    }
    ScopeTree scopes;
    for (const Node& node : graph_.nodes()) scopes.add(node.scope(), &node);
    write_scope(scopes, 1);
    out_ << "  out [shape=doubleoctagon, label=\"Return\"];\n";
    for (const Node& node : graph_.nodes()) {
      for (size_t i = 0; i < node.num_inputs(); ++i)
        edge(node.input(i), "n" + std::to_string(ids_.at(&node)));
    }
    for (const Value& v : graph_.outputs()) edge(v, "out");
    out_ << "}\n";
    return out_.str();
  }

 private:
  void write_scope(const ScopeTree& tree, int depth) {
    const std::string indent(2 * depth, ' ');
    for (const Node* node : tree.nodes) {
      std::string label = node->op();
      for (const TensorType& t : node->output_types()) label += "\n" + type_to_string(t);
      out_ << indent << "n" << ids_.at(node) << " [shape=box, label=\"" << escape(label)
           << "\"];\n";
    }
    for (const auto& [name, child] : tree.children) {
      out_ << indent << "subgraph \"cluster_" << clusters_++ << "\" {\n";
      out_ << indent << "  label=\"" << escape(name) << "\";\n";
      write_scope(*child, depth + 1);
      out_ << indent << "}\n";
    }
  }

  void edge(const Value& v, const std::string& to) {
    switch (v.kind()) {
      case ValueKind::kParameter:
        out_ << "  p" << v.parameter()->index();
        break;
      case ValueKind::kConstant:
        out_ << "  c" << v.constant()->index();
        break;
      case ValueKind::kNode: {
        auto it = ids_.find(v.node());
        if (it == ids_.end()) return;  // a dangling operand has no box to start from
        out_ << "  n" << it->second;
        break;
      }
      case ValueKind::kNone:
        return;
    }
    out_ << " -> " << to;
    if (v.node() != nullptr && v.node()->num_outputs() != 1)
      out_ << " [label=\"" << v.index() << "\"]";
    out_ << ";\n";
  }

  const Graph& graph_;
  std::unordered_map<const Node*, size_t> ids_;
  std::ostringstream out_;
  int clusters_ = 0;
};

}  // namespace

std::string to_dot(const Graph& graph) {
  return DotWriter(graph).run();
}

void write_dot_file(const Graph& graph, const std::string& path) {
  write_file_atomically(path, to_dot(graph), "the Graphviz graph of @" + graph.name() + " to");
}

}  // namespace mf::ir
