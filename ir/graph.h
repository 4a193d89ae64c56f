#pragma once
// The dataflow graph: parameters, constants, nodes in program order, outputs, and named subgraphs
// for control flow. Every value knows its uses, so rewrites (replace, insert, erase) stay cheap and
// local.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <list>
#include <memory>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/aligned_allocator.h"
#include "ir/attribute.h"
#include "ir/op_def.h"

namespace mf::ir {

class Graph;
class Node;
class Parameter;
class Constant;

// One use of a value: operand `operand` of `user`, or, when user is null, graph output `operand`.
struct Use {
  Node* user = nullptr;
  size_t operand = 0;
  bool operator==(const Use&) const = default;
};
using UseList = std::vector<Use>;

enum class ValueKind : uint8_t { kNone, kParameter, kConstant, kNode };

// A reference to one tensor value: a parameter, a constant, or output `index` of a node.
// Cheap to copy and compare; it does not own what it points to.
class Value {
 public:
  Value() = default;
  Value(Parameter* parameter) : parameter_(parameter) {}  // NOLINT: a parameter is a value
  Value(Constant* constant) : constant_(constant) {}      // NOLINT: a constant is a value
  Value(Node* node, size_t index = 0)
      : node_(node), index_(index) {}  // NOLINT: output 0 by default

  ValueKind kind() const;
  Parameter* parameter() const { return parameter_; }
  Constant* constant() const { return constant_; }
  Node* node() const { return node_; }
  size_t index() const { return index_; }  // which output of node()
  const TensorType& type() const;          // Internal error on a null value
  explicit operator bool() const { return kind() != ValueKind::kNone; }
  bool operator==(const Value&) const = default;

 private:
  Parameter* parameter_ = nullptr;
  Constant* constant_ = nullptr;
  Node* node_ = nullptr;
  size_t index_ = 0;
};

struct ValueHash {
  size_t operator()(const Value& v) const;
};

// A named graph input. A weight is a parameter initialised from the network's state (MindSpore's
// parameter with a default); the printer marks it as `<Ref[Tensor[...]], ...>`.
class Parameter {
 public:
  const std::string& name() const { return name_; }
  const TensorType& type() const { return type_; }
  bool is_weight() const { return is_weight_; }
  size_t index() const { return index_; }  // position among the graph's parameters
  const UseList& uses() const { return uses_; }

 private:
  friend class Graph;
  std::string name_;
  TensorType type_;
  bool is_weight_ = false;
  size_t index_ = 0;
  UseList uses_;
  const Graph* graph_ = nullptr;
};

// A tensor stored in the graph, row-major, dtype_size bytes per element (bool: one byte, 0 or 1).
// Its bytes start on a 64-byte boundary: kernels read a constant in place (a matmul's frozen
// weights under infer_boost), and a misaligned one split every vector load across two cache lines
// (the transformer at infer_boost 4-5% slower than without).
class Constant {
 public:
  const TensorType& type() const { return type_; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  template <typename T>
  std::span<const T> data() const {
    return {reinterpret_cast<const T*>(bytes_.data()), bytes_.size() / sizeof(T)};
  }
  size_t index() const { return index_; }
  const UseList& uses() const { return uses_; }

 private:
  friend class Graph;
  TensorType type_;
  std::vector<uint8_t, AlignedAllocator<uint8_t>> bytes_;
  size_t index_ = 0;
  UseList uses_;
  const Graph* graph_ = nullptr;
};

// Where a node came from: the cell scope ("Default/net-Mlp/fc1-Dense") and the call site
// ("mlp.cc:42").
struct NodeInfo {
  std::string scope;
  std::string location;
};

// One op application. Inputs, outputs and use lists change only through Graph, which keeps them
// consistent; attributes, scope and location may be edited in place.
class Node {
 public:
  int64_t id() const { return id_; }  // unique within its graph, stable across rewrites
  const std::string& op() const { return op_; }
  const OpDef* def() const { return def_; }  // null when the op is not registered
  std::span<const Value> inputs() const { return inputs_; }
  const Value& input(size_t i) const { return inputs_.at(i); }
  size_t num_inputs() const { return inputs_.size(); }
  const Attrs& attrs() const { return attrs_; }
  void set_attr(std::string name, AttrValue value) {
    attrs_.insert_or_assign(std::move(name), std::move(value));
  }
  std::span<const TensorType> output_types() const { return output_types_; }
  const TensorType& output_type(size_t k = 0) const { return output_types_.at(k); }
  size_t num_outputs() const { return output_types_.size(); }
  Value output(size_t k = 0) { return Value(this, k); }
  const UseList& uses(size_t k = 0) const { return uses_.at(k); }
  bool has_uses() const;  // any output used by a node or a graph output
  const std::string& scope() const { return info_.scope; }
  const std::string& location() const { return info_.location; }
  const NodeInfo& info() const { return info_; }
  void set_info(NodeInfo info) { info_ = std::move(info); }

 private:
  friend class Graph;
  int64_t id_ = 0;
  std::string op_;
  const OpDef* def_ = nullptr;
  std::vector<Value> inputs_;
  Attrs attrs_;
  std::vector<TensorType> output_types_;
  std::vector<UseList> uses_;  // one list per output
  NodeInfo info_;
  std::list<Node>::iterator position_;  // where this node sits in its graph's node list
  const Graph* graph_ = nullptr;
};

// Owns parameters, constants, nodes (in program order) and subgraphs; keeps every use list exact.
// Pointers to its parts stay valid until they are erased; the graph itself is neither copied nor
// moved.
class Graph {
 public:
  explicit Graph(std::string name = "graph", Graph* parent = nullptr);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  const std::string& name() const { return name_; }
  Graph* parent() const { return parent_; }

  // A deep copy (subgraphs included, node ids and order kept) without a parent, for passes that
  // need the graph before and after, and for caches that must not share nodes with the caller.
  std::unique_ptr<Graph> clone() const;

  // Names are [A-Za-z0-9_.]+ and unique, so the text format can print them bare.
  Parameter* add_parameter(std::string name, TensorType type, bool is_weight = false);
  size_t num_parameters() const { return parameters_.size(); }
  Parameter* parameter(size_t i) const { return parameters_.at(i).get(); }
  Parameter* find_parameter(std::string_view name) const;

  // bytes.size() must equal num_elements * dtype_size; bool bytes must be 0 or 1. The bytes are
  // copied into the constant's aligned storage.
  Constant* add_constant(TensorType type, std::span<const uint8_t> bytes);
  template <typename T>
  Constant* add_constant(Shape shape, const std::vector<T>& values) {
    std::vector<uint8_t> bytes(values.size() * sizeof(T));
    for (size_t i = 0; i < values.size(); ++i) {
      T v = values[i];
      std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
    }
    return add_constant(TensorType{dtype_of<T>(), std::move(shape)}, bytes);
  }
  size_t num_constants() const { return constants_.size(); }
  Constant* constant(size_t i) const { return constants_.at(i).get(); }
  // Drops constants nothing uses (left behind by folding) and renumbers the rest in order; returns
  // how many went. Constant pointers that remain stay valid.
  size_t erase_unused_constants();

  // Appends a node of a registered op; output types come from OpDef::infer_types, which also checks
  // arity and attributes and fills defaults. Unknown ops fail with NotFound.
  Node* add_node(std::string_view op, std::vector<Value> inputs, Attrs attrs = {},
                 NodeInfo info = {});
  // The same, placed just before `before` (null: at the end).
  Node* insert_node(Node* before, std::string_view op, std::vector<Value> inputs, Attrs attrs = {},
                    NodeInfo info = {});
  // No inference: the caller states the output types (parser of foreign ops, tests of the
  // verifier).
  Node* create_node(Node* before, std::string op, std::vector<Value> inputs, Attrs attrs,
                    std::vector<TensorType> output_types, NodeInfo info = {});
  // Re-runs inference on a node whose inputs or attributes changed and stores the new output types.
  void reinfer(Node* node);
  // Binding a compiled graph to other sizes (a graph with dynamic dimensions): a parameter's new
  // type, and a control-flow node's output types taken from its subgraph. The caller re-infers
  // what uses them, in order.
  void set_parameter_type(Parameter* parameter, TensorType type);
  void set_output_types(Node* node, std::vector<TensorType> types);

  size_t num_nodes() const { return nodes_.size(); }
  // Program order. Mutating the graph while iterating is fine except erasing the current node.
  std::ranges::ref_view<std::list<Node>> nodes() { return std::ranges::ref_view(nodes_); }
  std::ranges::ref_view<const std::list<Node>> nodes() const {
    return std::ranges::ref_view(nodes_);
  }
  bool contains(const Node* node) const;  // O(nodes)

  void set_input(Node* node, size_t operand, Value value);
  // Every use of `old` (node operands and graph outputs) now uses `replacement`, except operands of
  // `except` (so `y = f(x); replace_all_uses(x, y, y)` does not make y use itself). Types must
  // match.
  void replace_all_uses(Value old, Value replacement, const Node* except = nullptr);
  // Only an unused node may go: erasing a used one would leave dangling operands.
  void erase_node(Node* node);
  // Moves `node` just before `before` (null: to the end).
  void move_node(Node* node, Node* before);

  std::span<const Value> outputs() const { return outputs_; }
  // `name` (optional, a valid IR name) is what the network calls the output: an ONNX model's
  // output name, `Return(%3 as logits)` in IR text. Runners write outputs under it.
  void add_output(Value value, std::string name = {});
  void set_output(size_t i, Value value);
  // Drops every output (the nodes stay; dead code removes what nothing uses any more).
  void clear_outputs();
  // "" when output i has no name.
  const std::string& output_name(size_t i) const { return output_names_.at(i); }
  void set_output_name(size_t i, std::string name);

  const UseList& uses(Value value) const;

  // Dependency order, as close to program order as possible; Internal error on a cycle.
  std::vector<Node*> topological_order() const;
  // Reorders the node list into topological_order().
  void sort_nodes();

  // Subgraphs for call/cond/while: a node names one in a string attribute ("graph": "body").
  Graph* add_subgraph(std::string name);
  // A deep copy of `source` (its subgraphs included) as a new subgraph named `name`.
  Graph* add_subgraph_copy(std::string name, const Graph& source);
  Graph* find_subgraph(std::string_view name) const;     // direct children only
  Graph* resolve_subgraph(std::string_view name) const;  // this graph's children, then its parent's
  std::vector<Graph*> subgraphs() const;                 // in insertion order
  // Removes a direct child (and everything below it); the caller makes sure no node names it.
  void erase_subgraph(const Graph* subgraph);
  // Erases every direct child for which `dead` holds, in one pass; returns how many.
  size_t erase_subgraphs_if(const std::function<bool(const Graph&)>& dead);

 private:
  UseList& mutable_uses(Value value);
  void add_use(Value value, Use use);
  void remove_use(Value value, Use use);
  // InvalidArgument unless `value` is a live value of this graph. The parts name it in the message
  // ("input ", 1, " of op '", "add", "'") and are joined only on failure, so a passing check, made
  // for every operand of every node created, builds no text. Defined (and used only) in graph.cc.
  template <typename... What>
  void check_value(Value value, const What&... what) const;
  void copy_into(Graph& target) const;

  std::string name_;
  Graph* parent_;
  std::vector<std::unique_ptr<Parameter>> parameters_;
  std::vector<std::unique_ptr<Constant>> constants_;
  std::list<Node> nodes_;
  std::vector<Value> outputs_;
  std::vector<std::string> output_names_;  // parallel to outputs_
  std::vector<std::unique_ptr<Graph>> subgraphs_;
  // Subgraphs by name, so every lookup (parser, verifier, inliner, interpreter) is O(1): with a
  // linear search, a module of 50,000 subgraphs took 73 s to check. The views point into the
  // subgraphs' own names, which never change.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  std::unordered_map<std::string_view, Graph*, NameHash, std::equal_to<>> subgraph_index_;
  int64_t next_node_id_ = 0;
};

// True when `name` may be printed bare as a parameter or graph name.
bool is_valid_ir_name(std::string_view name);

// True when a node of `graph` or of a subgraph writes an input in place (Trait::kWritesInput).
bool writes_inputs(const Graph& graph);

}  // namespace mf::ir
