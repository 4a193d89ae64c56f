#pragma once
// The compile cache's key, internal part: what the rest of the cache shares with make_cache_key
// (declared with CacheKey in compile_cache.h, defined in cache_key.cc with the process-wide
// settings and the build identity the key hashes).

#include <cstdint>
#include <string>

namespace mf::engine::detail {

// 16 lowercase hex digits, most significant first: a key's file name, a checksum in a message.
std::string hex64(std::uint64_t value);

}  // namespace mf::engine::detail
