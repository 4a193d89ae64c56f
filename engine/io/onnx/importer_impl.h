#pragma once
// The ONNX importer's class, shared by its files (internal to engine/io/onnx/): the core in
// importer.cc (model and graph walking, opset checks, naming, errors, emitting IR) and the
// converters, grouped by op family, each family with its own table of the ONNX ops it converts:
// convert_elementwise.cc, convert_nn.cc (matmul, gemm, conv, pool, norms, softmax),
// convert_reduce.cc, convert_shape.cc (reshape, slice, gather, concat, ...), convert_constant.cc.

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/io/onnx/importer.h"
#include "engine/io/onnx/tensor_proto.h"
#include "ir/graph.h"
#include "ir/input_signature.h"
#include "onnx.pb.h"

namespace mf::onnx::detail {

using ir::DType;
using ir::Shape;
using ir::TensorType;
using ir::Value;

// The importer of one ModelProto into one graph; single use.
// Converts nodes in dependency order, one ONNX node to one or a few IR nodes.
class Importer {
 public:
  Importer(const ModelProto& model, std::string source, const ImportOptions& options)
      : model_(model), graph_proto_(model.graph()), source_(echo(source)), options_(options) {}

  ImportedModel run();

 private:
  using Converter = void (Importer::*)();
  using ConverterTable = std::map<std::string, Converter, std::less<>>;
  // Every op's converter: the families' tables (convert_*.cc) merged; an op in two is an error.
  static const ConverterTable& converters();
  static void add_converters(ConverterTable& table,
                             std::initializer_list<std::pair<const char*, Converter>> entries);
  static void add_elementwise_converters(ConverterTable& table);  // convert_elementwise.cc
  static void add_nn_converters(ConverterTable& table);           // convert_nn.cc
  static void add_reduce_converters(ConverterTable& table);       // convert_reduce.cc
  static void add_shape_converters(ConverterTable& table);        // convert_shape.cc
  static void add_constant_converters(ConverterTable& table);     // convert_constant.cc
  static void add_index_converters(ConverterTable& table);        // convert_index.cc
  static void add_misc_converters(ConverterTable& table);         // convert_misc.cc
  static void add_resample_converters(ConverterTable& table);     // convert_resample.cc
  static void add_loss_converters(ConverterTable& table);         // convert_loss.cc
  static void add_extra_converters(ConverterTable& table);        // convert_extra.cc
  static void add_recurrent_converters(ConverterTable& table);    // convert_recurrent.cc
  static void add_einsum_converters(ConverterTable& table);       // convert_einsum.cc

  void read_opset();
  // Indexes the initializers by name; with `read_external_data`, those kept in files beside the
  // model are read in (with_external_data), otherwise only their names and types are needed.
  void collect_initializers(bool read_external_data);
  TensorProto with_external_data(const TensorProto& t) const;
  void add_graph_inputs();
  // A graph input's declaration: dtype and dimensions, dynamic ones as symbols.
  ir::InputSignature declare_input(const ValueInfoProto& in) const;

 public:
  // The graph inputs' declarations, without importing the graph.
  std::vector<ir::InputSignature> read_signature(std::vector<std::string>* parameters);

 private:
  std::vector<int> node_order();
  void convert_node(const NodeProto& node);
  // Opsets 1-6 (legacy_opsets.cc): the node in its opset-7 form, or Unsupported.
  NodeProto adapt_legacy_node(const NodeProto& node);
  // Binds `v` to a fresh name no ONNX value uses, for inputs an adapted node adds.
  std::string synthetic_value(Value v);
  std::string unique_name(std::string_view onnx_name);

  // ---- the current node ----
  std::string describe() const;
  // Every input a converter asks about counts as read: convert_node refuses a node whose other
  // inputs nobody read (a Relu with two inputs), instead of importing it without them.
  size_t num_inputs() const {
    inputs_consulted_ = std::max(inputs_consulted_, size_t(node_->input_size()));
    return size_t(node_->input_size());
  }
  bool has_input(size_t i) const {
    inputs_consulted_ = std::max(inputs_consulted_, i + 1);
    return i < size_t(node_->input_size()) && !node_->input(int(i)).empty();
  }
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

  // ---- converters, one per ONNX op (or family of ops), defined in convert_*.cc ----
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
  void convert_softsign();
  void convert_selu();
  void convert_is_inf();
  void convert_mod();
  void convert_reciprocal();
  void convert_matmul();
  void convert_gemm();
  void convert_conv();
  void convert_conv_transpose();
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
  void convert_arg_extreme();  // ArgMax, ArgMin (convert_index.cc, as the six below)
  void convert_tile();
  void convert_range();
  void convert_cumsum();
  void convert_trilu();
  void convert_depth_to_space();
  void convert_space_to_depth();
  void convert_gather_elements();  // GatherElements (convert_misc.cc, as the seven below)
  void convert_gather_nd();
  void convert_scatter_elements();  // ScatterElements and the older Scatter
  void convert_scatter_nd();
  void convert_top_k();
  void convert_hardmax();
  void convert_instance_norm();
  void convert_lrn();
  void convert_pad();  // Pad, Resize, Upsample (convert_resample.cc)
  void convert_resize();
  void convert_upsample();
  void convert_nll_loss();  // NegativeLogLikelihoodLoss (convert_loss.cc, as the two below)
  void convert_softmax_cross_entropy();  // SoftmaxCrossEntropyLoss
  // NegativeLogLikelihoodLoss of x (N, C, d...) at target (N, d...) with the current node's
  // reduction and ignore_index, weighted by weight (C) when given.
  Value nll_loss(Value x, Value target, std::optional<Value> weight);
  void convert_compare_or_equal();  // GreaterOrEqual, LessOrEqual
  void convert_celu();
  void convert_thresholded_relu();
  void convert_shrink();
  void convert_cast_like();
  void convert_eye_like();  // EyeLike (convert_extra.cc, as the two below)
  void convert_one_hot();
  void convert_mvn();  // MeanVarianceNormalization
  void convert_window();
  void convert_recurrent();  // RNN, GRU, LSTM
  void convert_einsum();
  void convert_grid_sample();
  Value recurrent_activation(Value x, const std::string& name, double alpha, double beta,
                             bool has_alpha,
                             bool has_beta);  // HannWindow, HammingWindow, BlackmanWindow

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
  ir::SymbolValues symbols_;  // dynamic dimensions bound by ImportOptions::input_shapes
  std::unordered_map<std::string, const TensorProto*> initializers_;
  std::unordered_map<std::string, Value> values_;
  std::unordered_set<std::string> used_;  // every value name a node or graph output reads
  std::set<std::string> taken_names_;     // IR parameter names handed out
  const NodeProto* node_ = nullptr;
  int node_index_ = 0;
  int synthetic_values_ = 0;
  std::deque<TensorProto> external_copies_;  // initializers read from external data
  mutable size_t inputs_consulted_ = 0;      // inputs of the current node a converter asked about
};

}  // namespace mf::onnx::detail
