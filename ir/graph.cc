#include "ir/graph.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "base/error.h"

namespace mf::ir {

ValueKind Value::kind() const {
  if (parameter_ != nullptr) return ValueKind::kParameter;
  if (constant_ != nullptr) return ValueKind::kConstant;
  if (node_ != nullptr) return ValueKind::kNode;
  return ValueKind::kNone;
}

const TensorType& Value::type() const {
  switch (kind()) {
    case ValueKind::kParameter:
      return parameter_->type();
    case ValueKind::kConstant:
      return constant_->type();
    case ValueKind::kNode:
      return node_->output_type(index_);
    case ValueKind::kNone:
      break;
  }
  MF_FAIL(Internal, "asked for the type of a null value");
}

size_t ValueHash::operator()(const Value& v) const {
  const void* p = v.parameter() != nullptr  ? static_cast<const void*>(v.parameter())
                  : v.constant() != nullptr ? static_cast<const void*>(v.constant())
                                            : static_cast<const void*>(v.node());
  return std::hash<const void*>()(p) * 31 + v.index();
}

bool Node::has_uses() const {
  return std::any_of(uses_.begin(), uses_.end(), [](const UseList& u) { return !u.empty(); });
}

bool is_valid_ir_name(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
  });
}

namespace {

// Two vectorized scans: find_first_of("\r\n") would call memchr once per character.
bool has_line_break(std::string_view text) {
  return text.find('\n') != std::string_view::npos || text.find('\r') != std::string_view::npos;
}

void check_info(const NodeInfo& info, std::string_view op) {
  // Scope and location print on their own comment lines; a newline would end them early.
  MF_CHECK(!has_line_break(info.scope), InvalidArgument, "scope of op '", op,
           "' contains a line break");
  MF_CHECK(!has_line_break(info.location), InvalidArgument, "location of op '", op,
           "' contains a line break");
}

}  // namespace

Graph::Graph(std::string name, Graph* parent) : name_(std::move(name)), parent_(parent) {
  MF_CHECK(is_valid_ir_name(name_), InvalidArgument, "graph name '", name_,
           "' is not valid: use letters, digits, '_' and '.'");
}

Graph::~Graph() = default;

std::unique_ptr<Graph> Graph::clone() const {
  auto copy = std::make_unique<Graph>(name_);
  copy_into(*copy);
  return copy;
}

void Graph::copy_into(Graph& target) const {
  for (const auto& p : parameters_) target.add_parameter(p->name_, p->type_, p->is_weight_);
  for (const auto& c : constants_) target.add_constant(c->type_, c->bytes_);
  std::unordered_map<const Node*, Node*> mapped;
  auto map_value = [&](const Value& v) -> Value {
    switch (v.kind()) {
      case ValueKind::kParameter:
        return target.parameter(v.parameter()->index());
      case ValueKind::kConstant:
        return target.constant(v.constant()->index());
      case ValueKind::kNode:
        return Value(mapped.at(v.node()), v.index());
      case ValueKind::kNone:
        break;
    }
    return Value();
  };
  // Creation follows dependencies so every operand exists; the original order is restored after.
  for (const Node* node : topological_order()) {
    std::vector<Value> inputs;
    for (const Value& v : node->inputs_) inputs.push_back(map_value(v));
    Node* copy = target.create_node(nullptr, node->op_, std::move(inputs), node->attrs_,
                                    node->output_types_, node->info_);
    copy->id_ = node->id_;
    mapped[node] = copy;
  }
  for (const Node& node : nodes_) target.move_node(mapped.at(&node), nullptr);
  target.next_node_id_ = next_node_id_;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    target.add_output(map_value(outputs_[i]), output_names_[i]);
  }
  for (const auto& sub : subgraphs_) sub->copy_into(*target.add_subgraph(sub->name_));
}

Parameter* Graph::add_parameter(std::string name, TensorType type, bool is_weight) {
  MF_CHECK(is_valid_ir_name(name), InvalidArgument, "parameter name '", name,
           "' is not valid: use letters, digits, '_' and '.'");
  MF_CHECK(find_parameter(name) == nullptr, InvalidArgument, "graph @", name_,
           " already has a parameter named '", name, "'");
  auto p = std::make_unique<Parameter>();
  p->name_ = std::move(name);
  p->type_ = std::move(type);
  p->is_weight_ = is_weight;
  p->index_ = parameters_.size();
  p->graph_ = this;
  parameters_.push_back(std::move(p));
  return parameters_.back().get();
}

Parameter* Graph::find_parameter(std::string_view name) const {
  for (const auto& p : parameters_) {
    if (p->name() == name) return p.get();
  }
  return nullptr;
}

Constant* Graph::add_constant(TensorType type, std::span<const uint8_t> bytes) {
  const size_t expected =
      static_cast<size_t>(checked_byte_size(type.shape, dtype_size(type.dtype), "constant"));
  MF_CHECK(bytes.size() == expected, InvalidArgument, "constant of type ", type_to_string(type),
           " needs ", expected, " bytes, got ", bytes.size());
  if (type.dtype == DType::kBool) {
    MF_CHECK(std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b <= 1; }),
             InvalidArgument, "a Bool constant holds a byte other than 0 or 1");
  }
  auto c = std::make_unique<Constant>();
  c->type_ = std::move(type);
  c->bytes_.assign(bytes.begin(), bytes.end());
  c->index_ = constants_.size();
  c->graph_ = this;
  constants_.push_back(std::move(c));
  return constants_.back().get();
}

template <typename... What>
void Graph::check_value(Value value, const What&... what) const {
  switch (value.kind()) {
    case ValueKind::kNone:
      MF_FAIL(InvalidArgument, what..., " is a null value");
    case ValueKind::kParameter:
      MF_CHECK(value.parameter()->graph_ == this, InvalidArgument, what...,
               " is a parameter of another graph");
      return;
    case ValueKind::kConstant:
      MF_CHECK(value.constant()->graph_ == this, InvalidArgument, what...,
               " is a constant of another graph");
      return;
    case ValueKind::kNode:
      MF_CHECK(value.node()->graph_ == this, InvalidArgument, what...,
               " is a node of another graph");
      MF_CHECK(value.index() < value.node()->num_outputs(), InvalidArgument, what..., " is output ",
               value.index(), " of op '", value.node()->op(), "', which has ",
               value.node()->num_outputs(), " outputs");
      return;
  }
}

Node* Graph::add_node(std::string_view op, std::vector<Value> inputs, Attrs attrs, NodeInfo info) {
  return insert_node(nullptr, op, std::move(inputs), std::move(attrs), std::move(info));
}

Node* Graph::insert_node(Node* before, std::string_view op, std::vector<Value> inputs, Attrs attrs,
                         NodeInfo info) {
  const OpDef& def = get_op(op);
  std::vector<TensorType> types;
  types.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_value(inputs[i], "input ", i, " of op '", op, "'");
    types.push_back(inputs[i].type());
  }
  std::vector<TensorType> outputs = def.infer_types(types, attrs);
  return create_node(before, def.name, std::move(inputs), std::move(attrs), std::move(outputs),
                     std::move(info));
}

Node* Graph::create_node(Node* before, std::string op, std::vector<Value> inputs, Attrs attrs,
                         std::vector<TensorType> output_types, NodeInfo info) {
  check_info(info, op);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_value(inputs[i], "input ", i, " of op '", op, "'");
  }
  MF_CHECK(before == nullptr || before->graph_ == this, Internal,
           "insertion point is not a node of graph @", name_);
  auto pos = before == nullptr ? nodes_.end() : before->position_;
  auto it = nodes_.emplace(pos);
  Node& node = *it;
  node.position_ = it;
  node.graph_ = this;
  node.id_ = next_node_id_++;
  node.def_ = find_op(op);
  node.op_ = std::move(op);
  node.inputs_ = std::move(inputs);
  node.attrs_ = std::move(attrs);
  node.uses_.resize(output_types.size());
  node.output_types_ = std::move(output_types);
  node.info_ = std::move(info);
  for (size_t i = 0; i < node.inputs_.size(); ++i) add_use(node.inputs_[i], Use{&node, i});
  return &node;
}

void Graph::reinfer(Node* node) {
  MF_CHECK(node->def_ != nullptr, InvalidArgument, "cannot infer types of unregistered op '",
           node->op_, "'");
  std::vector<TensorType> types;
  for (const Value& v : node->inputs_) types.push_back(v.type());
  std::vector<TensorType> outputs = node->def_->infer_types(types, node->attrs_);
  MF_CHECK(outputs.size() == node->output_types_.size() || !node->has_uses(), InvalidArgument,
           "op '", node->op_, "' now has ", outputs.size(), " outputs instead of ",
           node->output_types_.size(), " while its outputs are in use");
  node->uses_.resize(outputs.size());
  node->output_types_ = std::move(outputs);
}

void Graph::set_parameter_type(Parameter* parameter, TensorType type) {
  MF_CHECK(parameter != nullptr && parameter->graph_ == this, Internal,
           "set_parameter_type: the parameter is not this graph's");
  parameter->type_ = std::move(type);
}

void Graph::set_output_types(Node* node, std::vector<TensorType> types) {
  MF_CHECK(node != nullptr && node->graph_ == this, Internal,
           "set_output_types: the node is not this graph's");
  MF_CHECK(types.size() == node->output_types_.size(), Internal, "op '", node->op_, "' has ",
           node->output_types_.size(), " outputs, not ", types.size());
  node->output_types_ = std::move(types);
}

bool Graph::contains(const Node* node) const {
  return std::any_of(nodes_.begin(), nodes_.end(), [&](const Node& n) { return &n == node; });
}

UseList& Graph::mutable_uses(Value value) {
  switch (value.kind()) {
    case ValueKind::kParameter:
      return value.parameter()->uses_;
    case ValueKind::kConstant:
      return value.constant()->uses_;
    case ValueKind::kNode:
      return value.node()->uses_.at(value.index());
    case ValueKind::kNone:
      break;
  }
  MF_FAIL(Internal, "a null value has no uses");
}

const UseList& Graph::uses(Value value) const {
  return const_cast<Graph*>(this)->mutable_uses(value);
}

void Graph::add_use(Value value, Use use) {
  mutable_uses(value).push_back(use);
}

void Graph::remove_use(Value value, Use use) {
  UseList& list = mutable_uses(value);
  auto it = std::find(list.begin(), list.end(), use);
  MF_CHECK(it != list.end(), Internal, "use list of a value lost operand ", use.operand);
  list.erase(it);
}

void Graph::set_input(Node* node, size_t operand, Value value) {
  MF_CHECK(node->graph_ == this, Internal, "node is not in graph @", name_);
  MF_CHECK(operand < node->inputs_.size(), InvalidArgument, "op '", node->op_, "' has ",
           node->inputs_.size(), " inputs; cannot set input ", operand);
  check_value(value, "input ", operand, " of op '", node->op_, "'");
  remove_use(node->inputs_[operand], Use{node, operand});
  node->inputs_[operand] = value;
  add_use(value, Use{node, operand});
}

void Graph::replace_all_uses(Value old, Value replacement, const Node* except) {
  check_value(old, "the replaced value");
  check_value(replacement, "the replacement value");
  if (old == replacement) return;
  MF_CHECK(old.type() == replacement.type(), InvalidArgument, "cannot replace a value of type ",
           type_to_string(old.type()), " by one of type ", type_to_string(replacement.type()));
  UseList kept;
  UseList& from = mutable_uses(old);
  UseList moved;
  for (const Use& use : from) {
    if (use.user != nullptr && use.user == except) {
      kept.push_back(use);
      continue;
    }
    if (use.user == nullptr) {
      outputs_[use.operand] = replacement;
    } else {
      use.user->inputs_[use.operand] = replacement;
    }
    moved.push_back(use);
  }
  from = std::move(kept);
  UseList& to = mutable_uses(replacement);
  to.insert(to.end(), moved.begin(), moved.end());
}

void Graph::erase_node(Node* node) {
  MF_CHECK(node->graph_ == this, Internal, "node is not in graph @", name_);
  MF_CHECK(!node->has_uses(), Internal, "cannot erase op '", node->op_, "' (node id ", node->id_,
           ") while its outputs are still used; replace its uses first");
  for (size_t i = 0; i < node->inputs_.size(); ++i) remove_use(node->inputs_[i], Use{node, i});
  nodes_.erase(node->position_);
}

void Graph::move_node(Node* node, Node* before) {
  MF_CHECK(node->graph_ == this && (before == nullptr || before->graph_ == this), Internal,
           "move_node across graphs");
  if (node == before) return;
  auto to = before == nullptr ? nodes_.end() : before->position_;
  nodes_.splice(to, nodes_, node->position_);  // splice keeps iterators, so position_ stays valid
}

void Graph::add_output(Value value, std::string name) {
  check_value(value, "graph output");
  MF_CHECK(name.empty() || is_valid_ir_name(name), InvalidArgument, "output name '", echo(name, 80),
           "' is not valid: use letters, digits, '_' and '.'");
  outputs_.push_back(value);
  output_names_.push_back(std::move(name));
  add_use(value, Use{nullptr, outputs_.size() - 1});
}

void Graph::set_output_name(size_t i, std::string name) {
  MF_CHECK(i < outputs_.size(), InvalidArgument, "graph @", name_, " has ", outputs_.size(),
           " outputs; cannot name output ", i);
  MF_CHECK(name.empty() || is_valid_ir_name(name), InvalidArgument, "output name '", echo(name, 80),
           "' is not valid: use letters, digits, '_' and '.'");
  output_names_[i] = std::move(name);
}

void Graph::set_output(size_t i, Value value) {
  MF_CHECK(i < outputs_.size(), InvalidArgument, "graph @", name_, " has ", outputs_.size(),
           " outputs; cannot set output ", i);
  check_value(value, "graph output");
  remove_use(outputs_[i], Use{nullptr, i});
  outputs_[i] = value;
  add_use(value, Use{nullptr, i});
}

void Graph::clear_outputs() {
  for (size_t i = 0; i < outputs_.size(); ++i) remove_use(outputs_[i], Use{nullptr, i});
  outputs_.clear();
  output_names_.clear();
}

std::vector<Node*> Graph::topological_order() const {
  // Kahn's algorithm, always taking the ready node that comes first in program order, so an already
  // sorted graph comes back unchanged and a repaired one moves as little as possible.
  std::unordered_map<const Node*, std::pair<size_t, size_t>> state;  // node -> (position, pending)
  state.reserve(nodes_.size());
  using Entry = std::pair<size_t, Node*>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  size_t position = 0;
  for (const Node& node : nodes_) {
    size_t pending = 0;
    for (const Value& v : node.inputs_) pending += v.node() != nullptr ? 1 : 0;
    state[&node] = {position, pending};
    if (pending == 0) ready.emplace(position, const_cast<Node*>(&node));
    ++position;
  }
  std::vector<Node*> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    Node* node = ready.top().second;
    ready.pop();
    order.push_back(node);
    for (const UseList& uses : node->uses_) {
      for (const Use& use : uses) {
        if (use.user == nullptr) continue;
        auto& [pos, pending] = state[use.user];
        if (--pending == 0) ready.emplace(pos, use.user);
      }
    }
  }
  if (order.size() != nodes_.size()) {
    for (const Node& node : nodes_) {
      MF_CHECK(state[&node].second == 0, Internal, "graph @", name_, " has a cycle through op '",
               node.op_, "' (node id ", node.id_, ")");
    }
  }
  return order;
}

void Graph::sort_nodes() {
  for (Node* node : topological_order()) move_node(node, nullptr);
}

Graph* Graph::add_subgraph_copy(std::string name, const Graph& source) {
  Graph* copy = add_subgraph(std::move(name));
  source.copy_into(*copy);
  return copy;
}

Graph* Graph::add_subgraph(std::string name) {
  MF_CHECK(find_subgraph(name) == nullptr, InvalidArgument, "graph @", name_,
           " already has a subgraph named @", name);
  subgraphs_.push_back(std::make_unique<Graph>(std::move(name), this));
  Graph* added = subgraphs_.back().get();
  subgraph_index_.emplace(added->name(), added);
  return added;
}

Graph* Graph::find_subgraph(std::string_view name) const {
  const auto it = subgraph_index_.find(name);
  return it == subgraph_index_.end() ? nullptr : it->second;
}

Graph* Graph::resolve_subgraph(std::string_view name) const {
  for (const Graph* g = this; g != nullptr; g = g->parent_) {
    if (Graph* found = g->find_subgraph(name)) return found;
  }
  return nullptr;
}

std::vector<Graph*> Graph::subgraphs() const {
  std::vector<Graph*> out;
  for (const auto& g : subgraphs_) out.push_back(g.get());
  return out;
}

size_t Graph::erase_unused_constants() {
  const size_t before = constants_.size();
  std::erase_if(constants_, [](const std::unique_ptr<Constant>& c) { return c->uses_.empty(); });
  for (size_t i = 0; i < constants_.size(); ++i) constants_[i]->index_ = i;
  return before - constants_.size();
}

void Graph::erase_subgraph(const Graph* subgraph) {
  auto it = std::find_if(subgraphs_.begin(), subgraphs_.end(),
                         [&](const std::unique_ptr<Graph>& g) { return g.get() == subgraph; });
  MF_CHECK(it != subgraphs_.end(), Internal, "graph @", name_, " has no such subgraph to erase");
  subgraph_index_.erase((*it)->name());
  subgraphs_.erase(it);
}

size_t Graph::erase_subgraphs_if(const std::function<bool(const Graph&)>& dead) {
  const size_t before = subgraphs_.size();
  std::erase_if(subgraphs_, [&](const std::unique_ptr<Graph>& g) {
    if (!dead(*g)) return false;
    subgraph_index_.erase(g->name());
    return true;
  });
  return before - subgraphs_.size();
}

bool writes_inputs(const Graph& graph) {
  for (const Node& node : graph.nodes()) {
    if (node.def() != nullptr && node.def()->has(Trait::kWritesInput)) return true;
  }
  for (const Graph* sub : graph.subgraphs()) {
    if (writes_inputs(*sub)) return true;
  }
  return false;
}

}  // namespace mf::ir
