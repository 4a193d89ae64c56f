// Compile-cache entries. An entry's payload is guarded by a checksum, so random damage is caught
// there (and the whole entry is fed to parse_entry to show it). Behind the checksum, load() trusts
// the payload's structure only as far as graph_from_proto and plan_from_payload check it; this
// target therefore also decodes the bytes after a well-formed header without the checksum, the way
// a deliberately forged entry would reach them: any payload decodes into a graph and a plan proven
// safe for it, or is refused with an error.

#include <google/protobuf/arena.h>

#include "compile_cache.pb.h"
#include "engine/compile_cache/entry_file.h"
#include "engine/compile_cache/plan_codec.h"
#include "fuzz/fuzz_support.h"
#include "ir/serialize.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  using namespace mf::engine::detail;
  const std::string_view bytes = fuzz::as_text(data, size);
  fuzz::accepts([&] {
    proto::CacheEntryHeader header;
    proto::CacheEntryPayload payload;
    parse_entry(bytes, header, payload);
  });
  size_t offset = 0;
  proto::CacheEntryHeader header;
  if (!fuzz::accepts([&] { parse_header(bytes, header, &offset); })) return 0;
  fuzz::accepts([&] {
    google::protobuf::Arena arena(arena_for(bytes.size() - offset));
    auto& payload = *google::protobuf::Arena::CreateMessage<proto::CacheEntryPayload>(&arena);
    parse_payload(bytes.substr(offset), payload);
    const auto graph = ir::graph_from_proto(payload.graph());
    (void)plan_from_payload(payload, *graph);
  });
  return 0;
}
