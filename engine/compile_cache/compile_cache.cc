#include "engine/compile_cache/compile_cache.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>

#include "base/error.h"
#include "base/logging.h"
#include "compile_cache.pb.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "ir/verifier.h"
#include "passes/plan_memory.h"

#ifndef MODEFLOW_VERSION
#define MODEFLOW_VERSION "unknown"
#endif

namespace mf::engine {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'M', 'F', 'C', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kEnvelopeBytes = sizeof(kMagic) + 4;
constexpr std::string_view kHeaderMagic = "modeflow-compile-cache";
constexpr std::uint32_t kMaxHeaderBytes = 16u << 20;  // a larger length is damage, not a header
constexpr std::string_view kTempPrefix = ".tmp-";
// A temporary this old belongs to a writer that died; eviction removes it.
constexpr auto kStaleTemp = std::chrono::hours(1);

std::mutex& settings_mutex() {
  static std::mutex mutex;
  return mutex;
}
CompileCacheSettings& settings_storage() {
  static CompileCacheSettings settings;
  return settings;
}

std::uint64_t fnv1a(std::string_view bytes, std::uint64_t hash = 0xcbf29ce484222325ULL) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// A second, unrelated 64-bit hash of the canonical graph: together with FNV-1a the graph digest is
// 128 bits, so two different graphs sharing a digest is not a practical worry.
std::uint64_t mix_hash(std::string_view bytes) {
  auto mix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ bytes.size();
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t chunk;
    std::memcpy(&chunk, bytes.data() + i, 8);
    h = mix(h ^ chunk) + 0x9e3779b97f4a7c15ULL;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  return mix(h ^ tail);
}

std::string hex64(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

size_t count_nodes(const ir::Graph& graph) {
  size_t n = graph.num_nodes();
  for (const ir::Graph* sub : graph.subgraphs()) n += count_nodes(*sub);
  return n;
}

std::string compiler_id() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "unknown";
#endif
}

// The engine library this code runs from, by size and modification time: a rebuilt engine (new
// passes, new kernels) keeps its version number but must not trust what the old build stored.
const std::string& build_id() {
  static const std::string id = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&compiler_id), &info) == 0 || info.dli_fname == nullptr) {
      return std::string("unknown");
    }
    std::error_code ec;
    const fs::path library = fs::canonical(info.dli_fname, ec);
    if (ec) return std::string("unknown");
    const auto size = fs::file_size(library, ec);
    if (ec) return std::string("unknown");
    const auto mtime = fs::last_write_time(library, ec);
    if (ec) return std::string("unknown");
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch());
    return library.filename().string() + " " + std::to_string(size) + " bytes, mtime " +
           std::to_string(ns.count());
  }();
  return id;
}

std::chrono::system_clock::time_point to_system(fs::file_time_type t) {
  return std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      std::chrono::file_clock::to_sys(t));
}

std::string read_file(const fs::path& path, bool* found) {
  std::ifstream in(path, std::ios::binary);
  *found = in.good();
  if (!*found) return {};
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return std::move(bytes).str();
}

std::uint32_t read_le32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string envelope(std::uint32_t header_bytes) {
  std::string out(kMagic, sizeof(kMagic));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((header_bytes >> (8 * i)) & 0xff));
  return out;
}

// The header of an entry's bytes (which may be only the first part of the file). DataLoss on
// anything but a well-formed header.
proto::CacheEntryHeader parse_header(std::string_view bytes, size_t* payload_offset) {
  MF_CHECK(bytes.size() >= kEnvelopeBytes, DataLoss, "truncated: ", bytes.size(),
           " bytes, shorter than the envelope");
  MF_CHECK(std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0, DataLoss,
           "not a compile-cache entry (bad magic)");
  const std::uint32_t length = read_le32(bytes.data() + sizeof(kMagic));
  MF_CHECK(length <= kMaxHeaderBytes && kEnvelopeBytes + length <= bytes.size(), DataLoss,
           "truncated: the header claims ", length, " bytes, the file has ",
           bytes.size() - kEnvelopeBytes);
  proto::CacheEntryHeader header;
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
  return header;
}

// The header and the checksummed payload of a whole entry file.
proto::CacheEntryPayload parse_entry(std::string_view bytes, proto::CacheEntryHeader* header_out) {
  size_t offset = 0;
  proto::CacheEntryHeader header = parse_header(bytes, &offset);
  const std::string_view payload = bytes.substr(offset);
  MF_CHECK(payload.size() == header.payload_bytes(), DataLoss, "truncated or padded: the payload ",
           "has ", payload.size(), " bytes, the header says ", header.payload_bytes());
  MF_CHECK(fnv1a(payload) == header.payload_checksum(), DataLoss, "checksum mismatch: payload ",
           hex64(fnv1a(payload)), ", header ", hex64(header.payload_checksum()));
  proto::CacheEntryPayload message;
  MF_CHECK(message.ParseFromArray(payload.data(), static_cast<int>(payload.size())), DataLoss,
           "the payload does not parse");
  if (header_out != nullptr) *header_out = std::move(header);
  return message;
}

std::vector<std::pair<std::string, std::string>> components_of(
    const proto::CacheEntryHeader& header) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& c : header.components()) out.emplace_back(c.name(), c.value());
  return out;
}

void plan_to_proto(const runtime::Plan& plan, proto::CachePlan& out) {
  std::map<const ir::Node*, size_t> positions;
  if (plan.graph != nullptr) {
    for (const ir::Node& node : plan.graph->nodes()) positions.emplace(&node, positions.size());
  }
  for (const runtime::Slot& slot : plan.slots) {
    auto* s = out.add_slots();
    s->set_kind(static_cast<std::uint32_t>(slot.kind));
    s->set_index(slot.index);
    s->set_offset(slot.offset);
    s->set_bytes(slot.bytes);
    s->set_is_output(slot.is_output);
    ir::type_to_proto(slot.type, *s->mutable_type());
  }
  for (const runtime::Step& step : plan.steps) {
    auto* s = out.add_steps();
    auto it = positions.find(step.node);
    s->set_node_position(it == positions.end() ? ~std::uint64_t{0} : it->second);
    for (int v : step.inputs) s->add_inputs(v);
    for (int v : step.outputs) s->add_outputs(v);
    for (int v : step.release_after) s->add_release_after(v);
    for (int v : step.depends_on) s->add_depends_on(v);
    s->set_in_place(step.in_place);
    for (const auto& sub : step.subplans) {
      if (sub) plan_to_proto(*sub, *s->add_subplans());
    }
  }
  for (int v : plan.parameters) out.add_parameters(v);
  for (int v : plan.outputs) out.add_outputs(v);
  out.set_arena_bytes(plan.arena_bytes);
  out.set_planned_peak_bytes(plan.planned_peak_bytes);
}

std::string serialize_plan(const runtime::Plan& plan) {
  proto::CachePlan message;
  plan_to_proto(plan, message);
  return message.SerializeAsString();
}

// An entry's header fields as the ls/verify listing wants them.
void fill_info(const proto::CacheEntryHeader& header, CacheEntryInfo& info) {
  info.summary = header.summary();
  info.components = components_of(header);
  info.created = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::milliseconds(header.created_unix_ms())));
}

bool is_entry_file(const fs::path& path) {
  const std::string name = path.filename().string();
  return path.extension() == kCompileCacheExtension && !name.starts_with(kTempPrefix);
}

struct FileStat {
  fs::path path;
  std::uint64_t bytes = 0;
  fs::file_time_type mtime{};
};

// Entry files with sizes and modification times; files that vanish while listing are skipped.
std::vector<FileStat> stat_entries(const fs::path& dir, std::vector<FileStat>* temps = nullptr) {
  std::vector<FileStat> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return out;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path path = it->path();
    const bool temp = path.filename().string().starts_with(kTempPrefix);
    if (!temp && !is_entry_file(path)) continue;
    FileStat stat{path};
    std::error_code e1, e2;
    stat.bytes = fs::file_size(path, e1);
    stat.mtime = fs::last_write_time(path, e2);
    if (e1 || e2) continue;  // removed by another process meanwhile
    if (temp) {
      if (temps != nullptr) temps->push_back(stat);
    } else {
      out.push_back(stat);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const FileStat& a, const FileStat& b) { return a.path < b.path; });
  return out;
}

std::string value_or_absent(const std::map<std::string, std::string>& values,
                            const std::string& name) {
  auto it = values.find(name);
  return it == values.end() ? "(absent)" : it->second;
}

}  // namespace

CompileCacheSettings compile_cache_settings() {
  std::lock_guard lock(settings_mutex());
  return settings_storage();
}

void set_compile_cache_settings(CompileCacheSettings settings) {
  std::lock_guard lock(settings_mutex());
  settings_storage() = std::move(settings);
}

std::string compile_cache_engine_version() {
  std::lock_guard lock(settings_mutex());
  const std::string& v = settings_storage().engine_version;
  return v.empty() ? std::string(MODEFLOW_VERSION) : v;
}

CacheKey make_cache_key(const ir::Graph& traced, const ir::TensorType& input,
                        const context::Fingerprint& fingerprint) {
  CacheKey key;
  auto& parts = key.components;
  parts.emplace_back("cache.format", std::to_string(kCompileCacheFormatVersion));
  parts.emplace_back("graph.name", traced.name());
  const std::string canonical = ir::canonical_form(traced);
  parts.emplace_back("graph.digest", hex64(fnv1a(canonical)) + hex64(mix_hash(canonical)) + " (" +
                                         std::to_string(count_nodes(traced)) + " nodes, " +
                                         std::to_string(canonical.size()) + " canonical bytes)");
  parts.emplace_back("input", ir::type_to_string(input));
  // The fingerprint walks the key tables, so a new compile-relevant key reaches the cache key too.
  std::string jit = "?";
  for (const auto& [name, value] : fingerprint.components) {
    parts.emplace_back(name, value);
    if (name == "policy.jit_level") jit = value;
  }
  parts.emplace_back("engine.version", compile_cache_engine_version());
  parts.emplace_back("build.compiler", compiler_id());
#ifdef NDEBUG
  parts.emplace_back("build.ndebug", "1");
#else
  parts.emplace_back("build.ndebug", "0");
#endif
  parts.emplace_back("build.id", build_id());
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& [name, value] : parts) {
    hash = fnv1a(name, hash);
    hash = fnv1a(std::string_view("\0", 1), hash);
    hash = fnv1a(value, hash);
    hash = fnv1a("\n", hash);
  }
  key.hex = hex64(hash);
  key.summary = traced.name() + " " + ir::type_to_string(input) + " jit " + jit;
  return key;
}

CompileCache::CompileCache(fs::path dir, std::uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {}

fs::path CompileCache::entry_path(const std::string& key_hex) const {
  return dir_ / (key_hex + std::string(kCompileCacheExtension));
}

std::optional<LoadedEntry> CompileCache::load(const CacheKey& key, const ir::Graph& traced,
                                              const passes::CompileOptions& options,
                                              std::string* problem) const {
  const fs::path path = entry_path(key.hex);
  bool found = false;
  const std::string bytes = read_file(path, &found);
  if (!found) return std::nullopt;  // never stored, or deleted since it was listed
  try {
    proto::CacheEntryHeader header;
    const proto::CacheEntryPayload payload = parse_entry(bytes, &header);
    MF_CHECK(header.key() == key.hex && components_of(header) == key.components &&
                 header.summary() == key.summary,
             DataLoss,
             "its key components are not the ones asked for (a renamed file or a hash collision)");
    LoadedEntry loaded;
    loaded.compiled.graph = ir::graph_from_proto(payload.graph());
    const ir::Graph& graph = *loaded.compiled.graph;
    // Parameters are bound positionally from the live trace: they must be the traced ones.
    MF_CHECK(graph.num_parameters() == traced.num_parameters(), DataLoss, "the stored graph has ",
             graph.num_parameters(), " parameters, the traced one ", traced.num_parameters());
    for (size_t i = 0; i < graph.num_parameters(); ++i) {
      const ir::Parameter* a = graph.parameter(i);
      const ir::Parameter* b = traced.parameter(i);
      MF_CHECK(a->name() == b->name() && a->type() == b->type() && a->is_weight() == b->is_weight(),
               DataLoss, "stored parameter ", i, " '", a->name(), "' differs from the traced '",
               b->name(), "'");
    }
    try {
      ir::verify(graph);
    } catch (const Error& e) {
      MF_FAIL(DataLoss, "the stored graph does not verify: ", e.message());
    }
    auto plan = std::make_shared<runtime::Plan>(passes::plan_memory(graph, options));
    MF_CHECK(serialize_plan(*plan) == payload.plan().SerializeAsString(), DataLoss,
             "the memory plan rebuilt from the stored graph differs from the stored plan");
    loaded.compiled.plan = std::move(plan);
    for (const auto& record : payload.passes()) {
      loaded.compiled.passes.push_back(
          {record.name(), record.changed(), record.millis(), record.summary()});
    }
    loaded.original_compile_ms = header.compile_ms();
    std::error_code ec;  // a read-only cache still hits; it only loses the LRU order
    fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
    return loaded;
  } catch (const std::exception& e) {
    const std::string reason = e.what();
    log::warn(
        "compile cache: ignoring entry {}: {}; compiling instead (the entry will be replaced)",
        path.string(), reason);
    if (problem != nullptr) *problem = reason;
    return std::nullopt;
  }
}

bool CompileCache::store(const CacheKey& key, const passes::CompiledGraph& compiled,
                         double compile_ms, std::string* problem) const {
  auto fail = [&](const std::string& why) {
    log::warn_once(
        "compile_cache:" + dir_.string(),
        "compile cache: cannot write to " + dir_.string() + " (" + why + "); running uncached");
    if (problem != nullptr) *problem = why;
    return false;
  };
  std::string bytes;
  try {
    proto::CacheEntryPayload payload;
    ir::graph_to_proto(*compiled.graph, *payload.mutable_graph());
    plan_to_proto(*compiled.plan, *payload.mutable_plan());
    for (const passes::PassRecord& record : compiled.passes) {
      auto* r = payload.add_passes();
      r->set_name(record.name);
      r->set_changed(record.changed);
      r->set_millis(record.millis);
      r->set_summary(record.summary);
    }
    const std::string payload_bytes = payload.SerializeAsString();
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
    header.set_payload_checksum(fnv1a(payload_bytes));
    header.set_created_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
    header.set_compile_ms(compile_ms);
    const std::string header_bytes = header.SerializeAsString();
    bytes =
        envelope(static_cast<std::uint32_t>(header_bytes.size())) + header_bytes + payload_bytes;
  } catch (const std::exception& e) {
    log::warn("compile cache: cannot serialize entry {}: {}", key.hex, e.what());
    if (problem != nullptr) *problem = e.what();
    return false;
  }

  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return fail(ec.message());
  // A private temporary per writer, renamed over the entry: readers see the old file or the new
  // one, never a mix, and two writers of one key both succeed (the last rename wins, both are
  // good).
  static std::atomic<unsigned> counter{0};
  const fs::path temp =
      dir_ / (std::string(kTempPrefix) + key.hex + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(++counter) + std::string(kCompileCacheExtension));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out.good()) return fail("cannot create " + temp.filename().string());
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out.good()) {
      out.close();
      fs::remove(temp, ec);
      return fail("writing " + temp.filename().string() + " failed");
    }
  }
  fs::rename(temp, entry_path(key.hex), ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(temp, ec);
    return fail("renaming into place failed: " + why);
  }
  const std::vector<std::string> evicted = evict(key.hex);
  if (std::find(evicted.begin(), evicted.end(), key.hex) != evicted.end()) {
    if (problem != nullptr) {
      *problem = "the entry alone (" + std::to_string(bytes.size()) +
                 " bytes) exceeds the cache bound of " + std::to_string(max_bytes_) + " bytes";
    }
    return false;
  }
  return true;
}

std::vector<std::string> CompileCache::evict(const std::string& keep) const {
  std::vector<FileStat> temps;
  std::vector<FileStat> entries = stat_entries(dir_, &temps);
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const FileStat& t : temps) {
    if (now - t.mtime > kStaleTemp) fs::remove(t.path, ec);
  }
  std::uint64_t total = 0;
  for (const FileStat& e : entries) total += e.bytes;
  std::vector<std::string> removed;
  if (total <= max_bytes_) return removed;
  // Least recently used first (a hit touches its file); the entry just written goes last.
  std::stable_sort(entries.begin(), entries.end(), [&](const FileStat& a, const FileStat& b) {
    const bool a_keep = a.path.stem() == keep, b_keep = b.path.stem() == keep;
    if (a_keep != b_keep) return b_keep;
    return a.mtime < b.mtime;
  });
  for (const FileStat& e : entries) {
    if (total <= max_bytes_) break;
    fs::remove(e.path, ec);  // another process may have removed it already: the bytes are gone
    total -= e.bytes;
    removed.push_back(e.path.stem().string());
    if (e.path.stem() == keep) {
      log::warn("compile cache: entry {} ({} bytes) alone exceeds the bound of {} bytes; not kept",
                keep, e.bytes, max_bytes_);
    }
  }
  if (!removed.empty()) {
    log::info("compile cache: evicted {} least recently used entr{} from {}", removed.size(),
              removed.size() == 1 ? "y" : "ies", dir_.string());
  }
  return removed;
}

std::vector<CacheEntryInfo> CompileCache::list() const {
  std::vector<CacheEntryInfo> out;
  for (const FileStat& stat : stat_entries(dir_)) {
    CacheEntryInfo info;
    info.path = stat.path;
    info.key = stat.path.stem().string();
    info.bytes = stat.bytes;
    info.last_used = to_system(stat.mtime);
    // Only the header is read: a listing must stay cheap for a large cache.
    std::ifstream in(stat.path, std::ios::binary);
    if (!in.good()) continue;  // removed since it was listed
    try {
      char head[kEnvelopeBytes];
      in.read(head, kEnvelopeBytes);
      std::string bytes(head, static_cast<size_t>(in.gcount()));
      if (bytes.size() == kEnvelopeBytes &&
          std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0) {
        const std::uint32_t length = read_le32(head + sizeof(kMagic));
        if (length <= kMaxHeaderBytes) {
          std::string header(length, '\0');
          in.read(header.data(), length);
          header.resize(static_cast<size_t>(in.gcount()));
          bytes += header;
        }
      }
      size_t offset = 0;
      fill_info(parse_header(bytes, &offset), info);
    } catch (const std::exception& e) {
      info.problem = e.what();
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<CacheEntryInfo> CompileCache::verify() const {
  std::vector<CacheEntryInfo> out;
  for (const FileStat& stat : stat_entries(dir_)) {
    CacheEntryInfo info;
    info.path = stat.path;
    info.key = stat.path.stem().string();
    info.bytes = stat.bytes;
    info.last_used = to_system(stat.mtime);
    bool found = false;
    const std::string bytes = read_file(stat.path, &found);
    if (!found) continue;
    try {
      proto::CacheEntryHeader header;
      const proto::CacheEntryPayload payload = parse_entry(bytes, &header);
      fill_info(header, info);
      MF_CHECK(header.key() == info.key, DataLoss, "the file name says ", info.key, ", the header ",
               header.key());
      ir::graph_from_proto(payload.graph());
    } catch (const std::exception& e) {
      info.problem = e.what();
    }
    out.push_back(std::move(info));
  }
  return out;
}

size_t CompileCache::clear() const {
  std::vector<FileStat> temps;
  size_t removed = 0;
  std::error_code ec;
  for (const FileStat& e : stat_entries(dir_, &temps)) removed += fs::remove(e.path, ec) ? 1 : 0;
  for (const FileStat& t : temps) fs::remove(t.path, ec);
  return removed;
}

CacheExplanation CompileCache::explain(const CacheKey& key) const {
  CacheExplanation out;
  const std::string what = key.hex + " (" + key.summary + ")";
  const std::vector<CacheEntryInfo> entries = list();
  for (const CacheEntryInfo& e : entries) {
    if (e.key != key.hex) continue;
    if (e.problem.empty() && e.components == key.components) {
      out.hit = true;
      out.text = "hit: entry " + what + " in " + dir_.string();
      return out;
    }
    out.text = "miss: entry " + key.hex + " is unusable (" +
               (e.problem.empty() ? "its key components differ" : e.problem) +
               "); it will be replaced";
    return out;
  }
  const std::map<std::string, std::string> wanted(key.components.begin(), key.components.end());
  auto value = [](const std::vector<std::pair<std::string, std::string>>& parts,
                  const std::string& name) -> const std::string* {
    for (const auto& [n, v] : parts) {
      if (n == name) return &v;
    }
    return nullptr;
  };
  const CacheEntryInfo* nearest = nullptr;
  long best = -1;
  for (const CacheEntryInfo& e : entries) {
    if (!e.problem.empty()) continue;
    long score = 0;
    for (const auto& [name, v] : e.components) {
      auto it = wanted.find(name);
      if (it != wanted.end() && it->second == v) ++score;
    }
    // The same network and input is what a user means by "nearest": a settings change.
    const std::string* digest = value(e.components, "graph.digest");
    const std::string* input = value(e.components, "input");
    if (digest && input && *digest == value_or_absent(wanted, "graph.digest") &&
        *input == value_or_absent(wanted, "input")) {
      score += 100000;
    }
    if (score > best) best = score, nearest = &e;
  }
  if (nearest == nullptr) {
    out.text = "miss: no entry for " + what + "; the cache at " + dir_.string() +
               " has no other usable entries";
    return out;
  }
  out.nearest_key = nearest->key;
  const std::map<std::string, std::string> cached(nearest->components.begin(),
                                                  nearest->components.end());
  for (const auto& [name, v] : key.components) {
    const std::string old = value_or_absent(cached, name);
    if (old != v) out.changes.push_back({name, old, v});
  }
  for (const auto& [name, v] : nearest->components) {
    if (!wanted.count(name)) out.changes.push_back({name, v, "(absent)"});
  }
  out.text = "miss: no entry for " + what + "; nearest entry " + nearest->key + " (" +
             nearest->summary + ") differs in: ";
  for (size_t i = 0; i < out.changes.size(); ++i) {
    const ComponentChange& c = out.changes[i];
    out.text += (i > 0 ? "; " : "") + c.name + " " + c.cached + " -> " + c.current;
  }
  return out;
}

CacheLookup lookup_compiled(const context::Policy& policy, const ir::Graph& traced,
                            const ir::TensorType& input, const context::Fingerprint& fingerprint,
                            const passes::CompileOptions& options) {
  CacheLookup out;
  out.key = make_cache_key(traced, input, fingerprint);
  // A hit runs no pass, so it could write no pass dumps: save_graphs means "compile and show me".
  if (policy.dump_level.value > 0) {
    out.note = "save_graphs is on, so the cache is not read (a hit would write no pass dumps)";
    return out;
  }
  const CompileCache cache(policy.compile_cache_dir.value);
  std::string problem;
  std::optional<LoadedEntry> loaded = cache.load(out.key, traced, options, &problem);
  if (loaded) {
    out.compiled = std::move(loaded->compiled);
    char text[96];
    std::snprintf(text, sizeof(text), "loaded, no pass ran; compiling took %.3g ms when stored",
                  loaded->original_compile_ms);
    out.note = text;
    return out;
  }
  if (problem.empty()) {
    out.note = cache.explain(out.key).text;
    if (out.note.starts_with("miss: ")) out.note.erase(0, 6);
  } else {
    out.note = "entry " + out.key.hex + " was unusable (" + problem + ")";
  }
  return out;
}

std::string store_compiled(const context::Policy& policy, const CacheLookup& lookup,
                           const passes::CompiledGraph& compiled, double compile_ms) {
  const CompileCache cache(policy.compile_cache_dir.value);
  std::string problem;
  if (!cache.store(lookup.key, compiled, compile_ms, &problem)) {
    return "not stored: " + problem + "; " + lookup.note;
  }
  return "stored in " + cache.dir().string() + "; " + lookup.note;
}

}  // namespace mf::engine
