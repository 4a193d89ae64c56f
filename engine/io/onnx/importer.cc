// The ONNX importer's core: the model and its graph (opset, initializers, inputs, node order,
// outputs), the current node (inputs, known values, attributes, naming, errors) and emitting IR,
// folding as it goes with the constant-folding pass's folder. The converters, by op family, are in
// convert_*.cc (importer_impl.h); TensorProto decoding is in tensor_proto.cc.

#include "engine/io/onnx/importer.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/file_reader.h"
#include "engine/io/onnx/importer_impl.h"
#include "ir/verifier.h"
#include "onnx.pb.h"
#include "passes/constant_folding.h"

namespace mf::onnx {
namespace detail {

// Ops whose inputs are all constants are evaluated at import up to this many output elements;
// larger results stay nodes, so a hostile ConstantOfShape cannot exhaust memory while importing.
constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

// ---------------------------------------------------------------------------------------------
// Model level

ImportedModel Importer::run() {
  MF_CHECK(model_.has_graph(), InvalidArgument, source_,
           " holds no graph: is it an ONNX model (ModelProto)?");
  read_opset();
  graph_ = std::make_unique<ir::Graph>(
      graph_proto_.name().empty() ? std::string("onnx") : sanitize_name(graph_proto_.name()));
  collect_initializers(/*read_external_data=*/true);
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
    MF_CHECK(it != values_.end(), InvalidArgument, source_, ": graph output '",
             echo(out.name(), 80), "' is not produced by any node, initializer or graph input");
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
  std::string other_domains;
  for (const OperatorSetIdProto& id : model_.opset_import()) {
    if (id.domain().empty() || id.domain() == "ai.onnx") {
      opset_ = id.version();
      found = true;
    } else {
      other_domains += (other_domains.empty() ? "'" : ", '") + id.domain() + "'";
    }
  }
  // A model of another domain alone (ai.onnx.preview.training, ai.onnx.ml) is valid ONNX that this
  // importer does not read; a model that imports no opset at all is not ONNX.
  MF_CHECK(found || other_domains.empty(), Unsupported, source_, " uses only the domain(s) ",
           other_domains, "; the importer reads the default ONNX domain (opsets ", kMinOpset,
           " to ", kMaxOpset, ") only");
  MF_CHECK(found, InvalidArgument, source_,
           " imports no opset of the default ONNX domain; it is damaged or not an ONNX model");
  // Each converter adapts the op versions of opsets kMinOpset..kMaxOpset; outside them an op may
  // mean something the converters do not know, so the model is refused with the way back in.
  MF_CHECK(opset_ >= kMinOpset, Unsupported, source_, " uses opset ", opset_,
           " of the default domain, older than the importer reads (opsets ", kMinOpset, " to ",
           kMaxOpset, "); re-export it with opset_version between ", kMinOpset, " and ", kMaxOpset,
           ", or upgrade it with onnx.version_converter.convert_version(model, ", kMaxOpset, ")");
  MF_CHECK(opset_ <= kMaxOpset, Unsupported, source_, " uses opset ", opset_,
           " of the default domain, newer than the importer reads (opsets ", kMinOpset, " to ",
           kMaxOpset, "); re-export it with opset_version=", kMaxOpset,
           ", or convert it with onnx.version_converter.convert_version(model, ", kMaxOpset, ")");
}

void Importer::collect_initializers(bool read_external_data) {
  for (const TensorProto& t : graph_proto_.initializer()) {
    MF_CHECK(!t.name().empty(), InvalidArgument, source_,
             ": an initializer has no name; the file is damaged");
    const TensorProto* stored = &t;
    if (t.data_location() == TensorProto::EXTERNAL && read_external_data) {
      external_copies_.push_back(with_external_data(t));
      stored = &external_copies_.back();
    }
    MF_CHECK(initializers_.emplace(t.name(), stored).second, InvalidArgument, source_,
             ": initializer '", echo(t.name(), 80), "' is defined twice");
  }
}

// An initializer kept in a file beside the model (ONNX's external data: `location`, `offset`,
// `length`), as a copy with its bytes inline. The location is relative to the model's folder and
// must stay inside it (no absolute path, no "..", no symbolic link leading out), name a regular
// file, and hold offset + length bytes.
TensorProto Importer::with_external_data(const TensorProto& t) const {
  const std::string name = quoted_name(t.name());
  MF_CHECK(!options_.external_data_dir.empty(), Unsupported, source_, ": initializer ", name,
           " keeps its data in an external file; import the model from its file so that its "
           "folder can be read");
  std::string location;
  uint64_t offset = 0, length = 0;
  bool has_length = false;
  for (const StringStringEntryProto& e : t.external_data()) {
    const auto number = [&](const std::string& text) {
      MF_CHECK(!text.empty() && text.size() <= 19 &&
                   text.find_first_not_of("0123456789") == std::string::npos,
               DataLoss, source_, ": initializer ", name, "'s external ", echo(e.key(), 40), " '",
               echo(text, 40), "' is not a number");
      return std::stoull(text);
    };
    if (e.key() == "location") location = e.value();
    if (e.key() == "offset") offset = number(e.value());
    if (e.key() == "length") {
      length = number(e.value());
      has_length = true;
    }
  }
  namespace fs = std::filesystem;
  const fs::path relative(location);
  bool climbs = false;
  for (const fs::path& part : relative) climbs = climbs || part == "..";
  MF_CHECK(!location.empty() && location.find('\0') == std::string::npos &&
               relative.is_relative() && !climbs,
           InvalidArgument, source_, ": initializer ", name, "'s external data location '",
           echo(location), "' must be a relative path inside the model's folder");
  std::error_code ec;
  const fs::path root = fs::canonical(options_.external_data_dir, ec);
  const fs::path file = fs::weakly_canonical(options_.external_data_dir / relative, ec);
  const auto [end, _] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
  MF_CHECK(!ec && end == root.end(), InvalidArgument, source_, ": initializer ", name,
           "'s external data '", echo(location), "' leads outside the model's folder");
  RegularFile data(file, "external data file");
  MF_CHECK(offset <= data.size(), DataLoss, source_, ": initializer ", name, "'s external data ",
           "offset ", offset, " is past the end of '", echo(location), "' (", data.size(),
           " bytes)");
  if (!has_length) length = data.size() - offset;
  MF_CHECK(length <= data.size() - offset, DataLoss, source_, ": initializer ", name,
           "'s external data (", length, " bytes at offset ", offset, ") is past the end of '",
           echo(location), "' (", data.size(), " bytes)");
  // The element count the dims give bounds the read (decode_tensor checks the exact size).
  uint64_t expected = 1;
  for (int64_t d : t.dims()) {
    MF_CHECK(d >= 0 && (d == 0 || expected <= uint64_t(kMaxElements) / uint64_t(d)), DataLoss,
             source_, ": initializer ", name, " has a damaged shape");
    expected *= uint64_t(d);
  }
  const std::optional<DType> dtype = to_dtype(t.data_type());
  MF_CHECK(dtype.has_value(), Unsupported, source_, ": initializer ", name, " has element type ",
           onnx_type_name(t.data_type()), "; ", kSupportedTypes);
  MF_CHECK(length == expected * ir::dtype_size(*dtype), DataLoss, source_, ": initializer ", name,
           " has ", expected, " elements but its external data holds ", length, " bytes");
  TensorProto copy = t;
  copy.clear_external_data();
  copy.set_data_location(TensorProto::DEFAULT);
  std::string* bytes = copy.mutable_raw_data();
  bytes->resize(size_t(length));
  MF_CHECK(data.read_at(offset, bytes->data(), size_t(length)) == length, DataLoss, source_,
           ": external data file '", echo(location), "' shrank while it was read");
  return copy;
}

ir::InputSignature Importer::declare_input(const ValueInfoProto& in) const {
  MF_CHECK(in.type().has_tensor_type(), Unsupported, source_, ": graph input '",
           echo(in.name(), 80),
           "' is not a tensor (sequences, maps and optionals are not supported)");
  const TypeProto::Tensor& tt = in.type().tensor_type();
  const std::optional<DType> dtype = to_dtype(tt.elem_type());
  MF_CHECK(dtype.has_value(), Unsupported, source_, ": graph input '", echo(in.name(), 80),
           "' has element type ", onnx_type_name(tt.elem_type()), "; ", kSupportedTypes);
  MF_CHECK(tt.has_shape(), Unsupported, source_, ": graph input '", echo(in.name(), 80),
           "' has no shape (not even its rank); export it with its rank and dimensions");
  ir::InputSignature declared{in.name(), *dtype, {}};
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const TensorShapeProto::Dimension& dim = tt.shape().dim(d);
    if (!dim.has_dim_value()) {
      // A dim_param names a dynamic dimension; neither value nor name is an unnamed one.
      std::string symbol = dim.has_dim_param() ? sanitize_name(dim.dim_param()) : "";
      symbol.resize(std::min(symbol.size(), ir::kMaxSymbolChars));
      declared.shape.push_back({-1, std::move(symbol)});
      continue;
    }
    MF_CHECK(dim.dim_value() >= 0 && dim.dim_value() <= kMaxElements, InvalidArgument, source_,
             ": graph input '", echo(in.name(), 80), "' has dimension ", dim.dim_value(),
             " at axis ", d);
    declared.shape.push_back({dim.dim_value(), {}});
  }
  MF_CHECK(declared.shape.size() <= size_t(ir::kMaxRank), InvalidArgument, source_,
           ": graph input '", echo(in.name(), 80), "' has rank ", declared.shape.size(),
           "; at most ", ir::kMaxRank, " is supported");
  return declared;
}

std::vector<ir::InputSignature> Importer::read_signature(std::vector<std::string>* parameters) {
  // The inputs are the graph inputs that are no initializer: their names suffice, so external
  // data (gigabytes for the largest models) is not read here.
  collect_initializers(/*read_external_data=*/false);
  std::vector<ir::InputSignature> inputs;
  for (const ValueInfoProto& in : graph_proto_.input()) {
    if (initializers_.count(in.name())) continue;
    inputs.push_back(declare_input(in));
    // Named as add_graph_inputs names them: inputs are the first parameters.
    if (parameters != nullptr) parameters->push_back(unique_name(in.name()));
  }
  return inputs;
}

void Importer::add_graph_inputs() {
  for (const ValueInfoProto& in : graph_proto_.input()) {
    // Before IR version 4 initializers were listed as inputs too: they stay weights.
    if (initializers_.count(in.name())) continue;
    MF_CHECK(!in.name().empty(), InvalidArgument, source_, ": a graph input has no name");
    MF_CHECK(!values_.count(in.name()), InvalidArgument, source_, ": graph input '",
             echo(in.name(), 80), "' is declared twice");
    const ir::InputSignature declared = declare_input(in);
    const DType* dtype = &declared.dtype;
    result_.signature.push_back(declared);
    Shape shape = ir::concrete_shape(declared, {});
    if (ir::is_dynamic(declared.shape)) {
      // The graph is imported for one binding of its dynamic dimensions (ModelFile binds them
      // from each call's inputs), so shapes fold as they do for a static model.
      const auto bound = options_.input_shapes.find(in.name());
      MF_CHECK(bound != options_.input_shapes.end(), Unsupported, source_, ": graph input '",
               echo(in.name(), 80), "' has dynamic dimensions ",
               ir::symbolic_shape_to_string(declared.shape),
               "; give its shape to bind them (run the model through ModelFile, `mf run` or "
               "modeflow.onnx.load, which bind them from the inputs)");
      ir::bind_input(declared, *dtype, bound->second, symbols_);
      shape = bound->second;
    }
    int64_t n = 1;
    for (int64_t d : shape) {
      MF_CHECK(d == 0 || n <= kMaxElements / d, InvalidArgument, source_, ": graph input '",
               echo(in.name(), 80), "' is too large: ", ir::shape_to_string(shape));
      n *= d;
    }
    if (auto frozen = options_.frozen_inputs.find(in.name());
        frozen != options_.frozen_inputs.end()) {
      const Tensor& t = frozen->second;
      MF_CHECK(t.type() == TensorType({*dtype, shape}), InvalidArgument, source_,
               ": the value frozen for graph input '", echo(in.name(), 80), "' is ",
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
               echo(graph_proto_.node(i).op_type(), 80), ") writes '", echo(out, 80),
               "', which is already a graph input or initializer");
      MF_CHECK(producer.emplace(out, i).second, InvalidArgument, source_, ": value '",
               echo(out, 80), "' is produced by two nodes (",
               quoted_name(graph_proto_.node(producer[out]).name()), " and ",
               quoted_name(graph_proto_.node(i).name()), ")");
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
               " (", echo(node.op_type(), 80), ") reads '", echo(in, 80),
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
               quoted_name(graph_proto_.node(i).name()), " (",
               echo(graph_proto_.node(i).op_type(), 80), "); an ONNX graph must be acyclic");
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

const Importer::ConverterTable& Importer::converters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    add_elementwise_converters(t);
    add_nn_converters(t);
    add_reduce_converters(t);
    add_shape_converters(t);
    add_index_converters(t);
    add_misc_converters(t);
    add_resample_converters(t);
    add_loss_converters(t);
    add_extra_converters(t);
    add_recurrent_converters(t);
    add_einsum_converters(t);
    add_constant_converters(t);
    return t;
  }();
  return table;
}

void Importer::add_converters(ConverterTable& table,
                              std::initializer_list<std::pair<const char*, Converter>> entries) {
  for (const auto& [op, fn] : entries) {
    MF_CHECK(table.emplace(op, fn).second, Internal, "ONNX op '", op,
             "' has two converters in the importer");
  }
}

void Importer::convert_node(const NodeProto& original) {
  node_ = &original;
  std::optional<NodeProto> adapted;
  if (opset_ < 7 && original.domain().empty()) {
    try {
      adapted = adapt_legacy_node(original);
    } catch (Error& e) {
      e.add_context("while importing " + describe());
      throw;
    }
    node_ = &*adapted;
  }
  const NodeProto& node = *node_;
  const std::string& domain = node.domain();
  if (!domain.empty() && domain != "ai.onnx") {
    MF_FAIL(Unsupported, "ONNX op '", echo(node.op_type(), 80), "' of domain '", echo(domain, 80),
            "' (node ", quoted_name(node.name()), " of ", source_,
            ") is not supported: the importer reads only the default domain (ai.onnx); export "
            "without custom or vendor ops (e.g. without onnxruntime's transformer optimizer)");
  }
  const auto& table = converters();
  auto it = table.find(node.op_type());
  if (it == table.end()) {
    std::string names;
    for (const auto& [name, fn] : table) names += (names.empty() ? "" : ", ") + name;
    MF_FAIL(Unsupported, "ONNX op '", echo(node.op_type(), 80), "' (domain ai.onnx, opset ", opset_,
            ") of node ", quoted_name(node.name()), " in ", source_,
            " is not supported by the importer. Supported ops: ", names,
            ". Rewrite the model with supported ops before export, or file an issue asking for ",
            echo(node.op_type(), 80));
  }
  inputs_consulted_ = 0;
  try {
    (this->*(it->second))();
    for (size_t i = inputs_consulted_; i < size_t(node.input_size()); ++i) {
      MF_CHECK(node.input(int(i)).empty(), InvalidArgument, describe(), " has ", node.input_size(),
               " inputs, but ", "this op takes at most ", inputs_consulted_,
               ": the node is malformed; re-export the model");
    }
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
  std::string name =
      node_->name().empty() ? "#" + std::to_string(node_index_) : echo(node_->name(), 80);
  return "ONNX node '" + name + "' (" + echo(node_->op_type(), 80) + ", opset " +
         std::to_string(opset_) + ") of " + source_;
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
           echo(name, 80), "'");
  // An initializer becomes a weight parameter on its first use as data; one read only for its
  // value (a Reshape's shape, Slice's starts) never appears in the graph.
  const std::string ir_name = unique_name(name);
  if (!options_.read_weights) {
    const Value v = graph_->add_parameter(ir_name, tensor_proto_type(*init->second, "initializer"),
                                          /*is_weight=*/true);
    values_.emplace(name, v);
    return v;
  }
  HostTensor h = decode_tensor(*init->second, "initializer");
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
    if (const ir::Constant* c = it->second.constant())
      return HostTensor{c->type(), {c->bytes().begin(), c->bytes().end()}};
    auto given = options_.input_values.find(name);
    if (given != options_.input_values.end() && it->second.type() == given->second.type() &&
        !initializers_.count(name)) {
      given->second.sync();
      const auto* bytes = static_cast<const uint8_t*>(given->second.raw_data());
      return HostTensor{given->second.type(), {bytes, bytes + given->second.nbytes()}};
    }
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
                echo(node_->input(int(i)), 80) +
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
      unsupported("output " + std::to_string(j) + " ('" + echo(node_->output(int(j)), 80) +
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
  // Concat -> Reshape) ends as attributes of the ops that consume it. The constant-folding pass's
  // folder, with its trait checks; unlike the pass, an error of the kernel (gather out of range)
  // is the model's: it is reported.
  if (passes::foldable(*node, kMaxFoldElements)) return passes::fold_node(*graph_, *node);
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

}  // namespace detail

namespace {

// Reads a whole file; NotFound when it cannot be opened.
// Only a regular file, at most 2 GiB (protobuf's own limit), opened without blocking.
std::string read_file(const std::filesystem::path& file) {
  return read_regular_file(file, size_t{2} << 30, "ONNX model");
}

}  // namespace

std::string sanitize_name(std::string_view onnx_name) {
  std::string out(onnx_name);
  for (char& c : out) {
    if (!ir::is_valid_ir_name(std::string_view(&c, 1))) c = '_';
  }
  return out.empty() ? "_" : out;
}

struct ParsedModel {
  ModelProto proto;
  std::string source;
};

std::shared_ptr<const ParsedModel> parse_onnx_model(std::string_view bytes,
                                                    std::string_view source) {
  MF_CHECK(bytes.size() < size_t(INT_MAX), Unsupported, echo(source), " is ", bytes.size(),
           " bytes; protobuf reads at most 2 GiB: save the weights as external data "
           "(onnx.save_model(model, path, save_as_external_data=True))");
  const google::protobuf::LogSilencer quiet;  // damage is reported once, as DataLoss
  auto model = std::make_shared<ParsedModel>();
  model->source = std::string(source);
  MF_CHECK(model->proto.ParseFromArray(bytes.data(), int(bytes.size())), DataLoss, echo(source),
           " is not a valid ONNX protobuf (ModelProto): it is damaged, truncated or of another "
           "format; re-export it");
  return model;
}

std::vector<ir::InputSignature> onnx_input_signature(const ParsedModel& model,
                                                     std::vector<std::string>* parameters) {
  return detail::Importer(model.proto, model.source, ImportOptions{}).read_signature(parameters);
}

ImportedModel import_parsed_onnx_model(const ParsedModel& model, const ImportOptions& options) {
  return detail::Importer(model.proto, model.source, options).run();
}

ImportedModel import_onnx_model_from_bytes(std::string_view bytes, std::string_view source,
                                           const ImportOptions& options) {
  return import_parsed_onnx_model(*parse_onnx_model(bytes, source), options);
}

std::shared_ptr<const ParsedModel> parse_onnx_file(const std::filesystem::path& file,
                                                   ImportOptions& options) {
  if (options.external_data_dir.empty()) {
    options.external_data_dir = file.parent_path().empty() ? "." : file.parent_path();
  }
  return parse_onnx_model(read_file(file), file.filename().string());
}

ImportedModel import_onnx_model(const std::filesystem::path& file, ImportOptions options) {
  return import_parsed_onnx_model(*parse_onnx_file(file, options), options);
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
  return detail::to_tensor(detail::decode_tensor(t, "tensor"));
}

}  // namespace mf::onnx
