#include "ir/serialize.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "ir.pb.h"
#include "ir/printer.h"

namespace mf::ir {
namespace {

void value_to_proto(const Value& value, const std::unordered_map<const Node*, size_t>& positions,
                    proto::IrValueRef& out) {
  switch (value.kind()) {
    case ValueKind::kParameter:
      out.set_kind(proto::IrValueRef::PARAMETER);
      out.set_index(value.parameter()->index());
      return;
    case ValueKind::kConstant:
      out.set_kind(proto::IrValueRef::CONSTANT);
      out.set_index(value.constant()->index());
      return;
    case ValueKind::kNode: {
      auto it = positions.find(value.node());
      MF_CHECK(it != positions.end(), Internal, "cannot serialize a graph with a dangling operand");
      out.set_kind(proto::IrValueRef::NODE);
      out.set_index(it->second);
      out.set_output(value.index());
      return;
    }
    case ValueKind::kNone:
      break;
  }
  MF_FAIL(Internal, "cannot serialize a null value");
}

void attr_to_proto(const std::string& name, const AttrValue& value, proto::IrAttr& out) {
  out.set_name(name);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          out.set_b(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out.set_i(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out.set_f(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.set_s(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          auto* ints = out.mutable_ints();  // set even when empty: [] is a value
          for (int64_t x : v) ints->add_values(x);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          auto* floats = out.mutable_floats();
          for (double x : v) floats->add_values(x);
        } else {
          out.set_dtype(static_cast<uint32_t>(v));
        }
      },
      value);
}

DType dtype_from(uint32_t raw) {
  for (DType d : kAllDTypes) {
    if (static_cast<uint32_t>(d) == raw) return d;
  }
  MF_FAIL(DataLoss, "unknown dtype code ", raw);
}

AttrValue attr_from_proto(const proto::IrAttr& attr) {
  switch (attr.value_case()) {
    case proto::IrAttr::kB:
      return attr.b();
    case proto::IrAttr::kI:
      return static_cast<int64_t>(attr.i());
    case proto::IrAttr::kF:
      return attr.f();
    case proto::IrAttr::kS:
      return attr.s();
    case proto::IrAttr::kInts:
      return std::vector<int64_t>(attr.ints().values().begin(), attr.ints().values().end());
    case proto::IrAttr::kFloats:
      return std::vector<double>(attr.floats().values().begin(), attr.floats().values().end());
    case proto::IrAttr::kDtype:
      return dtype_from(attr.dtype());
    case proto::IrAttr::VALUE_NOT_SET:
      break;
  }
  MF_FAIL(DataLoss, "attribute '", attr.name(), "' has no value");
}

// Rebuilds one graph (and, recursively, its subgraphs) into `target`.
void fill_graph(const proto::IrGraph& message, Graph& target) {
  for (const auto& p : message.parameters()) {
    target.add_parameter(p.name(), type_from_proto(p.type()), p.is_weight());
  }
  for (const auto& c : message.constants()) {
    target.add_constant(type_from_proto(c.type()),
                        std::vector<uint8_t>(c.data().begin(), c.data().end()));
  }
  const size_t n = static_cast<size_t>(message.nodes_size());
  std::vector<Node*> created(n, nullptr);
  // `node` is the user's position, or n for a graph output; the message is built only on failure.
  auto resolve = [&](const proto::IrValueRef& ref, size_t node) -> Value {
    auto what = [&] {
      return node < n ? detail::str_cat("an input of node ", node) : std::string("a graph output");
    };
    switch (ref.kind()) {
      case proto::IrValueRef::PARAMETER:
        MF_CHECK(ref.index() < target.num_parameters(), DataLoss, what(), " names parameter ",
                 ref.index(), " of ", target.num_parameters());
        return target.parameter(ref.index());
      case proto::IrValueRef::CONSTANT:
        MF_CHECK(ref.index() < target.num_constants(), DataLoss, what(), " names constant ",
                 ref.index(), " of ", target.num_constants());
        return target.constant(ref.index());
      case proto::IrValueRef::NODE: {
        MF_CHECK(ref.index() < n && created[ref.index()] != nullptr, DataLoss, what(),
                 " names node ", ref.index(), ", which does not exist yet");
        Node* node_ptr = created[ref.index()];
        MF_CHECK(ref.output() < node_ptr->num_outputs(), DataLoss, what(), " names output ",
                 ref.output(), " of a node with ", node_ptr->num_outputs());
        return Value(node_ptr, ref.output());
      }
      default:
        break;
    }
    MF_FAIL(DataLoss, what(), " is not a value");
  };
  auto create = [&](size_t i) {
    const proto::IrNode& node = message.nodes(static_cast<int>(i));
    std::vector<Value> inputs;
    inputs.reserve(static_cast<size_t>(node.inputs_size()));
    for (const auto& ref : node.inputs()) inputs.push_back(resolve(ref, i));
    Attrs attrs;
    // Stored in name order, so each goes at the end: the hint makes the insert constant time.
    for (const auto& attr : node.attrs())
      attrs.insert_or_assign(attrs.end(), attr.name(), attr_from_proto(attr));
    std::vector<TensorType> types;
    types.reserve(static_cast<size_t>(node.output_types_size()));
    for (const auto& t : node.output_types()) types.push_back(type_from_proto(t));
    created[i] = target.create_node(nullptr, node.op(), std::move(inputs), std::move(attrs),
                                    std::move(types), NodeInfo{node.scope(), node.location()});
  };
  // Nodes are created in dependency order (every operand exists first). The stored program order
  // usually is one; when a rewrite left it otherwise, the nodes are created in a topological order
  // and then moved back into the stored one.
  bool topological = true;
  for (size_t i = 0; i < n && topological; ++i) {
    for (const auto& ref : message.nodes(static_cast<int>(i)).inputs()) {
      if (ref.kind() == proto::IrValueRef::NODE && ref.index() >= i) {
        topological = false;
        break;
      }
    }
  }
  if (topological) {
    for (size_t i = 0; i < n; ++i) create(i);
  } else {
    std::vector<std::vector<size_t>> users(n);
    std::vector<size_t> pending(n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (const auto& ref : message.nodes(static_cast<int>(i)).inputs()) {
        if (ref.kind() != proto::IrValueRef::NODE) continue;
        MF_CHECK(ref.index() < n, DataLoss, "node ", i, " names node ", ref.index(), " of ", n);
        users[ref.index()].push_back(i);
        ++pending[i];
      }
    }
    std::vector<size_t> ready;
    for (size_t i = n; i-- > 0;) {
      if (pending[i] == 0) ready.push_back(i);
    }
    size_t made = 0;
    while (!ready.empty()) {
      const size_t i = ready.back();
      ready.pop_back();
      create(i);
      ++made;
      for (size_t user : users[i]) {
        if (--pending[user] == 0) ready.push_back(user);
      }
    }
    MF_CHECK(made == n, DataLoss, "the nodes of graph @", target.name(), " form a cycle");
    for (Node* node : created) target.move_node(node, nullptr);
  }
  for (const auto& ref : message.outputs()) target.add_output(resolve(ref, n));
  for (const auto& sub : message.subgraphs()) fill_graph(sub, *target.add_subgraph(sub.name()));
}

}  // namespace

void type_to_proto(const TensorType& type, proto::IrTensorType& out) {
  out.set_dtype(static_cast<uint32_t>(type.dtype));
  for (int64_t d : type.shape) out.add_shape(d);
}

TensorType type_from_proto(const proto::IrTensorType& message) {
  TensorType type;
  type.dtype = dtype_from(message.dtype());
  MF_CHECK(message.shape_size() <= kMaxRank, DataLoss, "a stored shape has rank ",
           message.shape_size(), "; at most ", kMaxRank, " axes are supported");
  type.shape.reserve(static_cast<size_t>(message.shape_size()));
  for (int64_t d : message.shape()) {
    MF_CHECK(d >= 0, DataLoss, "negative dimension ", d, " in a stored shape");
    type.shape.push_back(d);
  }
  MF_CHECK(try_num_elements(type.shape).has_value(), DataLoss, "a stored shape ",
           shape_to_string(type.shape), " has more than 2^40 elements or more than ", kMaxRank,
           " axes");
  return type;
}

void graph_to_proto(const Graph& graph, proto::IrGraph& out) {
  out.set_name(graph.name());
  for (size_t i = 0; i < graph.num_parameters(); ++i) {
    const Parameter* p = graph.parameter(i);
    auto* msg = out.add_parameters();
    msg->set_name(p->name());
    type_to_proto(p->type(), *msg->mutable_type());
    msg->set_is_weight(p->is_weight());
  }
  for (size_t i = 0; i < graph.num_constants(); ++i) {
    const Constant* c = graph.constant(i);
    auto* msg = out.add_constants();
    type_to_proto(c->type(), *msg->mutable_type());
    msg->set_data(c->bytes().data(), c->bytes().size());
  }
  std::unordered_map<const Node*, size_t> positions;
  for (const Node& node : graph.nodes()) positions.emplace(&node, positions.size());
  for (const Node& node : graph.nodes()) {
    auto* msg = out.add_nodes();
    msg->set_op(node.op());
    for (const Value& v : node.inputs()) value_to_proto(v, positions, *msg->add_inputs());
    for (const auto& [name, value] : node.attrs()) attr_to_proto(name, value, *msg->add_attrs());
    for (const TensorType& t : node.output_types()) type_to_proto(t, *msg->add_output_types());
    msg->set_scope(node.scope());
    msg->set_location(node.location());
  }
  for (const Value& v : graph.outputs()) value_to_proto(v, positions, *out.add_outputs());
  for (const Graph* sub : graph.subgraphs()) graph_to_proto(*sub, *out.add_subgraphs());
}

std::unique_ptr<Graph> graph_from_proto(const proto::IrGraph& message) {
  try {
    auto graph = std::make_unique<Graph>(message.name());
    fill_graph(message, *graph);
    return graph;
  } catch (Error& e) {
    // A graph API refusing the stored data (a bad name, a constant of the wrong size) means the
    // bytes are damaged, whatever kind the API chose.
    if (e.kind() == ErrorKind::kDataLoss) throw;
    MF_FAIL(DataLoss, "the stored graph is damaged: ", e.message());
  }
}

std::string serialize_graph(const Graph& graph) {
  proto::IrGraph message;
  graph_to_proto(graph, message);
  std::string bytes;
  MF_CHECK(message.SerializeToString(&bytes), Internal, "serializing graph @", graph.name(),
           " failed");
  return bytes;
}

std::unique_ptr<Graph> deserialize_graph(std::string_view bytes) {
  proto::IrGraph message;
  MF_CHECK(message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())), DataLoss,
           "the serialized graph (", bytes.size(), " bytes) does not parse");
  return graph_from_proto(message);
}

namespace {

// The printer numbers nodes by position and leaves locations out below Detail::kFull; kNormal
// prints every attribute, defaults included, so a changed default cannot hide.
constexpr PrintOptions kCanonical{Detail::kNormal};

// splitmix64's finalizer and murmur3's: two unrelated bijective mixers, one per lane.
std::uint64_t mix_high(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
std::uint64_t mix_low(std::uint64_t z) {
  z = (z ^ (z >> 33)) * 0xff51afd7ed558ccdULL;
  z = (z ^ (z >> 33)) * 0xc4ceb9fe1a85ec53ULL;
  return z ^ (z >> 33);
}

std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// One 8-byte word into one chain of each lane. Each lane mixes it differently (as is, and with its
// halves swapped), so the lanes are two unrelated hashes rather than one hash twice.
inline void absorb_high(std::uint64_t& high, std::uint64_t word) {
  high = mix_high(high ^ word) + 0x9e3779b97f4a7c15ULL;
}
inline void absorb_low(std::uint64_t& low, std::uint64_t word) {
  low = mix_low(low ^ ((word << 32) | (word >> 32))) + 0xd6e8feb86659fd93ULL;
}

// One 32-byte block: word k into chain k of both lanes. The eight chains are independent, so their
// multiplies overlap instead of waiting on each other.
inline void absorb_block(std::uint64_t* high, std::uint64_t* low, const unsigned char* p) {
  for (int k = 0; k < 4; ++k) {
    const std::uint64_t word = load_le64(p + 8 * k);
    absorb_high(high[k], word);
    absorb_low(low[k], word);
  }
}

class HashSink final : public TextSink {
 public:
  void append(std::string_view text) override { hasher.update(text); }
  Hasher hasher;
};

}  // namespace

std::string Digest::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(32, '0');
  std::uint64_t h = high, l = low;
  for (int i = 15; i >= 0; --i, h >>= 4, l >>= 4) {
    text[static_cast<size_t>(i)] = kDigits[h & 15];
    text[static_cast<size_t>(16 + i)] = kDigits[l & 15];
  }
  return text;
}

void Hasher::update(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  size_t have = bytes_ % kBlock;
  bytes_ += n;
  if (have > 0) {
    const size_t take = std::min(n, kBlock - have);
    std::memcpy(pending_ + have, p, take);
    p += take, n -= take, have += take;
    if (have < kBlock) return;
    absorb_block(high_, low_, pending_);
  }
  std::uint64_t high[4], low[4];  // locals, so the chains live in registers
  std::memcpy(high, high_, sizeof(high));
  std::memcpy(low, low_, sizeof(low));
  for (; n >= kBlock; p += kBlock, n -= kBlock) absorb_block(high, low, p);
  std::memcpy(high_, high, sizeof(high));
  std::memcpy(low_, low, sizeof(low));
  std::memcpy(pending_, p, n);
}

Digest Hasher::finish() const {
  // The tail block is zero-padded; the length goes in last, so "a" and "a\0" differ.
  std::uint64_t high[4], low[4];
  std::memcpy(high, high_, sizeof(high));
  std::memcpy(low, low_, sizeof(low));
  unsigned char tail[kBlock] = {};
  std::memcpy(tail, pending_, bytes_ % kBlock);
  absorb_block(high, low, tail);
  // The chains fold in order, each through the mixer, so exchanging two chains' words changes the
  // digest.
  std::uint64_t h = 0x243f6a8885a308d3ULL, l = 0x13198a2e03707344ULL;
  for (int k = 0; k < 4; ++k) {
    absorb_high(h, high[k]);
    absorb_low(l, low[k]);
  }
  return Digest{mix_high(h ^ bytes_), mix_low(l ^ (bytes_ * 0x9e3779b97f4a7c15ULL)), bytes_};
}

Digest digest_of(std::string_view bytes) {
  Hasher hasher;
  hasher.update(bytes);
  return hasher.finish();
}

std::string canonical_form(const Graph& graph) {
  return print_graph(graph, kCanonical);
}

Digest canonical_digest(const Graph& graph) {
  HashSink sink;
  print_graph(sink, graph, kCanonical);
  return sink.hasher.finish();
}

}  // namespace mf::ir
