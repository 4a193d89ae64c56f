#pragma once
// The protobuf form of an ir::Graph (proto/ir.proto) and its canonical text for cache keys.
// serialize/deserialize are exact: print(deserialize(serialize(g)), kFull) == print(g, kFull).
// Values are stored by position, so the bytes carry no pointers and no node ids.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace mf::proto {
class IrGraph;
class IrTensorType;
}  // namespace mf::proto

namespace mf::ir {

// The graph as protobuf bytes (deterministic: equal graphs give equal bytes).
std::string serialize_graph(const Graph& graph);
// Rebuilds a graph from serialize_graph's bytes. Bytes that do not parse, or that describe an
// impossible graph (a reference out of range, a cycle, a bad name or constant size), fail with
// DataLoss and never crash. Ops are not re-inferred: output types come from the bytes, so callers
// that do not trust the bytes run ir::verify afterwards.
std::unique_ptr<Graph> deserialize_graph(std::string_view bytes);

// The same, to and from a message embedded in a larger one (the compile cache's entries).
void graph_to_proto(const Graph& graph, proto::IrGraph& out);
std::unique_ptr<Graph> graph_from_proto(const proto::IrGraph& message);
void type_to_proto(const TensorType& type, proto::IrTensorType& out);
TensorType type_from_proto(const proto::IrTensorType& message);  // DataLoss on a bad dtype or dim

// The canonical form for cache keys: ops, attributes (all of them), types, constants (exact
// values), parameter and subgraph names, scopes and structure, with nodes numbered by position, so
// node ids and source locations do not matter. Two graphs with equal canonical forms compile alike.
std::string canonical_form(const Graph& graph);

// A 128-bit hash of a byte sequence, fed in pieces: two independent 64-bit lanes over 8-byte
// little-endian words, each word through a multiply-xorshift mixer. Equal bytes give equal digests
// in every process and build, however they are split into pieces. It keys caches and detects
// damage; it is not cryptographic.
struct Digest {
  std::uint64_t high = 0, low = 0;
  std::uint64_t bytes = 0;  // how many bytes were hashed
  bool operator==(const Digest&) const = default;
  std::string hex() const;  // 32 lowercase hex digits, high lane first
};
class Hasher {
 public:
  void update(std::string_view bytes);
  Digest finish() const;  // the digest of everything so far; update may go on afterwards

 private:
  std::uint64_t high_ = 0x6a09e667f3bcc908ULL, low_ = 0xbb67ae8584caa73bULL;
  std::uint64_t bytes_ = 0;
  unsigned char pending_[8] = {};  // the last bytes_ % 8 bytes, not yet a whole word
};
Digest digest_of(std::string_view bytes);

// digest_of(canonical_form(graph)), without building the text: the printer's pieces go straight
// into the hash. This is what cache keys use; it is the canonical form by construction.
Digest canonical_digest(const Graph& graph);

}  // namespace mf::ir
