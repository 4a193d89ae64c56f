// The entry file: envelope, header, checksummed payload; whole-file and header-only reads; the
// atomic write.

#include "engine/compile_cache/entry_file.h"

#include <google/protobuf/stubs/logging.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <system_error>

#include "base/error.h"
#include "compile_cache.pb.h"
#include "engine/compile_cache/cache_key.h"
#include "ir/serialize.h"

namespace mf::engine::detail {
namespace fs = std::filesystem;

namespace {

std::string envelope(std::uint32_t header_bytes) {
  std::string out(kMagic, sizeof(kMagic));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((header_bytes >> (8 * i)) & 0xff));
  return out;
}

// The payload's checksum: the high half of the 128-bit digest the key uses (four independent
// chains of 8-byte words, several times the speed of a byte-at-a-time hash).
std::uint64_t payload_checksum(std::string_view payload) {
  ir::Hasher hasher;
  hasher.update(payload);
  return hasher.finish().high;
}

}  // namespace

// The whole file in one read (a hit reads its entry once; no stream buffering or copying). Without
// updating its access time, which nothing here uses (the last use is the modification time): on a
// file just written, relatime would make the first read write the inode, doubling the read's cost.
// O_NOATIME needs the file's owner; anyone else reads it the ordinary way.
std::string read_file(const char* path, bool* found) {
  *found = false;
  // O_NONBLOCK: an entry that is a FIFO opens at once instead of waiting for a writer.
  int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOATIME | O_NONBLOCK);
  if (fd < 0 && errno == EPERM) fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return {};
  *found = true;
  std::string bytes;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) > kMaxEntryFileBytes) {
    // A FIFO or a device (/dev/zero) would block or never end; a huge file is not ours.
    const bool regular = S_ISREG(st.st_mode);
    ::close(fd);
    MF_FAIL(DataLoss, regular ? "the entry is larger than " : "the entry is not a regular file",
            regular ? std::to_string(kMaxEntryFileBytes) + " bytes" : std::string());
  }
  // One byte more than the size, so the read that sees the end needs no growth.
  bytes.resize(static_cast<size_t>(st.st_size) + 1);
  size_t size = 0;
  for (;;) {
    // Bounded: a file growing while it is read stops at the cap.
    if (size > kMaxEntryFileBytes) break;
    if (size == bytes.size()) bytes.resize(std::max<size_t>(4096, bytes.size() * 2));
    const ssize_t got = ::read(fd, bytes.data() + size, bytes.size() - size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // end of file; a read error reads as a truncated entry
    size += static_cast<size_t>(got);
  }
  ::close(fd);
  bytes.resize(size);
  return bytes;
}

std::optional<std::string> read_header_bytes(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;  // a FIFO would block the stream
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return std::nullopt;
  char head[kEnvelopeBytes];
  in.read(head, kEnvelopeBytes);
  std::string bytes(head, static_cast<size_t>(in.gcount()));
  if (bytes.size() == kEnvelopeBytes && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0) {
    const std::uint32_t length = read_le32(head + sizeof(kMagic));
    if (length <= kMaxHeaderBytes) {
      std::string header(length, '\0');
      in.read(header.data(), length);
      header.resize(static_cast<size_t>(in.gcount()));
      bytes += header;
    }
  }
  return bytes;
}

// Reads the header of an entry's bytes (which may be only the first part of the file) into
// `header`. DataLoss on anything but a well-formed header.
void parse_header(std::string_view bytes, proto::CacheEntryHeader& header, size_t* payload_offset) {
  MF_CHECK(bytes.size() >= kEnvelopeBytes, DataLoss, "truncated: ", bytes.size(),
           " bytes, shorter than the envelope");
  MF_CHECK(std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0, DataLoss,
           "not a compile-cache entry (bad magic)");
  const std::uint32_t length = read_le32(bytes.data() + sizeof(kMagic));
  MF_CHECK(length <= kMaxHeaderBytes && kEnvelopeBytes + length <= bytes.size(), DataLoss,
           "truncated: the header claims ", length, " bytes, the file has ",
           bytes.size() - kEnvelopeBytes);
  const google::protobuf::LogSilencer quiet;  // damage is reported once, as DataLoss
  MF_CHECK(header.ParseFromArray(bytes.data() + kEnvelopeBytes, static_cast<int>(length)), DataLoss,
           "the header does not parse");
  MF_CHECK(header.format().magic() == kHeaderMagic, DataLoss, "the header is not a modeflow ",
           "compile-cache header");
  MF_CHECK(header.format().format_version() == kCompileCacheFormatVersion, DataLoss,
           "format version ", header.format().format_version(), ", this engine reads ",
           kCompileCacheFormatVersion);
  MF_CHECK(header.format().engine_version() == compile_cache_engine_version(), DataLoss,
           "written by engine version ", header.format().engine_version(), ", this is ",
           compile_cache_engine_version());
  *payload_offset = kEnvelopeBytes + length;
}

proto::CacheEntryHeader parse_header(std::string_view bytes) {
  proto::CacheEntryHeader header;
  size_t offset = 0;
  parse_header(bytes, header, &offset);
  return header;
}

// The payload bytes that follow the header at `offset`; DataLoss unless their size and checksum
// are the ones the header states.
std::string_view checked_payload(std::string_view bytes, size_t offset,
                                 const proto::CacheEntryHeader& header) {
  const std::string_view stored = bytes.substr(offset);
  MF_CHECK(stored.size() == header.payload_bytes(), DataLoss, "truncated or padded: the payload ",
           "has ", stored.size(), " bytes, the header says ", header.payload_bytes());
  const std::uint64_t checksum = payload_checksum(stored);
  MF_CHECK(checksum == header.payload_checksum(), DataLoss, "checksum mismatch: payload ",
           hex64(checksum), ", header ", hex64(header.payload_checksum()));
  return stored;
}

void parse_payload(std::string_view stored, proto::CacheEntryPayload& payload) {
  const google::protobuf::LogSilencer quiet;  // damage is reported once, as DataLoss
  MF_CHECK(payload.ParseFromArray(stored.data(), static_cast<int>(stored.size())), DataLoss,
           "the payload does not parse");
}

// The header and the checksummed payload of a whole entry file.
void parse_entry(std::string_view bytes, proto::CacheEntryHeader& header,
                 proto::CacheEntryPayload& payload) {
  size_t offset = 0;
  parse_header(bytes, header, &offset);
  parse_payload(checked_payload(bytes, offset, header), payload);
}

// Parsing allocates hundreds of small strings and submessages; an arena whose first block fits
// them all frees them at once. Protobuf's objects take up to about 4.5 times their wire size.
google::protobuf::ArenaOptions arena_for(size_t wire_bytes) {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 5 * wire_bytes + 4096;
  return options;
}

// The header's components are exactly the key's, in order.
bool same_components(const proto::CacheEntryHeader& header, const CacheKey& key) {
  if (static_cast<size_t>(header.components_size()) != key.components.size()) return false;
  for (size_t i = 0; i < key.components.size(); ++i) {
    const proto::CacheKeyComponent& c = header.components(static_cast<int>(i));
    if (c.name() != key.components[i].first || c.value() != key.components[i].second) return false;
  }
  return true;
}

std::vector<std::pair<std::string, std::string>> components_of(
    const proto::CacheEntryHeader& header) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& c : header.components()) out.emplace_back(c.name(), c.value());
  return out;
}

std::string entry_bytes(const CacheKey& key, const std::string& payload_bytes, double compile_ms) {
  proto::CacheEntryHeader header;
  header.mutable_format()->set_magic(std::string(kHeaderMagic));
  header.mutable_format()->set_format_version(kCompileCacheFormatVersion);
  header.mutable_format()->set_engine_version(compile_cache_engine_version());
  header.set_key(key.hex);
  for (const auto& [name, value] : key.components) {
    auto* c = header.add_components();
    c->set_name(name);
    c->set_value(value);
  }
  header.set_summary(key.summary);
  header.set_payload_bytes(payload_bytes.size());
  header.set_payload_checksum(payload_checksum(payload_bytes));
  header.set_created_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
  header.set_compile_ms(compile_ms);
  const std::string header_bytes = header.SerializeAsString();
  return envelope(static_cast<std::uint32_t>(header_bytes.size())) + header_bytes + payload_bytes;
}

std::string write_entry_atomically(const fs::path& dir, const std::string& key_hex,
                                   const fs::path& entry, std::string_view bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ec.message();
  // A private temporary per writer, renamed over the entry: readers see the old file or the new
  // one, never a mix, and two writers of one key both succeed (the last rename wins, both are
  // good).
  static std::atomic<unsigned> counter{0};
  const fs::path temp =
      dir / (std::string(kTempPrefix) + key_hex + "-" + std::to_string(::getpid()) + "-" +
             std::to_string(++counter) + std::string(kCompileCacheExtension));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out.good()) return "cannot create " + temp.filename().string();
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out.good()) {
      out.close();
      fs::remove(temp, ec);
      return "writing " + temp.filename().string() + " failed";
    }
  }
  fs::rename(temp, entry, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(temp, ec);
    return "renaming into place failed: " + why;
  }
  return {};
}

}  // namespace mf::engine::detail
