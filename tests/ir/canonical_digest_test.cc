// ir::canonical_digest, the compile cache's graph key: it is the digest of ir::canonical_form's
// text (the printer's pieces are hashed as they are written, no second definition), so it sees
// every difference the text sees (ops, attributes, constants, types, names, scopes, structure,
// subgraphs) and ignores what the text ignores (node ids, source locations). ir::Hasher gives the
// same digest however its input is split into pieces.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/serialize.h"

namespace mf::ir {
namespace {

TEST(IrHasher, SameDigestHoweverTheBytesArrive) {
  std::mt19937_64 rng(7);
  for (size_t length :
       {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 95, 96, 97, 1000, 4096, 4097, 10000}) {
    std::string bytes(length, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const Digest whole = digest_of(bytes);
    EXPECT_EQ(whole.bytes, length);
    for (int trial = 0; trial < 20; ++trial) {
      Hasher hasher;
      size_t at = 0;
      while (at < length) {
        const size_t piece = std::min<size_t>(length - at, rng() % 20);
        hasher.update(std::string_view(bytes).substr(at, piece));
        at += piece;
      }
      EXPECT_EQ(hasher.finish(), whole) << "length " << length << ", trial " << trial;
    }
  }
}

TEST(IrHasher, EveryByteAndTheLengthCount) {
  // Zero padding of the last word must not hide a length difference.
  std::set<std::string> seen;
  for (std::string s : {std::string(), std::string(1, '\0'), std::string(2, '\0'),
                        std::string(8, '\0'), std::string(9, '\0'), std::string("a"),
                        std::string("a\0", 2), std::string("ab"), std::string("ba")}) {
    EXPECT_TRUE(seen.insert(digest_of(s).hex()).second) << "collision for length " << s.size();
  }
  // A single flipped bit anywhere changes both 64-bit lanes.
  std::string bytes(300, 'x');
  const Digest base = digest_of(bytes);
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      const Digest d = digest_of(flipped);
      ASSERT_NE(d.high, base.high) << "byte " << i << " bit " << bit;
      ASSERT_NE(d.low, base.low) << "byte " << i << " bit " << bit;
    }
  }
  EXPECT_EQ(base.hex().size(), 32u);
}

// Words go to four chains per lane (word i to chain i % 4): moving a word to another position,
// within a 32-byte block or across blocks, must change the digest, so the chains may not be
// combined in an order-blind way.
TEST(IrHasher, WordsInOtherPositionsGiveOtherDigests) {
  std::mt19937_64 rng(11);
  std::string bytes(128, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  const Digest base = digest_of(bytes);
  for (size_t a = 0; a < bytes.size() / 8; ++a) {
    for (size_t b = a + 1; b < bytes.size() / 8; ++b) {
      std::string swapped = bytes;
      std::swap_ranges(swapped.begin() + 8 * a, swapped.begin() + 8 * a + 8,
                       swapped.begin() + 8 * b);
      const Digest d = digest_of(swapped);
      ASSERT_NE(d.high, base.high) << "words " << a << " and " << b;
      ASSERT_NE(d.low, base.low) << "words " << a << " and " << b;
    }
  }
  // The same 32 bytes in each of the four chains' positions, with zeros elsewhere.
  std::set<std::string> seen;
  for (size_t shift = 0; shift < 4; ++shift) {
    std::string moved(96, '\0');
    std::copy(bytes.begin(), bytes.begin() + 32, moved.begin() + 8 * shift);
    EXPECT_TRUE(seen.insert(digest_of(moved).hex()).second) << "shift " << shift;
  }
}

// What one graph below differs in from the base graph.
enum class Change {
  kNone,
  kLocations,  // not in the canonical form
  kNodeIds,    // not in the canonical form
  kGraphName,
  kParameterName,
  kParameterShape,
  kParameterDtype,
  kWeightFlag,
  kConstantValue,
  kConstantDtype,
  kAttributeValue,
  kStringAttribute,
  kOp,
  kOperandOrder,
  kOperandSource,
  kExtraOutput,
  kScope,
  kSubgraphBody,
  kSubgraphConstant,
  kLongScope,  // a scope longer than the printer's buffer, written as one piece
};

// main(x, w): sum over `axes` of add(x, c) * w, and call(@body) on the product; @body negates.
std::unique_ptr<Graph> build(Change change) {
  auto g = std::make_unique<Graph>(change == Change::kGraphName ? "other" : "main");
  const Shape shape = change == Change::kParameterShape ? Shape{2, 4} : Shape{2, 3};
  const DType dtype = change == Change::kParameterDtype ? DType::kFloat64 : DType::kFloat32;
  Parameter* x = g->add_parameter(change == Change::kParameterName ? "y" : "x", {dtype, shape});
  Parameter* w =
      g->add_parameter("fc.weight", {dtype, shape}, /*is_weight=*/change != Change::kWeightFlag);
  if (change == Change::kNodeIds) g->erase_node(g->add_node("neg", {x}));
  Constant* c = nullptr;
  if (change == Change::kConstantDtype) {
    c = g->add_constant<double>({}, {1.5});
  } else {
    c = g->add_constant<float>({}, {change == Change::kConstantValue ? 1.5000001f : 1.5f});
  }
  Value cx = dtype == DType::kFloat64 || change == Change::kConstantDtype
                 ? Value(g->add_node("cast", {c}, {{"dtype", dtype}}))
                 : Value(c);
  const std::string location = change == Change::kLocations ? "elsewhere.cc:1" : "main.cc:10";
  const std::string scope = change == Change::kScope ? "Default/net-Other" : "Default/net-Net";
  Node* sum = change == Change::kOperandOrder ? g->add_node("add", {cx, x}, {}, {scope, location})
                                              : g->add_node("add", {x, cx}, {}, {scope, location});
  Node* product = g->add_node(change == Change::kOp ? "sub" : "mul",
                              {sum, change == Change::kOperandSource ? Value(x) : Value(w)}, {},
                              {scope, location});
  Attrs reduce_attrs{{"axes", std::vector<int64_t>{change == Change::kAttributeValue ? 0 : 1}},
                     {"keep_dims", false}};
  Node* reduced = g->add_node("reduce_sum", {product}, std::move(reduce_attrs), {scope, location});

  Graph* body = g->add_subgraph("body");
  Parameter* bx = body->add_parameter("x", {dtype, shape});
  if (change == Change::kSubgraphConstant) {
    Constant* two = body->add_constant<float>({}, {2.0f});
    Value t = dtype == DType::kFloat64 ? Value(body->add_node("cast", {two}, {{"dtype", dtype}}))
                                       : Value(two);
    body->add_output(body->add_node("mul", {bx, t}));
  } else {
    body->add_output(body->add_node(change == Change::kSubgraphBody ? "abs" : "neg", {bx}));
  }
  Graph* other = g->add_subgraph("other_body");
  Parameter* ox = other->add_parameter("x", {dtype, shape});
  other->add_output(other->add_node("neg", {ox}));
  Attrs call_attrs{
      {"graph", std::string(change == Change::kStringAttribute ? "other_body" : "body")}};
  Node* call = g->create_node(nullptr, "call", {product}, std::move(call_attrs), {{dtype, shape}},
                              {scope, location});
  if (change == Change::kLongScope) {
    call->set_info({std::string(10000, 's'), location});
  }
  g->add_output(reduced);
  g->add_output(call);
  if (change == Change::kExtraOutput) g->add_output(sum);
  return g;
}

const std::map<Change, const char*> kChanges = {
    {Change::kLocations, "locations"},
    {Change::kNodeIds, "node ids"},
    {Change::kGraphName, "graph name"},
    {Change::kParameterName, "parameter name"},
    {Change::kParameterShape, "parameter shape"},
    {Change::kParameterDtype, "parameter dtype"},
    {Change::kWeightFlag, "weight flag"},
    {Change::kConstantValue, "constant value"},
    {Change::kConstantDtype, "constant dtype"},
    {Change::kAttributeValue, "attribute value"},
    {Change::kStringAttribute, "string attribute"},
    {Change::kOp, "op name"},
    {Change::kOperandOrder, "operand order"},
    {Change::kOperandSource, "operand source"},
    {Change::kExtraOutput, "extra output"},
    {Change::kScope, "scope"},
    {Change::kSubgraphBody, "subgraph body"},
    {Change::kSubgraphConstant, "subgraph constant"},
    {Change::kLongScope, "long scope"},
};

TEST(CanonicalDigest, IsTheDigestOfTheCanonicalText) {
  for (const auto& [change, name] : kChanges) {
    auto g = build(change);
    EXPECT_EQ(canonical_digest(*g), digest_of(canonical_form(*g))) << name;
    EXPECT_EQ(canonical_digest(*g).bytes, canonical_form(*g).size()) << name;
  }
  const Graph empty("empty");
  EXPECT_EQ(canonical_digest(empty), digest_of(canonical_form(empty)));
}

TEST(CanonicalDigest, DistinguishesWhatTheTextDistinguishes) {
  const auto base = build(Change::kNone);
  const std::string base_text = canonical_form(*base);
  const Digest base_digest = canonical_digest(*base);
  std::map<std::string, const char*> digests{{base_digest.hex(), "base"}};
  for (const auto& [change, name] : kChanges) {
    auto g = build(change);
    const bool ignored = change == Change::kLocations || change == Change::kNodeIds;
    EXPECT_EQ(canonical_form(*g) == base_text, ignored) << name;
    EXPECT_EQ(canonical_digest(*g) == base_digest, ignored) << name;
    if (!ignored) {
      const auto [it, fresh] = digests.emplace(canonical_digest(*g).hex(), name);
      EXPECT_TRUE(fresh) << name << " has the digest of " << it->second;
    }
  }
}

// print_graph to a sink writes exactly the text print_graph returns, in order.
TEST(CanonicalDigest, SinkReceivesThePrintedText) {
  struct Collect final : TextSink {
    void append(std::string_view text) override {
      out.append(text);
      ++pieces;
    }
    std::string out;
    int pieces = 0;
  };
  for (Detail detail : {Detail::kCompact, Detail::kNormal, Detail::kFull}) {
    auto g = build(Change::kLongScope);
    Collect sink;
    print_graph(sink, *g, PrintOptions{detail});
    EXPECT_EQ(sink.out, print_graph(*g, PrintOptions{detail}));
    EXPECT_GT(sink.pieces, 1);  // the long scope goes in a piece of its own
  }
}

}  // namespace
}  // namespace mf::ir
