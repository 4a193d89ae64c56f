#pragma once
// The persistent compile cache (enable_compile_cache): one file per key under
// compile_cache_path/rank_<id>/ holding the optimized graph, its memory plan and pass records, so a
// later process that traces the same network under the same settings loads instead of compiling.
// The key hashes everything that can change the compiled result (the traced graph's canonical form,
// the input type, every compile-relevant context component, the engine version and build); an entry
// is trusted only when its header, key components and payload checksum all match, otherwise it is
// reported, ignored and replaced. Weights are never stored: they stay weight parameters of the
// graph, bound by name from the live network.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "context/fingerprint.h"
#include "context/policy.h"
#include "ir/graph.h"
#include "passes/compile_options.h"
#include "passes/compiler.h"

namespace mf::engine {

// The documented default size bound: 1 GiB. `mf` replaces it with MF_CACHE_MAX_BYTES at start-up.
inline constexpr std::uint64_t kDefaultCompileCacheMaxBytes = std::uint64_t{1} << 30;
// Bumped whenever the entry layout (proto/compile_cache.proto or the envelope) changes meaning.
inline constexpr std::uint32_t kCompileCacheFormatVersion = 3;
inline constexpr std::string_view kCompileCacheExtension = ".mfcc";

// Process-wide settings, set once by the tool at start-up: library code never reads the
// environment.
struct CompileCacheSettings {
  std::uint64_t max_bytes = kDefaultCompileCacheMaxBytes;
  std::string engine_version;  // empty: MODEFLOW_VERSION (tests override it to simulate an upgrade)
};
CompileCacheSettings compile_cache_settings();
void set_compile_cache_settings(CompileCacheSettings settings);
std::string compile_cache_engine_version();  // the version keys and headers use now

// A cache key: the hash and the readable components it was computed from, in a fixed order.
struct CacheKey {
  std::string hex;  // 16 lowercase hex digits: the entry's file name
  std::vector<std::pair<std::string, std::string>> components;
  std::string summary;  // "Transformer <Tensor[Float32], (4, 16, 32)> jit O1"
  // Not hashed: the trace's source locations, which a stored entry refers to instead of keeping its
  // own (engine/compile_cache/source_locations.h).
  std::vector<std::string> traced_locations;
};

// Components: cache.format, graph.name, graph.digest (ir::canonical_digest: the 128-bit digest of
// ir::canonical_form, hashed as it is printed), input, every
// component of the context fingerprint, engine.version, build.compiler, build.ndebug, build.id (the
// engine library's size and modification time, so a rebuilt engine never trusts entries of another
// build with the same version number).
// A symbolic compile (one for every size of dynamic inputs) is keyed by its trace at the probe's
// sizes, plus the component symbolic.inputs: the declared signature.
CacheKey make_cache_key(const ir::Graph& traced, const ir::TensorType& input,
                        const context::Fingerprint& fingerprint,
                        std::string_view symbolic_inputs = {});

// One file of the cache as `mf cache ls|verify` see it.
struct CacheEntryInfo {
  std::filesystem::path path;
  std::string key;  // from the file name
  std::string summary;
  std::uint64_t bytes = 0;
  std::chrono::system_clock::time_point created{};
  std::chrono::system_clock::time_point last_used{};  // the file's modification time
  std::vector<std::pair<std::string, std::string>> components;
  std::string problem;  // empty: the header (and for verify(), the payload) checked out
};

// A component whose value differs between the nearest entry and the key asked about.
struct ComponentChange {
  std::string name;
  std::string cached;   // "(absent)" when the entry lacks it
  std::string current;  // "(absent)" when the key lacks it
};

struct CacheExplanation {
  bool hit = false;
  std::string nearest_key;  // on a miss, the entry sharing the most with the key ("" if none)
  std::vector<ComponentChange> changes;
  std::string text;  // one line: "hit: ..." or "miss: ..."
};

// A compiled graph loaded from an entry.
struct LoadedEntry {
  passes::CompiledGraph compiled;
  double original_compile_ms = 0;  // what compiling took in the process that stored the entry
};

// The cache over one directory. Every operation tolerates other processes adding, replacing and
// deleting entries at the same time; none of them throws for a damaged file or a missing directory.
class CompileCache {
 public:
  explicit CompileCache(std::filesystem::path dir,
                        std::uint64_t max_bytes = compile_cache_settings().max_bytes);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path entry_path(const std::string& key_hex) const;

  // The entry for key, rebuilt and checked: header, version, key components, payload checksum,
  // the graph's structure and its parameters against `traced`'s, and the stored memory plan
  // proven safe for the stored graph (passes::check_plan). The graph is not verified again:
  // store() stores only graphs that verify, and the checksum and the key's build.id prove these
  // are the bytes this build wrote. nullopt on a miss; a damaged or foreign entry is a warning and
  // a miss (*problem says why). A hit marks the entry used.
  std::optional<LoadedEntry> load(const CacheKey& key, const ir::Graph& traced,
                                  std::string* problem = nullptr) const;

  // Verifies the compiled graph (a graph that does not verify is not stored), writes the entry
  // atomically (temporary file in the directory, then rename), then evicts least recently used
  // entries beyond the size bound. Returns false, with a warning and *problem, when
  // the directory cannot be written; the caller runs on uncached.
  bool store(const CacheKey& key, const passes::CompiledGraph& compiled, double compile_ms,
             std::string* problem = nullptr) const;

  // Entries (not temporaries) with their headers read; unreadable headers have `problem` set.
  std::vector<CacheEntryInfo> list() const;
  // Like list(), but every payload is read, its checksum checked and its graph rebuilt and
  // verified.
  std::vector<CacheEntryInfo> verify() const;
  // Removes every entry and leftover temporary; returns how many entries went.
  size_t clear() const;
  // Removes least recently used entries until the total is within max_bytes; `keep` goes last.
  // Returns the keys removed.
  std::vector<std::string> evict(const std::string& keep = {}) const;

  // Whether `key` would hit, and if not, the nearest entry (same graph and input first, then the
  // most equal components) and what differs.
  CacheExplanation explain(const CacheKey& key) const;

 private:
  std::filesystem::path dir_;
  std::uint64_t max_bytes_;
};

// GRAPH mode's two calls (engine/graph/graph_mode.cc, engine/eager/ir_runner.cc). lookup_compiled
// never throws for cache trouble; on a miss `note` explains it. store_compiled returns the note for
// the report ("stored; nearest entry ... differs in ...", or why nothing was stored).
struct CacheLookup {
  CacheKey key;
  std::optional<passes::CompiledGraph> compiled;  // set on a hit
  std::string note;
};
CacheLookup lookup_compiled(const context::Policy& policy, const ir::Graph& traced,
                            const ir::TensorType& input, const context::Fingerprint& fingerprint,
                            std::string_view symbolic_inputs = {});
std::string store_compiled(const context::Policy& policy, const CacheLookup& lookup,
                           const passes::CompiledGraph& compiled, double compile_ms);
// For the caller of a hit whose first run fails before anything was returned: warns
// "compile cache: entry <key> failed its first run (<reason>); removed, compiling instead" and
// removes the entry, so that the caller recompiles, stores a fresh entry and reruns: a damaged
// entry that passes its checksum is a miss, never a failure of every later run.
void discard_compiled(const context::Policy& policy, const CacheLookup& lookup,
                      std::string_view reason);

}  // namespace mf::engine
