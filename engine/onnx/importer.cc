#include "engine/onnx/importer.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "engine/onnx/tensor_proto.h"
#include "ir/verifier.h"
#include "onnx.pb.h"

namespace mf::onnx {
namespace {

using ir::DType;
using ir::Shape;
using ir::TensorType;
using ir::Value;
using namespace internal;

// Ops whose inputs are all constants are evaluated at import up to this many output elements;
// larger results stay nodes, so a hostile ConstantOfShape cannot exhaust memory while importing.
constexpr int64_t kMaxFoldElements = int64_t{1} << 24;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// The importer of one ModelProto into one graph; single use.
// Converts nodes in dependency order, one ONNX node to one or a few IR nodes.
class Importer {
 public:
  Importer(const ModelProto& model, std::string source, const ImportOptions& options)
      : model_(model), graph_proto_(model.graph()), source_(std::move(source)), options_(options) {}

  ImportedModel run();

 private:
  using Converter = void (Importer::*)();
  static const std::map<std::string, Converter, std::less<>>& converters();

  void read_opset();
  void collect_initializers();
  void add_graph_inputs();
  std::vector<int> node_order();
  void convert_node(const NodeProto& node);
  std::string unique_name(std::string_view onnx_name);

  // ---- the current node ----
  std::string describe() const;
  size_t num_inputs() const { return size_t(node_->input_size()); }
  bool has_input(size_t i) const { return i < num_inputs() && !node_->input(int(i)).empty(); }
  Value input(size_t i);
  std::optional<HostTensor> known(size_t i);
  HostTensor require_known(size_t i, std::string_view what);
  std::vector<int64_t> known_ints(size_t i, std::string_view what) {
    return require_known(i, what).ints();
  }
  bool output_used(size_t k) const {
    return k < size_t(node_->output_size()) && used_.count(node_->output(int(k))) > 0;
  }
  void require_unused_outputs_from(size_t k, std::string_view why);
  void set_output(size_t k, Value v);
  [[noreturn]] void unsupported(std::string_view what) const;

  const AttributeProto* find_attr(std::string_view name) const;
  void check_attr(const AttributeProto& a, AttributeProto::AttributeType want) const;
  int64_t attr_int(std::string_view name, int64_t fallback) const;
  double attr_float(std::string_view name, double fallback) const;
  std::string attr_string(std::string_view name, std::string fallback) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> fallback) const;
  bool has_attr(std::string_view name) const { return find_attr(name) != nullptr; }

  // ---- emitting IR ----
  std::vector<Value> emit_all(std::string_view op, std::vector<Value> inputs, ir::Attrs attrs = {});
  Value emit(std::string_view op, std::vector<Value> inputs, ir::Attrs attrs = {}) {
    return emit_all(op, std::move(inputs), std::move(attrs)).at(0);
  }
  Value constant(const HostTensor& h);
  Value scalar(double value, DType dtype);
  Value reshape(Value x, const Shape& shape) {
    if (x.type().shape == shape) return x;
    return emit("reshape", {x}, {{"shape", shape}});
  }
  const Shape& shape_of(Value v) const { return v.type().shape; }
  int64_t rank_of(Value v) const { return int64_t(v.type().shape.size()); }
  int64_t axis_attr(std::string_view name, int64_t fallback, int64_t rank);
  void require_float(Value v, std::string_view what) const;

  // ---- converters, one per ONNX op (or family) ----
  void convert_unary();
  void convert_binary();
  void convert_variadic();
  void convert_identity();
  void convert_dropout();
  void convert_clip();
  void convert_leaky_relu();
  void convert_prelu();
  void convert_elu();
  void convert_hard_sigmoid();
  void convert_hard_swish();
  void convert_softplus();
  void convert_reciprocal();
  void convert_matmul();
  void convert_gemm();
  void convert_conv();
  void convert_pool();
  void convert_global_pool();
  void convert_batch_norm();
  void convert_flatten();
  void convert_reshape();
  void convert_transpose();
  void convert_concat();
  void convert_split();
  void convert_slice();
  void convert_squeeze();
  void convert_unsqueeze();
  void convert_gather();
  void convert_shape();
  void convert_size();
  void convert_constant();
  void convert_constant_of_shape();
  void convert_expand();
  void convert_softmax();
  void convert_layer_norm();
  void convert_reduce();
  void convert_cast();
  void convert_where();

  Value matmul(Value a, Value b);
  // Window attributes of Conv and the pools for a 2-D op (1-D inputs are lifted to 2-D first).
  struct Window {
    std::vector<int64_t> kernel, stride, dilation, pads;  // pads: [t, b, l, r]
  };
  Window window(const Shape& x, const std::vector<int64_t>& kernel, bool ceil_mode);

  const ModelProto& model_;
  const GraphProto& graph_proto_;
  std::string source_;
  const ImportOptions& options_;
  int64_t opset_ = 0;
  std::unique_ptr<ir::Graph> graph_;
  ImportedModel result_;
  std::unordered_map<std::string, const TensorProto*> initializers_;
  std::unordered_map<std::string, Value> values_;
  std::unordered_set<std::string> used_;  // every value name a node or graph output reads
  std::set<std::string> taken_names_;     // IR parameter names handed out
  const NodeProto* node_ = nullptr;
  int node_index_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Model level

ImportedModel Importer::run() {
  MF_CHECK(model_.has_graph(), InvalidArgument, source_,
           " holds no graph: is it an ONNX model (ModelProto)?");
  read_opset();
  graph_ = std::make_unique<ir::Graph>(
      graph_proto_.name().empty() ? std::string("onnx") : sanitize_name(graph_proto_.name()));
  collect_initializers();
  for (const NodeProto& node : graph_proto_.node()) {
    for (const std::string& name : node.input()) used_.insert(name);
  }
  for (const ValueInfoProto& out : graph_proto_.output()) used_.insert(out.name());
  add_graph_inputs();
  const std::vector<int> order = node_order();
  for (int index : order) {
    node_index_ = index;
    convert_node(graph_proto_.node(index));
  }
  node_ = nullptr;
  MF_CHECK(graph_proto_.output_size() > 0, InvalidArgument, source_,
           ": the graph declares no outputs; nothing to compute");
  for (const ValueInfoProto& out : graph_proto_.output()) {
    auto it = values_.find(out.name());
    if (it == values_.end() && initializers_.count(out.name())) {
      const HostTensor h = decode_tensor(*initializers_.at(out.name()), "initializer");
      it = values_.emplace(out.name(), constant(h)).first;
    }
    MF_CHECK(it != values_.end(), InvalidArgument, source_, ": graph output '", out.name(),
             "' is not produced by any node, initializer or graph input");
    graph_->add_output(it->second);
    result_.onnx_outputs.push_back(out.name());
  }
  graph_->erase_unused_constants();
  ir::verify(*graph_);
  result_.graph = std::move(graph_);
  result_.opset = opset_;
  result_.producer = model_.producer_name();
  if (!model_.producer_version().empty()) result_.producer += " " + model_.producer_version();
  return std::move(result_);
}

void Importer::read_opset() {
  bool found = false;
  for (const OperatorSetIdProto& id : model_.opset_import()) {
    if (id.domain().empty() || id.domain() == "ai.onnx") {
      opset_ = id.version();
      found = true;
    }
  }
  MF_CHECK(found, InvalidArgument, source_,
           " imports no opset of the default ONNX domain; it is damaged or not an ONNX model");
  MF_CHECK(opset_ >= kMinOpset && opset_ <= kMaxOpset, Unsupported, source_, " uses opset ", opset_,
           " of the default domain, but the importer reads opsets ", kMinOpset, " to ", kMaxOpset,
           "; re-export with opset_version=", kMaxOpset,
           " or convert it with onnx.version_converter.convert_version(model, ", kMaxOpset, ")");
}

void Importer::collect_initializers() {
  for (const TensorProto& t : graph_proto_.initializer()) {
    MF_CHECK(!t.name().empty(), InvalidArgument, source_,
             ": an initializer has no name; the file is damaged");
    MF_CHECK(initializers_.emplace(t.name(), &t).second, InvalidArgument, source_,
             ": initializer '", t.name(), "' is defined twice");
  }
}

void Importer::add_graph_inputs() {
  for (const ValueInfoProto& in : graph_proto_.input()) {
    // Before IR version 4 initializers were listed as inputs too: they stay weights.
    if (initializers_.count(in.name())) continue;
    MF_CHECK(!in.name().empty(), InvalidArgument, source_, ": a graph input has no name");
    MF_CHECK(!values_.count(in.name()), InvalidArgument, source_, ": graph input '", in.name(),
             "' is declared twice");
    MF_CHECK(in.type().has_tensor_type(), Unsupported, source_, ": graph input '", in.name(),
             "' is not a tensor (sequences, maps and optionals are not supported)");
    const TypeProto::Tensor& tt = in.type().tensor_type();
    const std::optional<DType> dtype = to_dtype(tt.elem_type());
    MF_CHECK(dtype.has_value(), Unsupported, source_, ": graph input '", in.name(),
             "' has element type ", onnx_type_name(tt.elem_type()), "; ", kSupportedTypes);
    MF_CHECK(tt.has_shape(), Unsupported, source_, ": graph input '", in.name(),
             "' has no shape; the importer needs static shapes: export with a fixed input shape");
    Shape shape;
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const TensorShapeProto::Dimension& dim = tt.shape().dim(d);
      MF_CHECK(!dim.has_dim_param(), Unsupported, source_, ": graph input '", in.name(),
               "' has a dynamic dimension '", dim.dim_param(), "' (axis ", d,
               "); the importer needs static shapes: export without dynamic_axes, or fix the "
               "dimension (e.g. onnxruntime.tools.make_dynamic_shape_fixed)");
      MF_CHECK(dim.has_dim_value(), Unsupported, source_, ": graph input '", in.name(),
               "' has an unknown dimension at axis ", d,
               "; the importer needs static shapes: export with a fixed input shape");
      MF_CHECK(dim.dim_value() >= 0 && dim.dim_value() <= kMaxElements, InvalidArgument, source_,
               ": graph input '", in.name(), "' has dimension ", dim.dim_value(), " at axis ", d);
      shape.push_back(dim.dim_value());
    }
    int64_t n = 1;
    for (int64_t d : shape) {
      MF_CHECK(d == 0 || n <= kMaxElements / d, InvalidArgument, source_, ": graph input '",
               in.name(), "' is too large: ", ir::shape_to_string(shape));
      n *= d;
    }
    if (auto frozen = options_.frozen_inputs.find(in.name());
        frozen != options_.frozen_inputs.end()) {
      const Tensor& t = frozen->second;
      MF_CHECK(t.type() == TensorType({*dtype, shape}), InvalidArgument, source_,
               ": the value frozen for graph input '", in.name(), "' is ",
               ir::type_to_string(t.type()), " but the input is declared ",
               ir::type_to_string({*dtype, shape}));
      t.sync();
      const auto* bytes = static_cast<const uint8_t*>(t.raw_data());
      values_[in.name()] = graph_->add_constant(t.type(), {bytes, bytes + t.nbytes()});
      continue;
    }
    const std::string name = unique_name(in.name());
    values_[in.name()] = graph_->add_parameter(name, {*dtype, shape});
    result_.inputs.push_back(name);
    result_.onnx_inputs.push_back(in.name());
  }
}

// Kahn's order over the value names; ONNX promises a sorted node list, a hostile file does not.
std::vector<int> Importer::node_order() {
  const int n = graph_proto_.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const std::string& out : graph_proto_.node(i).output()) {
      if (out.empty()) continue;
      MF_CHECK(!values_.count(out) && !initializers_.count(out), InvalidArgument, source_,
               ": node ", quoted_name(graph_proto_.node(i).name()), " (",
               graph_proto_.node(i).op_type(), ") writes '", out,
               "', which is already a graph input or initializer");
      MF_CHECK(producer.emplace(out, i).second, InvalidArgument, source_, ": value '", out,
               "' is produced by two nodes (", quoted_name(graph_proto_.node(producer[out]).name()),
               " and ", quoted_name(graph_proto_.node(i).name()), ")");
    }
  }
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i) {
    const NodeProto& node = graph_proto_.node(i);
    for (const std::string& in : node.input()) {
      if (in.empty() || values_.count(in) || initializers_.count(in)) continue;
      auto it = producer.find(in);
      MF_CHECK(it != producer.end(), InvalidArgument, source_, ": node ", quoted_name(node.name()),
               " (", node.op_type(), ") reads '", in,
               "', which no node, initializer or graph input defines");
      users[it->second].push_back(i);
      ++pending[i];
    }
  }
  std::vector<int> order;
  std::vector<int> ready;
  for (int i = n - 1; i >= 0; --i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (auto it = users[i].rbegin(); it != users[i].rend(); ++it) {
      if (--pending[*it] == 0) ready.push_back(*it);
    }
  }
  if (int(order.size()) != n) {
    for (int i = 0; i < n; ++i) {
      MF_CHECK(pending[i] == 0, InvalidArgument, source_, ": the graph has a cycle through node ",
               quoted_name(graph_proto_.node(i).name()), " (", graph_proto_.node(i).op_type(),
               "); an ONNX graph must be acyclic");
    }
  }
  return order;
}

std::string Importer::unique_name(std::string_view onnx_name) {
  const std::string base = sanitize_name(onnx_name);
  std::string name = base;
  for (int k = 1; taken_names_.count(name); ++k) name = base + "_" + std::to_string(k);
  taken_names_.insert(name);
  return name;
}

const std::map<std::string, Importer::Converter, std::less<>>& Importer::converters() {
  static const std::map<std::string, Converter, std::less<>> table = {
      {"Abs", &Importer::convert_unary},
      {"Add", &Importer::convert_binary},
      {"AveragePool", &Importer::convert_pool},
      {"BatchNormalization", &Importer::convert_batch_norm},
      {"Cast", &Importer::convert_cast},
      {"Clip", &Importer::convert_clip},
      {"Concat", &Importer::convert_concat},
      {"Constant", &Importer::convert_constant},
      {"ConstantOfShape", &Importer::convert_constant_of_shape},
      {"Conv", &Importer::convert_conv},
      {"Div", &Importer::convert_binary},
      {"Dropout", &Importer::convert_dropout},
      {"Elu", &Importer::convert_elu},
      {"Equal", &Importer::convert_binary},
      {"Erf", &Importer::convert_unary},
      {"Exp", &Importer::convert_unary},
      {"Expand", &Importer::convert_expand},
      {"Flatten", &Importer::convert_flatten},
      {"Gather", &Importer::convert_gather},
      {"Gemm", &Importer::convert_gemm},
      {"GlobalAveragePool", &Importer::convert_global_pool},
      {"GlobalMaxPool", &Importer::convert_global_pool},
      {"Greater", &Importer::convert_binary},
      {"HardSigmoid", &Importer::convert_hard_sigmoid},
      {"HardSwish", &Importer::convert_hard_swish},
      {"Identity", &Importer::convert_identity},
      {"LayerNormalization", &Importer::convert_layer_norm},
      {"LeakyRelu", &Importer::convert_leaky_relu},
      {"Less", &Importer::convert_binary},
      {"Log", &Importer::convert_unary},
      {"LogSoftmax", &Importer::convert_softmax},
      {"MatMul", &Importer::convert_matmul},
      {"Max", &Importer::convert_variadic},
      {"MaxPool", &Importer::convert_pool},
      {"Mean", &Importer::convert_variadic},
      {"Min", &Importer::convert_variadic},
      {"Mul", &Importer::convert_binary},
      {"Neg", &Importer::convert_unary},
      {"Pow", &Importer::convert_binary},
      {"PRelu", &Importer::convert_prelu},
      {"Reciprocal", &Importer::convert_reciprocal},
      {"ReduceL1", &Importer::convert_reduce},
      {"ReduceL2", &Importer::convert_reduce},
      {"ReduceLogSum", &Importer::convert_reduce},
      {"ReduceLogSumExp", &Importer::convert_reduce},
      {"ReduceMax", &Importer::convert_reduce},
      {"ReduceMean", &Importer::convert_reduce},
      {"ReduceMin", &Importer::convert_reduce},
      {"ReduceSum", &Importer::convert_reduce},
      {"ReduceSumSquare", &Importer::convert_reduce},
      {"Relu", &Importer::convert_unary},
      {"Reshape", &Importer::convert_reshape},
      {"Shape", &Importer::convert_shape},
      {"Sigmoid", &Importer::convert_unary},
      {"Size", &Importer::convert_size},
      {"Slice", &Importer::convert_slice},
      {"Softmax", &Importer::convert_softmax},
      {"Softplus", &Importer::convert_softplus},
      {"Split", &Importer::convert_split},
      {"Sqrt", &Importer::convert_unary},
      {"Squeeze", &Importer::convert_squeeze},
      {"Sub", &Importer::convert_binary},
      {"Sum", &Importer::convert_variadic},
      {"Tanh", &Importer::convert_unary},
      {"Transpose", &Importer::convert_transpose},
      {"Unsqueeze", &Importer::convert_unsqueeze},
      {"Where", &Importer::convert_where},
  };
  return table;
}

void Importer::convert_node(const NodeProto& node) {
  node_ = &node;
  const std::string& domain = node.domain();
  if (!domain.empty() && domain != "ai.onnx") {
    MF_FAIL(Unsupported, "ONNX op '", node.op_type(), "' of domain '", domain, "' (node ",
            quoted_name(node.name()), " of ", source_,
            ") is not supported: the importer reads only the default domain (ai.onnx); export "
            "without custom or vendor ops (e.g. without onnxruntime's transformer optimizer)");
  }
  const auto& table = converters();
  auto it = table.find(node.op_type());
  if (it == table.end()) {
    std::string names;
    for (const auto& [name, fn] : table) names += (names.empty() ? "" : ", ") + name;
    MF_FAIL(Unsupported, "ONNX op '", node.op_type(), "' (domain ai.onnx, opset ", opset_,
            ") of node ", quoted_name(node.name()), " in ", source_,
            " is not supported by the importer. Supported ops: ", names,
            ". Rewrite the model with supported ops before export, or file an issue asking for ",
            node.op_type());
  }
  try {
    (this->*(it->second))();
  } catch (Error& e) {
    e.add_context("while importing " + describe());
    throw;
  } catch (const std::exception& e) {
    MF_FAIL(InvalidArgument, "cannot import ", describe(), ": ", e.what());
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers for the current node

std::string Importer::describe() const {
  std::string name = node_->name().empty() ? "#" + std::to_string(node_index_) : node_->name();
  return "ONNX node '" + name + "' (" + node_->op_type() + ", opset " + std::to_string(opset_) +
         ") of " + source_;
}

void Importer::unsupported(std::string_view what) const {
  MF_FAIL(Unsupported, describe(), ": ", what);
}

Value Importer::input(size_t i) {
  MF_CHECK(has_input(i), InvalidArgument, describe(), " needs input ", i,
           ", which is missing; the node is malformed");
  const std::string& name = node_->input(int(i));
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  auto init = initializers_.find(name);
  MF_CHECK(init != initializers_.end(), InvalidArgument, describe(), " reads undefined value '",
           name, "'");
  // An initializer becomes a weight parameter on its first use as data; one read only for its
  // value (a Reshape's shape, Slice's starts) never appears in the graph.
  HostTensor h = decode_tensor(*init->second, "initializer");
  const std::string ir_name = unique_name(name);
  Value v = graph_->add_parameter(ir_name, h.type, /*is_weight=*/true);
  result_.weights.emplace(ir_name, to_tensor(h));
  values_.emplace(name, v);
  return v;
}

std::optional<HostTensor> Importer::known(size_t i) {
  if (!has_input(i)) return std::nullopt;
  const std::string& name = node_->input(int(i));
  auto it = values_.find(name);
  if (it != values_.end()) {
    if (const ir::Constant* c = it->second.constant()) return HostTensor{c->type(), c->bytes()};
    return std::nullopt;
  }
  auto init = initializers_.find(name);
  if (init == initializers_.end()) return std::nullopt;
  return decode_tensor(*init->second, "initializer");
}

HostTensor Importer::require_known(size_t i, std::string_view what) {
  std::optional<HostTensor> h = known(i);
  if (!h) {
    MF_CHECK(has_input(i), InvalidArgument, describe(), " needs its input ", i, " (", what,
             "), which is missing");
    unsupported("input " + std::to_string(i) + " (" + std::string(what) + ", '" +
                node_->input(int(i)) +
                "') must be known when importing (an initializer, a Constant, or computed from "
                "them and static shapes); data-dependent shapes are not supported: export with "
                "static shapes and constant folding on (torch.onnx.export(..., "
                "do_constant_folding=True))");
  }
  return *h;
}

void Importer::require_unused_outputs_from(size_t k, std::string_view why) {
  for (size_t j = k; j < size_t(node_->output_size()); ++j) {
    if (output_used(j)) {
      unsupported("output " + std::to_string(j) + " ('" + node_->output(int(j)) +
                  "') is used, but " + std::string(why));
    }
  }
}

void Importer::set_output(size_t k, Value v) {
  if (k >= size_t(node_->output_size()) || node_->output(int(k)).empty()) return;
  values_[node_->output(int(k))] = v;
}

const AttributeProto* Importer::find_attr(std::string_view name) const {
  for (const AttributeProto& a : node_->attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

void Importer::check_attr(const AttributeProto& a, AttributeProto::AttributeType want) const {
  MF_CHECK(a.type() == want || a.type() == AttributeProto::UNDEFINED, InvalidArgument, describe(),
           ": attribute '", a.name(), "' is ", AttributeProto::AttributeType_Name(a.type()),
           ", expected ", AttributeProto::AttributeType_Name(want));
}

int64_t Importer::attr_int(std::string_view name, int64_t fallback) const {
  const AttributeProto* a = find_attr(name);
  if (!a) return fallback;
  check_attr(*a, AttributeProto::INT);
  return a->i();
}

double Importer::attr_float(std::string_view name, double fallback) const {
  const AttributeProto* a = find_attr(name);
  if (!a) return fallback;
  check_attr(*a, AttributeProto::FLOAT);
  return a->f();
}

std::string Importer::attr_string(std::string_view name, std::string fallback) const {
  const AttributeProto* a = find_attr(name);
  if (!a) return fallback;
  check_attr(*a, AttributeProto::STRING);
  return a->s();
}

std::vector<int64_t> Importer::attr_ints(std::string_view name,
                                         std::vector<int64_t> fallback) const {
  const AttributeProto* a = find_attr(name);
  if (!a) return fallback;
  check_attr(*a, AttributeProto::INTS);
  return {a->ints().begin(), a->ints().end()};
}

int64_t Importer::axis_attr(std::string_view name, int64_t fallback, int64_t rank) {
  int64_t axis = attr_int(name, fallback);
  if (axis < 0) axis += rank;
  MF_CHECK(axis >= 0 && axis < rank, InvalidArgument, describe(), ": attribute '", name,
           "' = ", attr_int(name, fallback), " is out of range for rank ", rank);
  return axis;
}

void Importer::require_float(Value v, std::string_view what) const {
  if (!ir::is_floating(v.type().dtype)) {
    unsupported(std::string(what) + " has element type " +
                std::string(ir::dtype_name(v.type().dtype)) +
                "; the importer supports this op on FLOAT and DOUBLE only");
  }
}

std::vector<Value> Importer::emit_all(std::string_view op, std::vector<Value> inputs,
                                      ir::Attrs attrs) {
  std::string name = node_->name().empty() ? node_->op_type() : node_->name();
  std::replace(name.begin(), name.end(), '\n', ' ');
  ir::NodeInfo info{"onnx/" + name, source_ + ": node " + name};
  ir::Node* node = graph_->add_node(op, std::move(inputs), std::move(attrs), std::move(info));
  std::vector<Value> outs;
  for (size_t k = 0; k < node->num_outputs(); ++k) outs.push_back(node->output(k));
  // Fold what depends on constants alone, so shape arithmetic of exporters (Shape -> Gather ->
  // Concat -> Reshape) ends as attributes of the ops that consume it.
  bool foldable = node->def() && node->def()->has(ir::Trait::kPure) && node->def()->kernel;
  int64_t elements = 0;
  for (const Value& v : node->inputs()) foldable = foldable && v.constant() != nullptr;
  for (const TensorType& t : node->output_types()) elements += ir::num_elements(t.shape);
  if (!foldable || elements > kMaxFoldElements) return outs;
  std::vector<ir::TensorView> in_views;
  for (const Value& v : node->inputs()) {
    in_views.push_back({const_cast<uint8_t*>(v.constant()->bytes().data()), v.type()});
  }
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<ir::TensorView> out_views;
  for (const TensorType& t : node->output_types()) {
    buffers.emplace_back(size_t(ir::num_elements(t.shape)) * ir::dtype_size(t.dtype));
  }
  for (size_t k = 0; k < buffers.size(); ++k) {
    out_views.push_back({buffers[k].data(), node->output_type(k)});
  }
  ir::KernelContext ctx{in_views, out_views, node->attrs(), node->op(), /*deterministic=*/true};
  node->def()->kernel(ctx);  // an error here (gather out of range) is the model's: report it
  for (size_t k = 0; k < buffers.size(); ++k) {
    outs[k] = graph_->add_constant(node->output_type(k), std::move(buffers[k]));
  }
  graph_->erase_node(node);
  return outs;
}

Value Importer::constant(const HostTensor& h) {
  return graph_->add_constant(h.type, h.bytes);
}

Value Importer::scalar(double value, DType dtype) {
  return ir::visit_dtype(dtype, [&](auto tag) -> Value {
    using T = decltype(tag);
    return graph_->add_constant<T>({}, std::vector<T>{static_cast<T>(value)});
  });
}

// ---------------------------------------------------------------------------------------------
// Elementwise

void Importer::convert_unary() {
  static const std::map<std::string, std::string, std::less<>> ops = {
      {"Abs", "abs"},   {"Erf", "erf"},         {"Exp", "exp"},   {"Log", "log"},   {"Neg", "neg"},
      {"Relu", "relu"}, {"Sigmoid", "sigmoid"}, {"Sqrt", "sqrt"}, {"Tanh", "tanh"},
  };
  set_output(0, emit(ops.at(node_->op_type()), {input(0)}));
}

void Importer::convert_binary() {
  static const std::map<std::string, std::string, std::less<>> ops = {
      {"Add", "add"}, {"Sub", "sub"},     {"Mul", "mul"},   {"Div", "div"},
      {"Pow", "pow"}, {"Equal", "equal"}, {"Less", "less"}, {"Greater", "greater"},
  };
  Value a = input(0), b = input(1);
  // Pow alone lets the exponent's type differ from the base's; the IR wants one dtype.
  if (node_->op_type() == "Pow" && b.type().dtype != a.type().dtype) {
    b = emit("cast", {b}, {{"dtype", a.type().dtype}});
  }
  set_output(0, emit(ops.at(node_->op_type()), {a, b}));
}

void Importer::convert_variadic() {
  const std::string& op = node_->op_type();
  const std::string ir_op = op == "Max" ? "maximum" : op == "Min" ? "minimum" : "add";
  Value acc = input(0);
  for (size_t i = 1; i < num_inputs(); ++i) acc = emit(ir_op, {acc, input(i)});
  if (op == "Mean" && num_inputs() > 1) {
    acc = emit("div", {acc, scalar(double(num_inputs()), acc.type().dtype)});
  }
  set_output(0, acc);
}

void Importer::convert_identity() {
  set_output(0, input(0));
}

void Importer::convert_dropout() {
  if (std::optional<HostTensor> training = known(2); training && training->size() == 1) {
    if (training->at(0) != 0) unsupported("training_mode is true; export the model in eval mode");
  } else if (has_input(2)) {
    unsupported("training_mode is not a constant; export the model in eval mode");
  }
  Value x = input(0);
  set_output(0, x);
  if (output_used(1)) {
    // In inference the mask keeps everything.
    set_output(1, emit("broadcast_to", {scalar(1, DType::kBool)}, {{"shape", shape_of(x)}}));
  }
}

void Importer::convert_clip() {
  Value x = input(0);
  if (has_input(1)) x = emit("maximum", {x, input(1)});
  if (has_input(2)) x = emit("minimum", {x, input(2)});
  set_output(0, x);
}

void Importer::convert_leaky_relu() {
  Value x = input(0);
  const DType t = x.type().dtype;
  const Value negative = emit("less", {x, scalar(0, t)});
  const Value scaled = emit("mul", {x, scalar(attr_float("alpha", 0.01), t)});
  set_output(0, emit("select", {negative, scaled, x}));
}

void Importer::convert_prelu() {
  Value x = input(0), slope = input(1);
  const Value negative = emit("less", {x, scalar(0, x.type().dtype)});
  Value scaled = emit("mul", {x, slope});
  if (shape_of(scaled) != shape_of(x)) unsupported("slope does not broadcast to x's shape");
  set_output(0, emit("select", {negative, scaled, x}));
}

void Importer::convert_elu() {
  Value x = input(0);
  require_float(x, "x");
  const DType t = x.type().dtype;
  const Value negative = emit("less", {x, scalar(0, t)});
  const Value em1 = emit("sub", {emit("exp", {x}), scalar(1, t)});
  const Value scaled = emit("mul", {em1, scalar(attr_float("alpha", 1.0), t)});
  set_output(0, emit("select", {negative, scaled, x}));
}

void Importer::convert_hard_sigmoid() {
  Value x = input(0);
  const DType t = x.type().dtype;
  Value y = emit("add", {emit("mul", {x, scalar(attr_float("alpha", 0.2), t)}),
                         scalar(attr_float("beta", 0.5), t)});
  y = emit("minimum", {emit("maximum", {y, scalar(0, t)}), scalar(1, t)});
  set_output(0, y);
}

void Importer::convert_hard_swish() {
  Value x = input(0);
  const DType t = x.type().dtype;
  Value y = emit("add", {emit("mul", {x, scalar(1.0 / 6.0, t)}), scalar(0.5, t)});
  y = emit("minimum", {emit("maximum", {y, scalar(0, t)}), scalar(1, t)});
  set_output(0, emit("mul", {x, y}));
}

void Importer::convert_softplus() {
  Value x = input(0);
  require_float(x, "x");
  set_output(0, emit("log", {emit("add", {emit("exp", {x}), scalar(1, x.type().dtype)})}));
}

void Importer::convert_reciprocal() {
  Value x = input(0);
  set_output(0, emit("div", {scalar(1, x.type().dtype), x}));
}

void Importer::convert_where() {
  set_output(0, emit("select", {input(0), input(1), input(2)}));
}

// ---------------------------------------------------------------------------------------------
// Linear algebra

// numpy.matmul: 1-D operands are promoted and the added axis dropped again; stacks broadcast.
Value Importer::matmul(Value a, Value b) {
  const Shape sa = shape_of(a), sb = shape_of(b);
  MF_CHECK(!sa.empty() && !sb.empty(), InvalidArgument, describe(),
           ": MatMul operands must have rank >= 1, got ", ir::shape_to_string(sa), " and ",
           ir::shape_to_string(sb));
  if (sa.size() == 1 || sb.size() == 1) {
    const Value a2 = sa.size() == 1 ? reshape(a, {1, sa[0]}) : a;
    const Value b2 = sb.size() == 1 ? reshape(b, {sb[0], 1}) : b;
    const Value y = matmul(a2, b2);
    Shape out = shape_of(y);
    if (sb.size() == 1) out.pop_back();
    if (sa.size() == 1) out.erase(out.end() - (sb.size() == 1 ? 1 : 2));
    return reshape(y, out);
  }
  if (sa.size() == 2 && sb.size() == 2) return emit("matmul", {a, b});
  if (sb.size() == 2) {
    // A stack times one matrix is one large matrix product.
    const Value y = emit("matmul", {reshape(a, {-1, sa.back()}), b});
    Shape out(sa.begin(), sa.end() - 1);
    out.push_back(sb[1]);
    return reshape(y, out);
  }
  return emit("batch_matmul", {a, b});
}

void Importer::convert_matmul() {
  set_output(0, matmul(input(0), input(1)));
}

void Importer::convert_gemm() {
  Value a = input(0), b = input(1);
  MF_CHECK(rank_of(a) == 2 && rank_of(b) == 2, InvalidArgument, describe(),
           ": Gemm takes matrices, got ", ir::shape_to_string(shape_of(a)), " and ",
           ir::shape_to_string(shape_of(b)));
  const DType t = a.type().dtype;
  Value y = emit(
      "matmul", {a, b},
      {{"transpose_a", attr_int("transA", 0) != 0}, {"transpose_b", attr_int("transB", 0) != 0}});
  const double alpha = attr_float("alpha", 1.0), beta = attr_float("beta", 1.0);
  if (alpha != 1.0) y = emit("mul", {y, scalar(alpha, t)});
  if (has_input(2) && beta != 0.0) {
    Value c = input(2);
    if (beta != 1.0) c = emit("mul", {c, scalar(beta, t)});
    if (rank_of(c) == 1 && shape_of(c)[0] == shape_of(y)[1] && shape_of(y)[1] != 1) {
      y = emit("bias_add", {y, c});
    } else {
      y = emit("add", {y, c});
    }
  }
  set_output(0, y);
}

// ---------------------------------------------------------------------------------------------
// Convolution and pooling

Importer::Window Importer::window(const Shape& x, const std::vector<int64_t>& kernel,
                                  bool ceil_mode) {
  const size_t n = kernel.size();
  Window w;
  w.kernel = kernel;
  w.stride = attr_ints("strides", std::vector<int64_t>(n, 1));
  w.dilation = attr_ints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  MF_CHECK(w.stride.size() == n && w.dilation.size() == n && pads.size() == 2 * n, InvalidArgument,
           describe(), ": strides ", w.stride.size(), ", dilations ", w.dilation.size(),
           " and pads ", pads.size(), " values do not fit a ", n, "-D kernel");
  for (size_t d = 0; d < n; ++d) {
    MF_CHECK(kernel[d] >= 1 && w.stride[d] >= 1 && w.dilation[d] >= 1, InvalidArgument, describe(),
             ": kernel, strides and dilations must be >= 1");
  }
  const std::string auto_pad = attr_string("auto_pad", "NOTSET");
  for (size_t d = 0; d < n; ++d) {
    const int64_t in = x[2 + d], span = (kernel[d] - 1) * w.dilation[d] + 1;
    int64_t& begin = pads[d];
    int64_t& end = pads[n + d];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + w.stride[d] - 1) / w.stride[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.stride[d] + span - in);
      begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else if (auto_pad == "VALID") {
      begin = end = 0;
    } else {
      MF_CHECK(auto_pad == "NOTSET", InvalidArgument, describe(), ": auto_pad '", auto_pad,
               "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    MF_CHECK(begin >= 0 && end >= 0, InvalidArgument, describe(), ": pads must be >= 0");
    if (ceil_mode) {
      // The last window may hang over the end: pad the end so the floor rule gives the ceiling.
      const int64_t padded = in + begin + end;
      int64_t out = (padded - span + w.stride[d] - 1) / w.stride[d] + 1;
      if ((out - 1) * w.stride[d] >= in + begin) --out;  // a window must start inside
      end += std::max<int64_t>(0, (out - 1) * w.stride[d] + span - padded);
    }
  }
  if (n == 1) {
    // Lifted to 2-D as (N, C, 1, L).
    w.kernel = {1, kernel[0]};
    w.stride = {1, w.stride[0]};
    w.dilation = {1, w.dilation[0]};
    w.pads = {0, 0, pads[0], pads[1]};
  } else {
    w.pads = {pads[0], pads[2], pads[1], pads[3]};
  }
  return w;
}

// A 1-D input (N, C, L) is lifted to (N, C, 1, L) and the result lowered again.
void Importer::convert_conv() {
  Value x = input(0), w = input(1);
  require_float(x, "x");
  const int64_t rank = rank_of(x);
  if (rank != 3 && rank != 4) {
    unsupported("only 1-D and 2-D convolutions (inputs of rank 3 or 4) are supported, got x " +
                ir::shape_to_string(shape_of(x)));
  }
  MF_CHECK(rank_of(w) == rank, InvalidArgument, describe(), ": weight ",
           ir::shape_to_string(shape_of(w)), " must have the rank of x ",
           ir::shape_to_string(shape_of(x)));
  const Shape ws = shape_of(w);
  const std::vector<int64_t> kernel =
      attr_ints("kernel_shape", std::vector<int64_t>(ws.begin() + 2, ws.end()));
  MF_CHECK(kernel == std::vector<int64_t>(ws.begin() + 2, ws.end()), InvalidArgument, describe(),
           ": kernel_shape ", ir::shape_to_string(kernel), " disagrees with the weight ",
           ir::shape_to_string(ws));
  const Window win = window(shape_of(x), kernel, false);
  if (rank == 3) {
    const Shape xs = shape_of(x);
    x = reshape(x, {xs[0], xs[1], 1, xs[2]});
    w = reshape(w, {ws[0], ws[1], 1, ws[2]});
  }
  std::vector<Value> inputs = {x, w};
  if (has_input(2)) inputs.push_back(input(2));
  Value y = emit("conv2d", inputs,
                 {{"stride", win.stride},
                  {"padding", win.pads},
                  {"dilation", win.dilation},
                  {"groups", attr_int("group", 1)}});
  if (rank == 3) {
    const Shape ys = shape_of(y);
    y = reshape(y, {ys[0], ys[1], ys[3]});
  }
  set_output(0, y);
}

void Importer::convert_pool() {
  const bool is_max = node_->op_type() == "MaxPool";
  Value x = input(0);
  require_float(x, "x");
  const int64_t rank = rank_of(x);
  if (rank != 3 && rank != 4) {
    unsupported("only 1-D and 2-D pooling (inputs of rank 3 or 4) is supported, got x " +
                ir::shape_to_string(shape_of(x)));
  }
  if (is_max) require_unused_outputs_from(1, "MaxPool's Indices output is not supported");
  const AttributeProto* k = find_attr("kernel_shape");
  MF_CHECK(k != nullptr, InvalidArgument, describe(), " has no kernel_shape attribute");
  const std::vector<int64_t> kernel = attr_ints("kernel_shape", {});
  MF_CHECK(int64_t(kernel.size()) == rank - 2, InvalidArgument, describe(), ": kernel_shape ",
           ir::shape_to_string(kernel), " does not fit x ", ir::shape_to_string(shape_of(x)));
  const bool ceil_mode = attr_int("ceil_mode", 0) != 0;
  const bool include_pad = attr_int("count_include_pad", 0) != 0;
  Window win = window(shape_of(x), kernel, false);
  if (win.dilation != std::vector<int64_t>{1, 1}) unsupported("dilated pooling is not supported");
  if (ceil_mode) {
    const Window ceiled = window(shape_of(x), kernel, true);
    if (!is_max && include_pad && ceiled.pads != win.pads) {
      unsupported(
          "ceil_mode=1 with count_include_pad=1 where the last window hangs over the "
          "end is not supported; export with ceil_mode=0 or count_include_pad=0");
    }
    win = ceiled;
  }
  if (rank == 3) {
    const Shape xs = shape_of(x);
    x = reshape(x, {xs[0], xs[1], 1, xs[2]});
  }
  ir::Attrs attrs = {{"kernel", win.kernel}, {"stride", win.stride}, {"padding", win.pads}};
  if (!is_max) attrs["count_include_pad"] = include_pad;
  Value y = emit(is_max ? "max_pool2d" : "avg_pool2d", {x}, attrs);
  if (rank == 3) {
    const Shape ys = shape_of(y);
    y = reshape(y, {ys[0], ys[1], ys[3]});
  }
  set_output(0, y);
}

void Importer::convert_global_pool() {
  Value x = input(0);
  require_float(x, "x");
  MF_CHECK(rank_of(x) >= 3, InvalidArgument, describe(), ": x must be (N, C, spatial...), got ",
           ir::shape_to_string(shape_of(x)));
  if (node_->op_type() == "GlobalAveragePool") {
    set_output(0, emit("global_avg_pool", {x}));
    return;
  }
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < rank_of(x); ++d) axes.push_back(d);
  set_output(0, emit("reduce_max", {x}, {{"axes", axes}, {"keep_dims", true}}));
}

void Importer::convert_batch_norm() {
  if (attr_int("training_mode", 0) != 0) {
    unsupported("training_mode=1 is not supported; export the model in eval mode");
  }
  require_unused_outputs_from(1, "the running statistics outputs exist only in training mode");
  Value x = input(0);
  require_float(x, "x");
  set_output(0, emit("batch_norm", {x, input(1), input(2), input(3), input(4)},
                     {{"epsilon", attr_float("epsilon", 1e-5)}}));
}

// ---------------------------------------------------------------------------------------------
// Shapes

void Importer::convert_flatten() {
  Value x = input(0);
  const Shape& s = shape_of(x);
  int64_t axis = attr_int("axis", 1);  // in [-rank, rank]
  if (axis < 0) axis += rank_of(x);
  MF_CHECK(axis >= 0 && axis <= rank_of(x), InvalidArgument, describe(), ": axis ",
           attr_int("axis", 1), " is out of range for rank ", rank_of(x));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank_of(x); ++d) (d < axis ? outer : inner) *= s[d];
  set_output(0, reshape(x, {outer, inner}));
}

void Importer::convert_reshape() {
  Value x = input(0);
  std::vector<int64_t> shape = known_ints(1, "shape");
  const bool allow_zero = attr_int("allowzero", 0) != 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 && !allow_zero) {
      MF_CHECK(d < shape_of(x).size(), InvalidArgument, describe(), ": shape ",
               ir::shape_to_string(shape), " copies axis ", d, " (0), which x ",
               ir::shape_to_string(shape_of(x)), " does not have");
      shape[d] = shape_of(x)[d];
    }
  }
  if (shape == shape_of(x)) {
    set_output(0, x);
    return;
  }
  set_output(0, emit("reshape", {x}, {{"shape", shape}}));
}

void Importer::convert_transpose() {
  Value x = input(0);
  std::vector<int64_t> perm(rank_of(x));
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = attr_ints("perm", perm);
  set_output(0, emit("transpose", {x}, {{"perm", perm}}));
}

void Importer::convert_concat() {
  MF_CHECK(has_attr("axis"), InvalidArgument, describe(), " has no axis attribute");
  std::vector<Value> xs;
  for (size_t i = 0; i < num_inputs(); ++i) xs.push_back(input(i));
  set_output(0, emit("concat", xs, {{"axis", attr_int("axis", 0)}}));
}

void Importer::convert_split() {
  Value x = input(0);
  const size_t parts = size_t(node_->output_size());
  MF_CHECK(parts >= 1, InvalidArgument, describe(), " has no outputs");
  std::vector<int64_t> sizes;
  if (opset_ >= 13) {
    if (has_input(1)) sizes = known_ints(1, "split");
  } else {
    sizes = attr_ints("split", {});
  }
  ir::Attrs attrs = {{"axis", attr_int("axis", 0)}};
  if (sizes.empty()) {
    attrs["num"] = int64_t(parts);
  } else {
    MF_CHECK(sizes.size() == parts, InvalidArgument, describe(), ": split ",
             ir::shape_to_string(sizes), " lists ", sizes.size(), " sizes for ", parts, " outputs");
    attrs["sections"] = sizes;
  }
  const std::vector<Value> outs = emit_all("split", {x}, attrs);
  for (size_t k = 0; k < outs.size(); ++k) set_output(k, outs[k]);
}

void Importer::convert_slice() {
  Value x = input(0);
  const int64_t rank = rank_of(x);
  const std::vector<int64_t> starts = known_ints(1, "starts");
  const std::vector<int64_t> ends = known_ints(2, "ends");
  std::vector<int64_t> axes(starts.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (has_input(3)) axes = known_ints(3, "axes");
  std::vector<int64_t> steps(starts.size(), 1);
  if (has_input(4)) steps = known_ints(4, "steps");
  MF_CHECK(
      ends.size() == starts.size() && axes.size() == starts.size() && steps.size() == starts.size(),
      InvalidArgument, describe(), ": starts, ends, axes and steps must have one length");
  std::vector<int64_t> begin(rank, 0), end(rank, kInt64Max), stride(rank, 1);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    MF_CHECK(axis >= 0 && axis < rank && !seen[axis], InvalidArgument, describe(), ": axis ",
             axes[i], " is out of range or repeated for rank ", rank);
    seen[axis] = true;
    MF_CHECK(steps[i] != 0, InvalidArgument, describe(), ": steps must not be 0");
    if (steps[i] < 0) unsupported("negative steps (reversing slices) are not supported");
    begin[axis] = starts[i];
    end[axis] = ends[i];
    stride[axis] = steps[i];
  }
  set_output(0, emit("slice", {x}, {{"begin", begin}, {"end", end}, {"strides", stride}}));
}

void Importer::convert_squeeze() {
  Value x = input(0);
  std::vector<int64_t> axes;
  if (opset_ >= 13) {
    if (has_input(1)) axes = known_ints(1, "axes");
  } else {
    axes = attr_ints("axes", {});
  }
  set_output(0, emit("squeeze", {x}, {{"axes", axes}}));
}

void Importer::convert_unsqueeze() {
  Value x = input(0);
  const std::vector<int64_t> axes = opset_ >= 13 ? known_ints(1, "axes") : attr_ints("axes", {});
  const int64_t out_rank = rank_of(x) + int64_t(axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : axes) {
    const int64_t axis = a < 0 ? a + out_rank : a;
    MF_CHECK(axis >= 0 && axis < out_rank && !inserted[axis], InvalidArgument, describe(),
             ": axes ", ir::shape_to_string(axes), " are out of range or repeated for rank ",
             out_rank);
    inserted[axis] = true;
  }
  Shape shape;
  size_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d) shape.push_back(inserted[d] ? 1 : shape_of(x)[next++]);
  set_output(0, reshape(x, shape));
}

void Importer::convert_gather() {
  Value x = input(0);
  Value indices = input(1);
  set_output(0, emit("gather", {x, indices}, {{"axis", attr_int("axis", 0)}}));
}

void Importer::convert_shape() {
  const Shape& s = shape_of(input(0));
  const int64_t rank = int64_t(s.size());
  int64_t start = attr_int("start", 0), end = attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  const std::vector<int64_t> dims(s.begin() + start, s.begin() + end);
  set_output(0, graph_->add_constant<int64_t>({int64_t(dims.size())}, dims));
}

void Importer::convert_size() {
  set_output(0, graph_->add_constant<int64_t>({}, {ir::num_elements(shape_of(input(0)))}));
}

void Importer::convert_constant() {
  MF_CHECK(node_->attribute_size() == 1, InvalidArgument, describe(),
           " must have exactly one value attribute, has ", node_->attribute_size());
  const AttributeProto& a = node_->attribute(0);
  const std::string& name = a.name();
  if (name == "value") {
    check_attr(a, AttributeProto::TENSOR);
    set_output(0, constant(decode_tensor(a.t(), "Constant value")));
  } else if (name == "value_float") {
    set_output(0, scalar(attr_float(name, 0), DType::kFloat32));
  } else if (name == "value_int") {
    set_output(0, graph_->add_constant<int64_t>({}, {attr_int(name, 0)}));
  } else if (name == "value_floats") {
    check_attr(a, AttributeProto::FLOATS);
    const std::vector<float> v(a.floats().begin(), a.floats().end());
    set_output(0, graph_->add_constant<float>({int64_t(v.size())}, v));
  } else if (name == "value_ints") {
    const std::vector<int64_t> v = attr_ints(name, {});
    set_output(0, graph_->add_constant<int64_t>({int64_t(v.size())}, v));
  } else {
    unsupported("a Constant given by '" + name +
                "' is not supported (strings and sparse tensors); use 'value'");
  }
}

void Importer::convert_constant_of_shape() {
  const std::vector<int64_t> shape = known_ints(0, "shape");
  int64_t n = 1;
  for (int64_t d : shape) {
    MF_CHECK(d >= 0 && (d == 0 || n <= kMaxElements / d), InvalidArgument, describe(), ": shape ",
             ir::shape_to_string(shape), " is negative or too large");
    n *= d;
  }
  HostTensor value{{DType::kFloat32, {}}, std::vector<uint8_t>(4, 0)};
  if (const AttributeProto* a = find_attr("value")) {
    check_attr(*a, AttributeProto::TENSOR);
    value = decode_tensor(a->t(), "ConstantOfShape value");
    MF_CHECK(value.size() == 1, InvalidArgument, describe(), ": value must hold one element");
  }
  value.type.shape = {};
  set_output(0, emit("broadcast_to", {constant(value)}, {{"shape", shape}}));
}

void Importer::convert_expand() {
  Value x = input(0);
  const std::vector<int64_t> shape = known_ints(1, "shape");
  for (int64_t d : shape) {
    MF_CHECK(d >= 0, InvalidArgument, describe(), ": shape ", ir::shape_to_string(shape),
             " has a negative dimension");
  }
  // Expand broadcasts both ways: a 1 in `shape` keeps x's dimension.
  const Shape out = ir::broadcast_shapes(shape_of(x), shape, "Expand");
  if (out == shape_of(x)) {
    set_output(0, x);
    return;
  }
  set_output(0, emit("broadcast_to", {x}, {{"shape", out}}));
}

void Importer::convert_softmax() {
  const std::string op = node_->op_type() == "Softmax" ? "softmax" : "log_softmax";
  Value x = input(0);
  require_float(x, "x");
  const int64_t rank = rank_of(x);
  if (rank == 0) unsupported("x must have rank >= 1");
  if (opset_ >= 13) {
    set_output(0, emit(op, {x}, {{"axis", axis_attr("axis", -1, rank)}}));
    return;
  }
  // Before opset 13 the input is coerced to 2-D at axis and normalized over the whole tail.
  const int64_t axis = axis_attr("axis", 1, rank);
  if (axis == rank - 1) {
    set_output(0, emit(op, {x}, {{"axis", int64_t{-1}}}));
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= shape_of(x)[d];
  const Shape original = shape_of(x);
  const Value y = emit(op, {reshape(x, {outer, inner})}, {{"axis", int64_t{-1}}});
  set_output(0, reshape(y, original));
}

void Importer::convert_layer_norm() {
  require_unused_outputs_from(1, "the Mean and InvStdDev outputs are not supported");
  Value x = input(0);
  require_float(x, "x");
  const int64_t rank = rank_of(x);
  if (rank == 0) unsupported("x must have rank >= 1");
  const int64_t axis = axis_attr("axis", -1, rank);
  const Shape norm(shape_of(x).begin() + axis, shape_of(x).end());
  auto fit = [&](Value v) {
    if (shape_of(v) == norm) return v;
    return emit("broadcast_to", {v}, {{"shape", norm}});
  };
  const Value gamma = fit(input(1));
  const Value beta = has_input(2)
                         ? fit(input(2))
                         : emit("broadcast_to", {scalar(0, x.type().dtype)}, {{"shape", norm}});
  set_output(0, emit("layer_norm", {x, gamma, beta},
                     {{"begin_norm_axis", axis}, {"epsilon", attr_float("epsilon", 1e-5)}}));
}

void Importer::convert_reduce() {
  const std::string& op = node_->op_type();
  Value x = input(0);
  std::vector<int64_t> axes;
  if (op == "ReduceSum" && opset_ >= 13) {
    if (has_input(1)) axes = known_ints(1, "axes");
  } else {
    axes = attr_ints("axes", {});
  }
  const bool keep_dims = attr_int("keepdims", 1) != 0;
  if (axes.empty() && attr_int("noop_with_empty_axes", 0) != 0) {
    set_output(0, x);
    return;
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank_of(x); ++d) axes.push_back(d);
  }
  const ir::Attrs attrs = {{"axes", axes}, {"keep_dims", keep_dims}};
  Value y;
  if (op == "ReduceMean") {
    y = emit("reduce_mean", {x}, attrs);
  } else if (op == "ReduceSum") {
    y = emit("reduce_sum", {x}, attrs);
  } else if (op == "ReduceMax") {
    y = emit("reduce_max", {x}, attrs);
  } else if (op == "ReduceMin") {
    y = emit("reduce_min", {x}, attrs);
  } else if (op == "ReduceSumSquare") {
    y = emit("reduce_sum", {emit("mul", {x, x})}, attrs);
  } else if (op == "ReduceL1") {
    y = emit("reduce_sum", {emit("abs", {x})}, attrs);
  } else if (op == "ReduceL2") {
    require_float(x, "x");
    y = emit("sqrt", {emit("reduce_sum", {emit("mul", {x, x})}, attrs)});
  } else if (op == "ReduceLogSum") {
    require_float(x, "x");
    y = emit("log", {emit("reduce_sum", {x}, attrs)});
  } else {  // ReduceLogSumExp, stabilized by the maximum
    require_float(x, "x");
    ir::Attrs kept = attrs;
    kept["keep_dims"] = true;
    const Value m = emit("reduce_max", {x}, kept);
    Value s = emit("reduce_sum", {emit("exp", {emit("sub", {x, m})})}, kept);
    y = emit("add", {emit("log", {s}), m});
    if (!keep_dims) y = emit("squeeze", {y}, {{"axes", axes}});
  }
  set_output(0, y);
}

void Importer::convert_cast() {
  Value x = input(0);
  const int64_t to = attr_int("to", 0);
  const std::optional<DType> dtype = to_dtype(int32_t(to));
  if (!dtype) unsupported("cast to " + onnx_type_name(int32_t(to)) + "; " + kSupportedTypes);
  if (*dtype == x.type().dtype) {
    set_output(0, x);
    return;
  }
  set_output(0, emit("cast", {x}, {{"dtype", *dtype}}));
}

// Reads a whole file; NotFound when it cannot be opened.
std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  MF_CHECK(in.good(), NotFound, "cannot open '", file.string(), "': check the path");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::string sanitize_name(std::string_view onnx_name) {
  std::string out(onnx_name);
  for (char& c : out) {
    if (!ir::is_valid_ir_name(std::string_view(&c, 1))) c = '_';
  }
  return out.empty() ? "_" : out;
}

ImportedModel import_onnx_model_from_bytes(std::string_view bytes, std::string_view source,
                                           const ImportOptions& options) {
  MF_CHECK(bytes.size() < size_t(INT_MAX), Unsupported, source, " is ", bytes.size(),
           " bytes; models over 2 GiB need external data, which the importer does not read");
  ModelProto model;
  MF_CHECK(model.ParseFromArray(bytes.data(), int(bytes.size())), DataLoss, source,
           " is not a valid ONNX protobuf (ModelProto): it is damaged, truncated or of another "
           "format; re-export it");
  return Importer(model, std::string(source), options).run();
}

ImportedModel import_onnx_model(const std::filesystem::path& file, const ImportOptions& options) {
  return import_onnx_model_from_bytes(read_file(file), file.filename().string(), options);
}

std::unique_ptr<ir::Graph> import_onnx(const std::filesystem::path& file) {
  return import_onnx_model(file).graph;
}

std::unique_ptr<ir::Graph> import_onnx_from_bytes(std::string_view bytes, std::string_view source) {
  return import_onnx_model_from_bytes(bytes, source).graph;
}

Tensor read_tensor_proto(const std::filesystem::path& file, std::string* name) {
  const std::string bytes = read_file(file);
  TensorProto t;
  MF_CHECK(bytes.size() < size_t(INT_MAX) && t.ParseFromArray(bytes.data(), int(bytes.size())),
           DataLoss, "'", file.string(), "' is not a valid ONNX TensorProto");
  if (name) *name = t.name();
  return to_tensor(decode_tensor(t, "tensor"));
}

}  // namespace mf::onnx
