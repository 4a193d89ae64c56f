#pragma once
// One compile-cache entry as a file: an envelope (8 magic bytes, the header's length as 4 bytes
// little-endian), a CacheEntryHeader (format, key components, payload size and checksum) and the
// CacheEntryPayload (proto/compile_cache.proto). Reading checks each part before trusting it
// (DataLoss naming the damage); writing goes through a temporary file of the writer's own, renamed
// over the entry. What the payload holds is the glue's business (compile_cache.cc, plan_codec.h).

#include <google/protobuf/arena.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/compile_cache/compile_cache.h"

namespace mf::proto {
class CacheEntryHeader;  // compile_cache.proto; the generated header stays out of engine headers
class CacheEntryPayload;
}  // namespace mf::proto

namespace mf::engine::detail {

inline constexpr char kMagic[8] = {'M', 'F', 'C', 'C', 'A', 'C', 'H', 'E'};
inline constexpr size_t kEnvelopeBytes = sizeof(kMagic) + 4;
inline constexpr std::string_view kHeaderMagic = "modeflow-compile-cache";
// A larger length is damage, not a header.
inline constexpr std::uint32_t kMaxHeaderBytes = 16u << 20;
// Writers' temporaries are named so: never entries, removed by clear() and, when stale, evict().
inline constexpr std::string_view kTempPrefix = ".tmp-";

// An entry larger than this is damage (or not ours): 16 GiB.
inline constexpr std::uint64_t kMaxEntryFileBytes = std::uint64_t{16} << 30;

// The whole file in one read, without touching its access time. *found is false when it cannot be
// opened (never stored, or deleted meanwhile); a read error reads as a truncated entry. Never
// blocks: DataLoss "the entry is not a regular file" for a FIFO, a device or a socket, and for a
// file larger than kMaxEntryFileBytes.
std::string read_file(const char* path, bool* found);

// At most the envelope and the header of the entry at `path` (a listing must stay cheap for a large
// cache): what parse_header needs. nullopt when the file cannot be opened.
std::optional<std::string> read_header_bytes(const std::filesystem::path& path);

inline std::uint32_t read_le32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Reads the header of an entry's bytes (which may be only the first part of the file) into
// `header`. DataLoss on anything but a well-formed header.
void parse_header(std::string_view bytes, proto::CacheEntryHeader& header, size_t* payload_offset);
proto::CacheEntryHeader parse_header(std::string_view bytes);

// The payload bytes that follow the header at `offset`; DataLoss unless their size and checksum
// are the ones the header states.
std::string_view checked_payload(std::string_view bytes, size_t offset,
                                 const proto::CacheEntryHeader& header);
void parse_payload(std::string_view stored, proto::CacheEntryPayload& payload);
// The header and the checksummed payload of a whole entry file.
void parse_entry(std::string_view bytes, proto::CacheEntryHeader& header,
                 proto::CacheEntryPayload& payload);

// Arena options whose first block fits the messages parsed from `wire_bytes` bytes.
google::protobuf::ArenaOptions arena_for(size_t wire_bytes);

// The header's components are exactly the key's, in order.
bool same_components(const proto::CacheEntryHeader& header, const CacheKey& key);
std::vector<std::pair<std::string, std::string>> components_of(
    const proto::CacheEntryHeader& header);

// A whole entry file: envelope, the header for `key` (stamped now, with compile_ms), the payload.
std::string entry_bytes(const CacheKey& key, const std::string& payload_bytes, double compile_ms);

// Writes `bytes` to `entry` atomically: into a temporary of this writer's own in `dir` (created if
// missing), then renamed over the entry. Returns "" on success, else why it failed (the temporary
// is removed).
std::string write_entry_atomically(const std::filesystem::path& dir, const std::string& key_hex,
                                   const std::filesystem::path& entry, std::string_view bytes);

}  // namespace mf::engine::detail
