#include "ir/printer.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <functional>
#include <ostream>
#include <vector>

#include "base/error.h"
#include "base/file_reader.h"

namespace mf::ir {

namespace {

// Collects the text in a fixed buffer and hands it to the sink in large pieces, so printing costs
// no allocation per token and a hashing sink sees few calls.
class Writer {
 public:
  explicit Writer(TextSink& sink) : sink_(sink) {}
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void put(std::string_view text) {
    if (text.size() > kCapacity - used_) {
      flush();
      if (text.size() > kCapacity) {
        sink_.append(text);
        return;
      }
    }
    std::memcpy(buffer_ + used_, text.data(), text.size());
    used_ += text.size();
  }
  void put(char c) {
    if (used_ == kCapacity) flush();
    buffer_[used_++] = c;
  }
  // Integers in decimal, as std::to_string writes them; floating point in the shortest form that
  // reads back to the same bits (std::to_chars without a precision guarantees it).
  template <typename T>
  void put_number(T value) {
    char text[64];
    auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
    put(std::string_view(text, static_cast<size_t>(end - text)));
  }
  void flush() {
    if (used_ > 0) sink_.append(std::string_view(buffer_, used_));
    used_ = 0;
  }

 private:
  static constexpr size_t kCapacity = 4096;
  TextSink& sink_;
  size_t used_ = 0;
  char buffer_[kCapacity];
};

class StringSink final : public TextSink {
 public:
  explicit StringSink(std::string& out) : out_(out) {}
  void append(std::string_view text) override { out_.append(text); }

 private:
  std::string& out_;
};

class StreamSink final : public TextSink {
 public:
  explicit StreamSink(std::ostream& out) : out_(out) {}
  void append(std::string_view text) override {
    out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  }

 private:
  std::ostream& out_;
};

// Runs `write(Writer&)` and returns what it wrote.
template <typename Fn>
std::string to_text(Fn&& write) {
  std::string out;
  StringSink sink(out);
  Writer w(sink);
  write(w);
  w.flush();
  return out;
}

void put_float(Writer& w, double value) {
  char text[64];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
  const std::string_view s(text, static_cast<size_t>(end - text));
  w.put(s);
  // Without a '.', 'e', "inf" or "nan" the parser would read an integer.
  if (s.find_first_of(".eEna") == std::string_view::npos) w.put(".0");
}

void put_quoted(Writer& w, std::string_view text) {
  w.put('"');
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        w.put("\\\"");
        break;
      case '\\':
        w.put("\\\\");
        break;
      case '\n':
        w.put("\\n");
        break;
      case '\t':
        w.put("\\t");
        break;
      case '\r':
        w.put("\\r");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static constexpr char kHex[] = "0123456789abcdef";
          w.put("\\x");
          w.put(kHex[c >> 4]);
          w.put(kHex[c & 15]);
        } else {
          w.put(ch);
        }
    }
  }
  w.put('"');
}

void put_attr_value(Writer& w, const AttrValue& value) {
  std::visit(
      [&w](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          w.put(v ? "true" : "false");
        } else if constexpr (std::is_same_v<T, int64_t>) {
          w.put_number(v);
        } else if constexpr (std::is_same_v<T, double>) {
          put_float(w, v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          put_quoted(w, v);
        } else if constexpr (std::is_same_v<T, DType>) {
          w.put(dtype_name(v));
        } else {
          w.put('[');
          for (size_t i = 0; i < v.size(); ++i) {
            if (i > 0) w.put(", ");
            if constexpr (std::is_same_v<T, std::vector<double>>) {
              put_float(w, v[i]);
            } else {
              w.put_number(v[i]);
            }
          }
          w.put(']');
        }
      },
      value);
}

// "(64, 784)", as shape_to_string.
void put_shape(Writer& w, const Shape& shape) {
  w.put('(');
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) w.put(", ");
    w.put_number(shape[i]);
  }
  w.put(')');
}

// "<Tensor[Float32], (64, 784)>", as type_to_string.
void put_type(Writer& w, const TensorType& type) {
  w.put("<Tensor[");
  w.put(dtype_name(type.dtype));
  w.put("], ");
  put_shape(w, type.shape);
  w.put('>');
}

// Names values the way the text format spells them: %para1_x, %const2, %7, %7.1.
class ValueNamer {
 public:
  explicit ValueNamer(const Graph& graph) {
    positions_.reserve(graph.num_nodes());
    size_t i = 0;
    for (const Node& node : graph.nodes()) positions_.emplace_back(&node, i++);
    std::sort(positions_.begin(), positions_.end(), [](const Entry& a, const Entry& b) {
      return std::less<const Node*>()(a.first, b.first);
    });
  }

  void put(Writer& w, const Value& value) const {
    switch (value.kind()) {
      case ValueKind::kParameter:
        w.put("%para");
        w.put_number(value.parameter()->index() + 1);
        w.put('_');
        w.put(value.parameter()->name());
        return;
      case ValueKind::kConstant:
        w.put("%const");
        w.put_number(value.constant()->index() + 1);
        return;
      case ValueKind::kNode: {
        const size_t* position = find(value.node());
        if (position == nullptr) {
          w.put("%<dangling>");
          return;
        }
        w.put('%');
        w.put_number(*position);
        if (value.node()->num_outputs() != 1) {
          w.put('.');
          w.put_number(value.index());
        }
        return;
      }
      case ValueKind::kNone:
        break;
    }
    w.put("%<null>");
  }

  void put_node(Writer& w, const Node& node) const {
    const size_t* position = find(&node);
    if (position == nullptr) {
      w.put("%<dangling>");
      return;
    }
    w.put('%');
    w.put_number(*position);
  }

 private:
  using Entry = std::pair<const Node*, size_t>;

  // The node's position in program order, or null when it is not in the graph.
  const size_t* find(const Node* node) const {
    auto it = std::lower_bound(
        positions_.begin(), positions_.end(), node,
        [](const Entry& e, const Node* n) { return std::less<const Node*>()(e.first, n); });
    return it == positions_.end() || it->first != node ? nullptr : &it->second;
  }

  // Sorted by address: one allocation per block and no hashing, for a lookup per operand.
  std::vector<Entry> positions_;
};

void put_element(Writer& w, const Constant& c, size_t i) {
  const uint8_t* p = c.bytes().data() + i * dtype_size(c.type().dtype);
  visit_dtype(c.type().dtype, [&](auto zero) {
    using T = decltype(zero);
    T v;
    std::memcpy(&v, p, sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      w.put(v ? "true" : "false");
    } else {
      w.put_number(v);
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

void put_parameter_type(Writer& w, const Parameter& p) {
  if (!p.is_weight()) {
    put_type(w, p.type());
    return;
  }
  w.put("<Ref[Tensor[");
  w.put(dtype_name(p.type().dtype));
  w.put("]], ");
  put_shape(w, p.type().shape);
  w.put('>');
}

void print_block(Writer& w, const Graph& graph, std::string_view path,
                 const PrintOptions& options) {
  ValueNamer namer(graph);
  w.put("subgraph @");
  w.put(path);
  w.put('(');
  for (size_t i = 0; i < graph.num_parameters(); ++i) {
    const Parameter* p = graph.parameter(i);
    if (i > 0) w.put(", ");
    namer.put(w, Value(const_cast<Parameter*>(p)));
    w.put(": ");
    put_parameter_type(w, *p);
  }
  w.put(") {\n");
  for (size_t i = 0; i < graph.num_constants(); ++i) {
    const Constant* c = graph.constant(i);
    w.put("  ");
    namer.put(w, Value(const_cast<Constant*>(c)));
    w.put(" = Constant ");
    put_type(w, c->type());
    w.put(" [");
    const size_t n = static_cast<size_t>(num_elements(c->type().shape));
    for (size_t k = 0; k < n; ++k) {
      if (k > 0) w.put(", ");
      put_element(w, *c, k);
    }
    w.put("]\n");
  }
  for (const Node& node : graph.nodes()) {
    w.put("  ");
    namer.put_node(w, node);
    w.put(" = ");
    w.put(node.op());
    w.put('(');
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      if (i > 0) w.put(", ");
      namer.put(w, node.input(i));
    }
    w.put(')');
    bool first = true;
    for (const auto& [name, value] : node.attrs()) {
      if (options.detail == Detail::kCompact && is_default(node, name, value)) continue;
      w.put(first ? " {" : ", ");
      w.put(name);
      w.put(": ");
      put_attr_value(w, value);
      first = false;
    }
    if (!first) w.put('}');
    w.put(" : (");
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      if (i > 0) w.put(", ");
      put_type(w, node.input(i).type());
    }
    w.put(") -> (");
    const std::span<const TensorType> outputs = node.output_types();
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (i > 0) w.put(", ");
      put_type(w, outputs[i]);
    }
    w.put(")\n");
    if (!node.scope().empty()) {
      w.put("      # scope: ");
      w.put(node.scope());
      w.put('\n');
    }
    if (options.detail == Detail::kFull && !node.location().empty()) {
      w.put("      # location: ");
      w.put(node.location());
      w.put('\n');
    }
  }
  w.put("  Return(");
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    if (i > 0) w.put(", ");
    namer.put(w, graph.outputs()[i]);
    if (!graph.output_name(i).empty()) {
      w.put(" as ");
      put_quoted(w, graph.output_name(i));
    }
  }
  w.put(")\n}\n");
}

size_t count_graphs(const Graph& graph) {
  size_t n = 1;
  for (const Graph* g : graph.subgraphs()) n += count_graphs(*g);
  return n;
}

void print_nested(Writer& w, const Graph& graph, const std::string& prefix,
                  const PrintOptions& options) {
  for (const Graph* sub : graph.subgraphs()) {
    const std::string path = prefix.empty() ? sub->name() : prefix + "/" + sub->name();
    w.put('\n');
    print_block(w, *sub, path, options);
    print_nested(w, *sub, path, options);
  }
}

}  // namespace

std::string format_float(double value) {
  return to_text([&](Writer& w) { put_float(w, value); });
}

std::string quote_string(std::string_view text) {
  return to_text([&](Writer& w) { put_quoted(w, text); });
}

std::string format_attr_value(const AttrValue& value) {
  return to_text([&](Writer& w) { put_attr_value(w, value); });
}

void print_graph(TextSink& out, const Graph& graph, PrintOptions options) {
  Writer w(out);
  w.put("# IR entry: @");
  w.put(graph.name());
  w.put("\n# Total subgraphs: ");
  w.put_number(count_graphs(graph));
  w.put("\n\n");
  print_block(w, graph, graph.name(), options);
  print_nested(w, graph, "", options);
  w.flush();
}

void print_graph(std::ostream& out, const Graph& graph, PrintOptions options) {
  StreamSink sink(out);
  print_graph(sink, graph, options);
}

std::string print_graph(const Graph& graph, PrintOptions options) {
  std::string out;
  StringSink sink(out);
  print_graph(sink, graph, options);
  return out;
}

void write_graph_file(const Graph& graph, const std::string& path, PrintOptions options) {
  // Atomic (a unique temporary renamed in place), every write checked.
  write_file_atomically(path, print_graph(graph, options),
                        "the IR of graph @" + graph.name() + " to");
}

std::string describe_node(const Graph& graph, const Node& node) {
  const ValueNamer namer(graph);
  return to_text([&](Writer& w) {
    namer.put_node(w, node);
    w.put(" = ");
    w.put(node.op());
    w.put('(');
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      if (i > 0) w.put(", ");
      namer.put(w, node.input(i));
    }
    w.put(')');
  });
}

}  // namespace mf::ir
