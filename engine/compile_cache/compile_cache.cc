// The compile cache's glue: CompileCache::load and store, and GRAPH mode's two calls. The parts
// live beside it: the key (cache_key.cc), the entry file (entry_file.h), the plan codec
// (plan_codec.h) and the directory operations (cache_dir.cc).

#include "engine/compile_cache/compile_cache.h"

#include <fcntl.h>
#include <google/protobuf/arena.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <new>

#include "base/error.h"
#include "base/logging.h"
#include "compile_cache.pb.h"
#include "engine/compile_cache/entry_file.h"
#include "engine/compile_cache/plan_codec.h"
#include "engine/compile_cache/source_locations.h"
#include "ir/serialize.h"
#include "ir/verifier.h"

namespace mf::engine {
namespace fs = std::filesystem;
using namespace detail;

namespace {

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

}  // namespace

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
  std::string bytes;
  try {
    bytes = read_file(path.c_str(), &found);
    if (!found) return std::nullopt;  // never stored, or deleted since it was listed
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
    // Verified although the checksum matches: a checksum proves the bytes are whole, not who
    // wrote them, and an entry forged with a valid checksum must be a miss, never a wrong run.
    ir::verify(graph);
    loaded.compiled.plan = plan_from_payload(payload, graph);
    loaded.compiled.symbolic_text = payload.symbolic_text();
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
    const std::string reason =
        dynamic_cast<const std::bad_alloc*>(&e) != nullptr
            ? "it asks for more memory than can be allocated (std::bad_alloc): damaged sizes"
            : std::string(e.what());
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
    plan_to_payload(*compiled.plan, payload);
    payload.set_symbolic_text(compiled.symbolic_text);
    for (const passes::PassRecord& record : compiled.passes) {
      auto* r = payload.add_passes();
      r->set_name(record.name);
      r->set_changed(record.changed);
      r->set_millis(record.millis);
      r->set_summary(record.summary);
    }
    const std::string payload_bytes = payload.SerializeAsString();
    bytes = entry_bytes(key, payload_bytes, compile_ms);
  } catch (const std::exception& e) {
    log::warn("compile cache: cannot serialize entry {}: {}", key.hex, e.what());
    if (problem != nullptr) *problem = e.what();
    return false;
  }

  if (const std::string why = write_entry_atomically(dir_, key.hex, entry_path(key.hex), bytes);
      !why.empty()) {
    return fail(why);
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

CacheLookup lookup_compiled(const context::Policy& policy, const ir::Graph& traced,
                            const ir::TensorType& input, const context::Fingerprint& fingerprint,
                            std::string_view symbolic_inputs) {
  CacheLookup out;
  out.key = make_cache_key(traced, input, fingerprint, symbolic_inputs);
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

void discard_compiled(const context::Policy& policy, const CacheLookup& lookup,
                      std::string_view reason) {
  const CompileCache cache(policy.compile_cache_dir.value);
  const std::filesystem::path entry = cache.entry_path(lookup.key.hex);
  std::error_code ec;
  std::filesystem::remove(entry, ec);
  log::warn("compile cache: entry {} failed its first run ({}); removed, compiling instead",
            entry.string(), echo(reason, 400));
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
