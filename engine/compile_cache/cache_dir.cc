// The cache's directory as a whole: listing entries (headers only, or verified in full), clearing,
// least-recently-used eviction, and explain(), which finds the entry nearest to a key.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <system_error>

#include "base/error.h"
#include "base/logging.h"
#include "compile_cache.pb.h"
#include "engine/compile_cache/compile_cache.h"
#include "engine/compile_cache/entry_file.h"
#include "engine/compile_cache/plan_codec.h"
#include "ir/serialize.h"
#include "ir/verifier.h"

namespace mf::engine {
namespace fs = std::filesystem;
using namespace detail;

namespace {

// A temporary this old belongs to a writer that died; eviction removes it.
constexpr auto kStaleTemp = std::chrono::hours(1);

std::chrono::system_clock::time_point to_system(fs::file_time_type t) {
  return std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      std::chrono::file_clock::to_sys(t));
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
  bool regular = true;  // false: a FIFO, directory, symlink or device named like an entry
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
    std::error_code e0, e1, e2;
    const fs::file_status status = fs::symlink_status(path, e0);
    if (e0) continue;  // removed by another process meanwhile
    stat.regular = fs::is_regular_file(status);
    if (stat.regular) {
      stat.bytes = fs::file_size(path, e1);
      stat.mtime = fs::last_write_time(path, e2);
      if (e1 || e2) continue;  // removed by another process meanwhile
    }
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

std::vector<std::string> CompileCache::evict(const std::string& keep) const {
  std::vector<FileStat> temps;
  std::vector<FileStat> entries = stat_entries(dir_, &temps);
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const FileStat& t : temps) {
    if (now - t.mtime > kStaleTemp) fs::remove(t.path, ec);
  }
  std::uint64_t total = 0;
  for (const FileStat& e : entries) total += e.bytes;  // 0 for what is not a regular file
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

namespace {
// The loader reads only regular files: anything else named like an entry is reported, so that
// `mf cache verify` checks what the loader would refuse instead of skipping it.
void check_regular(const FileStat& stat) {
  MF_CHECK(stat.regular, DataLoss,
           "not a regular file (a FIFO, directory, symlink or device): the loader never reads "
           "it; remove it");
}

// What the directory listing alone says of an entry; the header fills in the rest.
CacheEntryInfo info_of(const FileStat& stat) {
  CacheEntryInfo info;
  info.path = stat.path;
  info.key = stat.path.stem().string();
  info.bytes = stat.bytes;
  info.last_used = to_system(stat.mtime);
  return info;
}
}  // namespace

std::vector<CacheEntryInfo> CompileCache::list() const {
  std::vector<CacheEntryInfo> out;
  for (const FileStat& stat : stat_entries(dir_)) {
    CacheEntryInfo info = info_of(stat);
    // Only the header is read: a listing must stay cheap for a large cache.
    try {
      check_regular(stat);
      const std::optional<std::string> bytes = read_header_bytes(stat.path);
      if (!bytes) continue;  // removed since it was listed
      fill_info(parse_header(*bytes), info);
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
    CacheEntryInfo info = info_of(stat);
    bool found = false;
    try {
      check_regular(stat);
      const std::string bytes = read_file(stat.path.c_str(), &found);
      if (!found) continue;
      proto::CacheEntryHeader header;
      proto::CacheEntryPayload payload;
      parse_entry(bytes, header, payload);
      fill_info(header, info);
      MF_CHECK(header.key() == info.key, DataLoss, "the file name says ", info.key, ", the header ",
               echo(header.key(), 80));
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

}  // namespace mf::engine
