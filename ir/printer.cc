#include "ir/printer.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <ostream>
#include <sstream>
#include <unordered_map>

#include "base/error.h"

namespace mf::ir {

namespace {

// Shortest decimal that reads back to the same bits (std::to_chars without precision guarantees
// it).
template <typename T>
std::string shortest(T value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, end);
}

// Names values the way the text format spells them: %para1_x, %const2, %7, %7.1.
class ValueNamer {
 public:
  explicit ValueNamer(const Graph& graph) {
    size_t i = 0;
    for (const Node& node : graph.nodes()) positions_[&node] = i++;
  }

  std::string name(const Value& value) const {
    switch (value.kind()) {
      case ValueKind::kParameter:
        return detail::str_cat("%para", value.parameter()->index() + 1, "_",
                               value.parameter()->name());
      case ValueKind::kConstant:
        return detail::str_cat("%const", value.constant()->index() + 1);
      case ValueKind::kNode: {
        auto it = positions_.find(value.node());
        if (it == positions_.end()) return "%<dangling>";
        std::string out = detail::str_cat("%", it->second);
        if (value.node()->num_outputs() != 1) out += detail::str_cat(".", value.index());
        return out;
      }
      case ValueKind::kNone:
        break;
    }
    return "%<null>";
  }

  std::string node_name(const Node& node) const {
    auto it = positions_.find(&node);
    return it == positions_.end() ? "%<dangling>" : detail::str_cat("%", it->second);
  }

 private:
  std::unordered_map<const Node*, size_t> positions_;
};

std::string format_element(const Constant& c, size_t i) {
  const uint8_t* p = c.bytes().data() + i * dtype_size(c.type().dtype);
  return visit_dtype(c.type().dtype, [&](auto zero) -> std::string {
    using T = decltype(zero);
    T v;
    std::memcpy(&v, p, sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      return v ? "true" : "false";
    } else {
      return shortest(v);
    }
  });
}

bool is_default(const Node& node, const std::string& name, const AttrValue& value) {
  if (node.def() == nullptr) return false;
  for (const AttrSpec& spec : node.def()->attrs) {
    if (spec.name == name) return spec.default_value.has_value() && *spec.default_value == value;
  }
  return false;
}

std::string types_list(std::span<const TensorType> types) {
  std::string out = "(";
  for (size_t i = 0; i < types.size(); ++i) {
    if (i > 0) out += ", ";
    out += type_to_string(types[i]);
  }
  return out + ")";
}

std::string parameter_type(const Parameter& p) {
  if (!p.is_weight()) return type_to_string(p.type());
  return detail::str_cat("<Ref[Tensor[", dtype_name(p.type().dtype), "]], ",
                         shape_to_string(p.type().shape), ">");
}

void print_block(std::ostream& out, const Graph& graph, const std::string& path,
                 const PrintOptions& options) {
  ValueNamer namer(graph);
  out << "subgraph @" << path << "(";
  for (size_t i = 0; i < graph.num_parameters(); ++i) {
    const Parameter* p = graph.parameter(i);
    if (i > 0) out << ", ";
    out << namer.name(Value(const_cast<Parameter*>(p))) << ": " << parameter_type(*p);
  }
  out << ") {\n";
  for (size_t i = 0; i < graph.num_constants(); ++i) {
    const Constant* c = graph.constant(i);
    out << "  " << namer.name(Value(const_cast<Constant*>(c))) << " = Constant "
        << type_to_string(c->type()) << " [";
    const size_t n = static_cast<size_t>(num_elements(c->type().shape));
    for (size_t k = 0; k < n; ++k) out << (k > 0 ? ", " : "") << format_element(*c, k);
    out << "]\n";
  }
  for (const Node& node : graph.nodes()) {
    out << "  " << namer.node_name(node) << " = " << node.op() << "(";
    std::vector<TensorType> input_types;
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      out << (i > 0 ? ", " : "") << namer.name(node.input(i));
      input_types.push_back(node.input(i).type());
    }
    out << ")";
    bool first = true;
    for (const auto& [name, value] : node.attrs()) {
      if (options.detail == Detail::kCompact && is_default(node, name, value)) continue;
      out << (first ? " {" : ", ") << name << ": " << format_attr_value(value);
      first = false;
    }
    if (!first) out << "}";
    out << " : " << types_list(input_types) << " -> " << types_list(node.output_types()) << "\n";
    if (!node.scope().empty()) out << "      # scope: " << node.scope() << "\n";
    if (options.detail == Detail::kFull && !node.location().empty()) {
      out << "      # location: " << node.location() << "\n";
    }
  }
  out << "  Return(";
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    out << (i > 0 ? ", " : "") << namer.name(graph.outputs()[i]);
  }
  out << ")\n}\n";
}

size_t count_graphs(const Graph& graph) {
  size_t n = 1;
  for (const Graph* g : graph.subgraphs()) n += count_graphs(*g);
  return n;
}

void print_nested(std::ostream& out, const Graph& graph, const std::string& prefix,
                  const PrintOptions& options) {
  for (const Graph* sub : graph.subgraphs()) {
    const std::string path = prefix.empty() ? sub->name() : prefix + "/" + sub->name();
    out << "\n";
    print_block(out, *sub, path, options);
    print_nested(out, *sub, path, options);
  }
}

}  // namespace

std::string format_float(double value) {
  std::string s = shortest(value);
  // Without a '.', 'e', "inf" or "nan" the parser would read an integer.
  if (s.find_first_of(".eEna") == std::string::npos) s += ".0";
  return s;
}

std::string quote_string(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string format_attr_value(const AttrValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          return format_float(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quote_string(v);
        } else if constexpr (std::is_same_v<T, DType>) {
          return std::string(dtype_name(v));
        } else {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) {
            if (i > 0) out += ", ";
            if constexpr (std::is_same_v<T, std::vector<double>>) {
              out += format_float(v[i]);
            } else {
              out += std::to_string(v[i]);
            }
          }
          return out + "]";
        }
      },
      value);
}

void print_graph(std::ostream& out, const Graph& graph, PrintOptions options) {
  out << "# IR entry: @" << graph.name() << "\n";
  out << "# Total subgraphs: " << count_graphs(graph) << "\n\n";
  print_block(out, graph, graph.name(), options);
  print_nested(out, graph, "", options);
}

std::string print_graph(const Graph& graph, PrintOptions options) {
  std::ostringstream out;
  print_graph(out, graph, options);
  return out.str();
}

void write_graph_file(const Graph& graph, const std::string& path, PrintOptions options) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  MF_CHECK(file.good(), InvalidArgument, "cannot open '", path, "' to write the IR of graph @",
           graph.name());
  print_graph(file, graph, options);
  file.flush();
  MF_CHECK(file.good(), InvalidArgument, "writing the IR of graph @", graph.name(), " to '", path,
           "' failed");
}

std::string describe_node(const Graph& graph, const Node& node) {
  ValueNamer namer(graph);
  std::string out = namer.node_name(node) + " = " + node.op() + "(";
  for (size_t i = 0; i < node.num_inputs(); ++i) {
    if (i > 0) out += ", ";
    out += namer.name(node.input(i));
  }
  return out + ")";
}

}  // namespace mf::ir
