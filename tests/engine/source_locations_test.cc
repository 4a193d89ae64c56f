// engine/compile_cache/source_locations.h: a stored entry refers to the trace for its nodes'
// locations, and a reference that does not fit the graph or the trace is refused, not followed.

#include "engine/compile_cache/source_locations.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "compile_cache.pb.h"

namespace mf::engine {
namespace {

proto::CacheEntryPayload payload_with(std::vector<std::string> node_locations,
                                      std::vector<std::string> sub_locations = {}) {
  proto::CacheEntryPayload payload;
  for (const std::string& location : node_locations) {
    payload.mutable_graph()->add_nodes()->set_location(location);
  }
  if (!sub_locations.empty()) {
    proto::IrGraph* sub = payload.mutable_graph()->add_subgraphs();
    for (const std::string& location : sub_locations) sub->add_nodes()->set_location(location);
  }
  return payload;
}

std::vector<std::string> stored_locations(const proto::CacheEntryPayload& payload) {
  std::vector<std::string> out;
  for (const auto& node : payload.graph().nodes()) out.push_back(node.location());
  for (const auto& sub : payload.graph().subgraphs()) {
    for (const auto& node : sub.nodes()) out.push_back(node.location());
  }
  return out;
}

TEST(SourceLocationsTest, NodesReferToTheFirstTracedNodeWithTheirLocation) {
  const std::vector<std::string> traced = {"a.cc:1", "", "a.cc:2", "a.cc:1"};
  proto::CacheEntryPayload payload = payload_with({"a.cc:2", "", "pass-made"}, {"a.cc:1"});
  unbind_locations(traced, payload);
  EXPECT_EQ(std::vector<uint32_t>(payload.location_refs().begin(), payload.location_refs().end()),
            (std::vector<uint32_t>{3, 0, 0, 1}));
  EXPECT_EQ(stored_locations(payload), (std::vector<std::string>{"", "", "pass-made", ""}));

  rebind_locations({"b.cc:10", "", "b.cc:20", "b.cc:10"}, payload);
  EXPECT_EQ(stored_locations(payload),
            (std::vector<std::string>{"b.cc:20", "", "pass-made", "b.cc:10"}));
}

TEST(SourceLocationsTest, ReferencesThatDoNotFitAreDataLoss) {
  proto::CacheEntryPayload beyond = payload_with({"", ""});
  beyond.add_location_refs(1);
  beyond.add_location_refs(9);
  try {
    rebind_locations({"a.cc:1", "a.cc:2"}, beyond);
    FAIL() << "a reference beyond the trace was followed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDataLoss);
    EXPECT_NE(e.message().find("location reference 9 is beyond the trace's 2 nodes"),
              std::string::npos)
        << e.message();
  }
  for (int refs : {1, 3}) {
    proto::CacheEntryPayload miscounted = payload_with({"", ""});
    for (int i = 0; i < refs; ++i) miscounted.add_location_refs(0);
    try {
      rebind_locations({"a.cc:1"}, miscounted);
      FAIL() << refs << " references for 2 nodes were accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDataLoss);
      EXPECT_NE(e.message().find("location references"), std::string::npos) << e.message();
    }
  }
}

}  // namespace
}  // namespace mf::engine
