// The compile cache's key: the process-wide settings (size bound, engine version), the identity of
// the build, and make_cache_key, which hashes the traced graph, the input, the context fingerprint
// and the engine's version and build into an entry's name.

#include "engine/compile_cache/cache_key.h"

#include <link.h>
#include <sys/stat.h>

#include <mutex>

#include "engine/compile_cache/compile_cache.h"
#include "engine/compile_cache/source_locations.h"
#include "ir/serialize.h"

#ifndef MODEFLOW_VERSION
#define MODEFLOW_VERSION "unknown"
#endif

namespace mf::engine {

namespace detail {

std::string hex64(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) text[static_cast<size_t>(i)] = kDigits[value & 15];
  return text;
}

}  // namespace detail

namespace {

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
                        const context::Fingerprint& fingerprint, std::string_view symbolic_inputs) {
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
  if (!symbolic_inputs.empty()) parts.emplace_back("symbolic.inputs", std::string(symbolic_inputs));
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
  key.hex = detail::hex64(hash);
  key.summary = traced.name() + " " + ir::type_to_string(input) + " jit " + jit;
  key.traced_locations = traced_locations(traced);
  return key;
}

}  // namespace mf::engine
