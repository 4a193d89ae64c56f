#pragma once
// The protobuf form of an ir::Graph (proto/ir.proto) and its canonical text for cache keys.
// serialize/deserialize are exact: print(deserialize(serialize(g)), kFull) == print(g, kFull).
// Values are stored by position, so the bytes carry no pointers and no node ids.

#include <cstddef>
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
// little-endian words, each word through a multiply-xorshift mixer. Each lane runs four chains,
// word i going to chain i % 4, so the mixers of four words overlap in the CPU (a chain is a
// sequence of dependent multiplies); the chains are folded in order at the end, then the length.
// Equal bytes give equal digests in every process and build, however they are split into pieces.
// It keys caches and detects damage; it is not cryptographic.
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
  static constexpr std::size_t kBlock = 32;  // one 8-byte word for each of the four chains
  std::uint64_t high_[4] = {0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
                            0xa54ff53a5f1d36f1ULL};
  std::uint64_t low_[4] = {0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL,
                           0x5be0cd19137e2179ULL};
  std::uint64_t bytes_ = 0;
  unsigned char pending_[kBlock] = {};  // the last bytes_ % kBlock bytes, not yet a whole block
};
Digest digest_of(std::string_view bytes);

// digest_of(canonical_form(graph)), without building the text: the printer's pieces go straight
// into the hash. This is what cache keys use; it is the canonical form by construction.
Digest canonical_digest(const Graph& graph);

}  // namespace mf::ir
