#include "engine/compile_cache/compile_cache.h"

#include <fcntl.h>
#include <google/protobuf/arena.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <system_error>

#include "base/error.h"
#include "base/logging.h"
#include "compile_cache.pb.h"
#include "engine/compile_cache/source_locations.h"
#include "ir/serialize.h"
#include "ir/verifier.h"
#include "passes/plan_check.h"
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

std::string hex64(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) text[static_cast<size_t>(i)] = kDigits[value & 15];
  return text;
}

// Three significant digits as printf's "%.3g" writes them (a value within an ulp of a rounding
// boundary may round the other way). Milliseconds from 0.001 to 999 are formatted with integers:
// the first floating-point formatting in a process runs cold code and tables (std::to_chars with a
// precision ~15 us, snprintf ~7 us), which every hit would pay for one number in its note.
std::string three_digits(double value) {
  if (!(value >= 0.001 && value < 999.5)) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.3g", value);
    return text;
  }
  int decimals = 0;
  long long scale = 1;
  while (decimals < 5 && value * static_cast<double>(scale) < 99.95) ++decimals, scale *= 10;
  long long digits = std::llround(value * static_cast<double>(scale));
  while (decimals > 0 && digits % 10 == 0) --decimals, digits /= 10, scale /= 10;  // %g drops them
  std::string text = std::to_string(digits / scale);
  if (decimals > 0) {
    std::string fraction = std::to_string(digits % scale);
    text += '.' + std::string(static_cast<size_t>(decimals) - fraction.size(), '0') + fraction;
  }
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
// Found with dl_iterate_phdr and one stat(): dladdr would scan the library's symbol table.
const std::string& build_id() {
  static const std::string id = [] {
    struct Found {
      std::uintptr_t address;
      std::string path;
    } found{reinterpret_cast<std::uintptr_t>(&compiler_id), {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto& f = *static_cast<Found*>(data);
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            const std::uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
            if (ph.p_type == PT_LOAD && f.address >= begin && f.address < begin + ph.p_memsz) {
              // The main program has an empty name: the engine is linked into it.
              f.path = info->dlpi_name[0] != '\0' ? info->dlpi_name : "/proc/self/exe";
              return 1;
            }
          }
          return 0;
        },
        &found);
    struct stat st {};
    if (found.path.empty() || ::stat(found.path.c_str(), &st) != 0) return std::string("unknown");
    const size_t slash = found.path.rfind('/');
    const std::string name = found.path == "/proc/self/exe" ? std::string("the program")
                             : slash == std::string::npos   ? found.path
                                                            : found.path.substr(slash + 1);
    return name + " " + std::to_string(st.st_size) + " bytes, mtime " +
           std::to_string(std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec);
  }();
  return id;
}

std::chrono::system_clock::time_point to_system(fs::file_time_type t) {
  return std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      std::chrono::file_clock::to_sys(t));
}

// The whole file in one read (a hit reads its entry once; no stream buffering or copying). Without
// updating its access time, which nothing here uses (the last use is the modification time): on a
// file just written, relatime would make the first read write the inode, doubling the read's cost.
// O_NOATIME needs the file's owner; anyone else reads it the ordinary way.
std::string read_file(const char* path, bool* found) {
  *found = false;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  *found = true;
  std::string bytes;
  struct stat st {};
  // One byte more than the size, so the read that sees the end needs no growth.
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.resize(static_cast<size_t>(st.st_size) + 1);
  size_t size = 0;
  for (;;) {
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

// The payload's checksum: the high half of the 128-bit digest the key uses (four independent
// chains of 8-byte words, several times the speed of a byte-at-a-time hash).
std::uint64_t payload_checksum(std::string_view payload) {
  ir::Hasher hasher;
  hasher.update(payload);
  return hasher.finish().high;
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

// Writes a plan and, into the payload's table, each subplan once: a subgraph named by several
// steps, or by itself through nested control flow, is one table entry named by index.
class PlanWriter {
 public:
  explicit PlanWriter(proto::CacheEntryPayload& payload) : payload_(payload) {}

  void write(const runtime::Plan& plan, proto::CachePlan& out) {
    std::map<const ir::Node*, size_t> positions;
    if (plan.graph != nullptr) {
      out.set_graph(plan.graph->name());
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
      for (const auto& sub : step.subplans) s->add_subplans(index_of(*sub));
    }
    for (int v : plan.parameters) out.add_parameters(v);
    for (int v : plan.outputs) out.add_outputs(v);
    out.set_arena_bytes(plan.arena_bytes);
    out.set_planned_peak_bytes(plan.planned_peak_bytes);
  }

 private:
  int index_of(const runtime::Plan& sub) {
    if (auto it = index_.find(&sub); it != index_.end()) return it->second;
    const int index = payload_.subplans_size();
    index_.emplace(&sub, index);                      // before writing it: it may name itself
    proto::CachePlan* out = payload_.add_subplans();  // RepeatedPtrField: the pointer stays valid
    write(sub, *out);
    return index;
  }

  proto::CacheEntryPayload& payload_;
  std::map<const runtime::Plan*, int> index_;
};

// Rebuilds the stored plans against the loaded graph. What this code indexes with (node positions,
// slot kinds, subplan indices and the subgraphs they name) is checked here; slot ids and everything
// else passes::check_plan checks afterwards, before anything runs the plan. A subplan is built
// once; a recursive reference points at the plan being built without owning it, as the planner
// does.
class PlanReader {
 public:
  explicit PlanReader(const proto::CacheEntryPayload& payload)
      : payload_(payload),
        built_(static_cast<size_t>(payload.subplans_size())),
        building_(static_cast<size_t>(payload.subplans_size()), nullptr),
        graphs_(static_cast<size_t>(payload.subplans_size()), nullptr) {}

  void read(const proto::CachePlan& in, const ir::Graph& graph, runtime::Plan& out) {
    MF_CHECK(in.graph() == graph.name(), DataLoss, "a stored plan is of graph @", in.graph(),
             ", where @", graph.name(), " was expected");
    out.graph = &graph;
    std::vector<const ir::Node*> nodes;
    nodes.reserve(graph.num_nodes());
    for (const ir::Node& node : graph.nodes()) nodes.push_back(&node);
    out.slots.resize(static_cast<size_t>(in.slots_size()));
    for (int i = 0; i < in.slots_size(); ++i) {
      const proto::CachePlanSlot& s = in.slots(i);
      runtime::Slot& slot = out.slots[static_cast<size_t>(i)];
      MF_CHECK(s.kind() <= static_cast<std::uint32_t>(runtime::SlotKind::kArena), DataLoss, "slot ",
               i, " has unknown kind ", s.kind());
      slot.kind = static_cast<runtime::SlotKind>(s.kind());
      slot.index = s.index();
      slot.offset = s.offset();
      slot.bytes = s.bytes();
      slot.is_output = s.is_output();
      slot.type = ir::type_from_proto(s.type());
    }
    out.steps.resize(static_cast<size_t>(in.steps_size()));
    for (int i = 0; i < in.steps_size(); ++i) {
      const proto::CachePlanStep& s = in.steps(i);
      runtime::Step& step = out.steps[static_cast<size_t>(i)];
      MF_CHECK(s.node_position() < nodes.size(), DataLoss, "step ", i, " names node ",
               s.node_position(), " of ", nodes.size());
      step.node = nodes[s.node_position()];
      step.inputs.assign(s.inputs().begin(), s.inputs().end());
      step.outputs.assign(s.outputs().begin(), s.outputs().end());
      step.release_after.assign(s.release_after().begin(), s.release_after().end());
      step.depends_on.assign(s.depends_on().begin(), s.depends_on().end());
      step.in_place = s.in_place();
      if (s.subplans_size() == 0) continue;
      const std::vector<std::string> names = passes::subgraph_names(*step.node);
      MF_CHECK(static_cast<size_t>(s.subplans_size()) == names.size(), DataLoss, "step ", i,
               " has ", s.subplans_size(), " subplans for ", names.size(), " subgraphs");
      for (size_t k = 0; k < names.size(); ++k) {
        const ir::Graph* sub = graph.resolve_subgraph(names[k]);
        MF_CHECK(sub != nullptr, DataLoss, "step ", i, " names subgraph @", names[k],
                 ", which the stored graph lacks");
        step.subplans.push_back(subplan(s.subplans(static_cast<int>(k)), *sub));
      }
    }
    out.parameters.assign(in.parameters().begin(), in.parameters().end());
    out.outputs.assign(in.outputs().begin(), in.outputs().end());
    out.arena_bytes = in.arena_bytes();
    out.planned_peak_bytes = in.planned_peak_bytes();
  }

 private:
  std::shared_ptr<const runtime::Plan> subplan(int index, const ir::Graph& graph) {
    MF_CHECK(index >= 0 && index < payload_.subplans_size(), DataLoss, "subplan ", index,
             " is out of range");
    const auto i = static_cast<size_t>(index);
    MF_CHECK(graphs_[i] == nullptr || graphs_[i] == &graph, DataLoss, "subplan ", index,
             " is named for two subgraphs");
    graphs_[i] = &graph;
    if (built_[i]) return built_[i];
    if (building_[i] != nullptr) {
      // Recursion: the plan is owned further up this chain of subplans, which outlives the edge.
      return std::shared_ptr<const runtime::Plan>(std::shared_ptr<const runtime::Plan>(),
                                                  building_[i]);
    }
    auto plan = std::make_shared<runtime::Plan>();
    building_[i] = plan.get();
    read(payload_.subplans(index), graph, *plan);
    building_[i] = nullptr;
    built_[i] = plan;
    return plan;
  }

  const proto::CacheEntryPayload& payload_;
  std::vector<std::shared_ptr<const runtime::Plan>> built_;
  std::vector<runtime::Plan*> building_;
  std::vector<const ir::Graph*> graphs_;
};

// The stored plan of `graph`, proven safe to run on it (DataLoss naming the first problem).
std::shared_ptr<const runtime::Plan> plan_from_payload(const proto::CacheEntryPayload& payload,
                                                       const ir::Graph& graph) {
  auto plan = std::make_shared<runtime::Plan>();
  try {
    PlanReader(payload).read(payload.plan(), graph, *plan);
    passes::check_plan(*plan);
  } catch (Error& e) {
    e.add_context("while checking the stored memory plan");
    throw;
  }
  return plan;
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
  parts.reserve(fingerprint.components.size() + 9);
  parts.emplace_back("cache.format", std::to_string(kCompileCacheFormatVersion));
  parts.emplace_back("graph.name", traced.name());
  // The digest of ir::canonical_form(traced), hashed as the printer writes it (no text is built).
  const ir::Digest digest = ir::canonical_digest(traced);
  parts.emplace_back("graph.digest", digest.hex() + " (" + std::to_string(count_nodes(traced)) +
                                         " nodes, " + std::to_string(digest.bytes) +
                                         " canonical bytes)");
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
  key.traced_locations = traced_locations(traced);
  return key;
}

CompileCache::CompileCache(fs::path dir, std::uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {}

fs::path CompileCache::entry_path(const std::string& key_hex) const {
  return dir_ / (key_hex + std::string(kCompileCacheExtension));
}

std::optional<LoadedEntry> CompileCache::load(const CacheKey& key, const ir::Graph& traced,
                                              std::string* problem) const {
  // entry_path() as a plain string: a std::filesystem::path splits itself into components when it
  // is built, which a hit would pay for nothing.
  std::string path = dir_.native();
  if (!path.empty() && path.back() != '/') path += '/';
  path.append(key.hex).append(kCompileCacheExtension);
  bool found = false;
  std::string bytes = read_file(path.c_str(), &found);
  if (!found) return std::nullopt;  // never stored, or deleted since it was listed
  try {
    // Memory is released as soon as it is no longer needed (the header's messages once checked,
    // the file's bytes once parsed), so that the graph and plan built next reuse it instead of
    // touching fresh pages: in a new process a page fault costs more than building a node. Each
    // goes while something allocated after it still lives: a free at the top of the heap can make
    // malloc give the pages back to the system, only to fault them in again.
    LoadedEntry loaded;
    // Sized from the envelope's length field (parse_header checks it): a hint, nothing more.
    const size_t header_bytes =
        bytes.size() >= kEnvelopeBytes
            ? std::min<size_t>(read_le32(bytes.data() + sizeof(kMagic)), bytes.size())
            : 0;
    auto header_arena = std::make_unique<google::protobuf::Arena>(arena_for(header_bytes));
    auto& header =
        *google::protobuf::Arena::CreateMessage<proto::CacheEntryHeader>(header_arena.get());
    size_t offset = 0;
    parse_header(bytes, header, &offset);
    const std::string_view stored = checked_payload(bytes, offset, header);
    MF_CHECK(
        header.key() == key.hex && same_components(header, key) && header.summary() == key.summary,
        DataLoss,
        "its key components are not the ones asked for (a renamed file or a hash collision)");
    loaded.original_compile_ms = header.compile_ms();
    google::protobuf::Arena arena(arena_for(stored.size()));
    header_arena.reset();
    auto& payload = *google::protobuf::Arena::CreateMessage<proto::CacheEntryPayload>(&arena);
    parse_payload(stored, payload);
    std::string().swap(bytes);  // the messages hold copies; `stored` is gone with it
    rebind_locations(key.traced_locations, payload);
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
    // No ir::verify here: store() verified this graph before writing it, the checksum proves these
    // are the bytes it wrote, and the key's build.id proves this build wrote them (the same
    // verifier, the same deserializer). graph_from_proto still refuses impossible structure, and
    // the stored plan is proven safe for this graph before anything runs it.
    loaded.compiled.plan = plan_from_payload(payload, graph);
    loaded.compiled.passes.reserve(static_cast<size_t>(payload.passes_size()));
    for (const auto& record : payload.passes()) {
      loaded.compiled.passes.push_back(
          {record.name(), record.changed(), record.millis(), record.summary()});
    }
    // The modification time is the last use. A read-only cache still hits; it only loses the LRU
    // order. (utimensat directly: std::filesystem's clock conversions cost a hit ~5 us cold.)
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    ::utimensat(AT_FDCWD, path.c_str(), times, 0);
    return loaded;
  } catch (const std::exception& e) {
    const std::string reason = e.what();
    log::warn(
        "compile cache: ignoring entry {}: {}; compiling instead (the entry will be replaced)",
        path, reason);
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
    // Only a graph that verifies is stored: load() trusts the checksummed bytes instead of
    // verifying again.
    try {
      ir::verify(*compiled.graph);
    } catch (const Error& e) {
      MF_FAIL(Internal, "the compiled graph does not verify: ", e.message());
    }
    proto::CacheEntryPayload payload;
    ir::graph_to_proto(*compiled.graph, *payload.mutable_graph());
    unbind_locations(key.traced_locations, payload);
    PlanWriter(payload).write(*compiled.plan, *payload.mutable_plan());
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
    header.set_payload_checksum(payload_checksum(payload_bytes));
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
      fill_info(parse_header(bytes), info);
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
    const std::string bytes = read_file(stat.path.c_str(), &found);
    if (!found) continue;
    try {
      proto::CacheEntryHeader header;
      proto::CacheEntryPayload payload;
      parse_entry(bytes, header, payload);
      fill_info(header, info);
      MF_CHECK(header.key() == info.key, DataLoss, "the file name says ", info.key, ", the header ",
               header.key());
      // The deep check load() leaves to store(): the stored graph verifies.
      const std::unique_ptr<ir::Graph> graph = ir::graph_from_proto(payload.graph());
      try {
        ir::verify(*graph);
      } catch (const Error& e) {
        MF_FAIL(DataLoss, "the stored graph does not verify: ", e.message());
      }
      plan_from_payload(payload, *graph);
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
                            const ir::TensorType& input, const context::Fingerprint& fingerprint) {
  CacheLookup out;
  out.key = make_cache_key(traced, input, fingerprint);
  // A hit runs no pass, so it could write no pass dumps: save_graphs means "compile and show me".
  if (policy.dump_level.value > 0) {
    out.note = "save_graphs is on, so the cache is not read (a hit would write no pass dumps)";
    return out;
  }
  const CompileCache cache(policy.compile_cache_dir.value);
  std::string problem;
  std::optional<LoadedEntry> loaded = cache.load(out.key, traced, &problem);
  if (loaded) {
    out.compiled = std::move(loaded->compiled);
    out.note = "loaded, no pass ran; compiling took " + three_digits(loaded->original_compile_ms) +
               " ms when stored";
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
