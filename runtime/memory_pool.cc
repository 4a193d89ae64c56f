#include "runtime/memory_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "base/error.h"
#include "runtime/memory_format.h"
#include "runtime/profiler.h"

namespace mf::runtime {

Buffer::Buffer()
    : id_([] {
        static std::atomic<uint64_t> next{1};
        return next.fetch_add(1, std::memory_order_relaxed);
      }()) {}

namespace {

size_t page_size() {
  static const size_t page = [] {
    const long value = sysconf(_SC_PAGESIZE);
    return value > 0 ? static_cast<size_t>(value) : size_t{4096};
  }();
  return page;
}

size_t round_up(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

constexpr size_t kHugePage = size_t(2) << 20;

std::atomic<bool> huge_pages{true};  // set_huge_pages

bool huge_pages_enabled() {
  return huge_pages.load(std::memory_order_relaxed);
}

// One piece of a block: handed out, or free. `dirty` counts the bytes of a free chunk that have
// been handed out before (and so are committed pages the pool is holding); fresh block space is not
// dirty.
struct Chunk {
  size_t size = 0;
  bool free = true;
  size_t dirty = 0;
};

// A region obtained from the system with mmap; chunks tile it exactly, keyed by offset.
struct Block {
  char* base = nullptr;
  size_t size = 0;
  std::map<size_t, Chunk> chunks;
};

// (size, block id, offset): ordered so lower_bound(size) is the best fit, ties to the oldest block.
using FreeKey = std::tuple<size_t, uint64_t, size_t>;

// The pool's state, shared by the pool and every buffer it handed out, so a buffer outliving its
// pool still frees safely. All fields are guarded by mutex_.
class PoolState {
 public:
  explicit PoolState(const PoolOptions& options) { apply(options); }

  ~PoolState() {
    for (auto& [id, block] : blocks_) {
      munmap(block.base, block.size);
    }
  }

  void apply(const PoolOptions& options) {
    MF_CHECK(options.max_bytes > 0, InvalidArgument, "max_device_memory must be positive");
    MF_CHECK(options.block_bytes > 0, InvalidArgument, "mempool_block_size must be positive");
    std::lock_guard<std::mutex> lock(mutex_);
    options_ = options;
    if (charged() > options_.max_bytes) {
      release_cached_locked();
    }
  }

  // Returns {block id, offset, pointer} of a fresh chunk of at least `bytes`.
  std::tuple<uint64_t, size_t, void*> take(size_t bytes, std::string_view op_name) {
    MF_CHECK(bytes <= std::numeric_limits<size_t>::max() - kTensorAlignment, OutOfMemory,
             oom_prefix(op_name), "asked for ", bytes, " bytes, more than any memory can hold");
    const size_t rounded = round_up(std::max<size_t>(bytes, 1), kTensorAlignment);
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<FreeKey> fit = best_fit(rounded);
    if (charged() + extra_charge(fit, rounded) > options_.max_bytes) {
      // Cached chunks count against the limit; giving them back may be enough.
      release_cached_locked();
      fit = best_fit(rounded);
      if (charged() + extra_charge(fit, rounded) > options_.max_bytes) {
        MF_FAIL(OutOfMemory, oom_prefix(op_name), "asked for ", bytes, " bytes (",
                format_bytes(bytes), ") with ", in_use_, " bytes (", format_bytes(in_use_),
                ") in use; the limit max_device_memory is ", format_bytes(options_.max_bytes),
                ". Lower the batch size or raise max_device_memory.");
      }
    }
    if (!fit) {
      fit = grow(rounded, bytes, op_name);
    }
    return split(*fit, rounded);
  }

  void give_back(uint64_t block_id, size_t offset) {
    std::lock_guard<std::mutex> lock(mutex_);
    Block& block = blocks_.at(block_id);
    auto it = block.chunks.find(offset);
    Chunk& chunk = it->second;
    in_use_ -= chunk.size;
    chunk.free = true;
    chunk.dirty = chunk.size;
    cached_ += chunk.size;
    // Coalesce with free neighbours so a later large request can reuse the space.
    auto next = std::next(it);
    if (next != block.chunks.end() && next->second.free) {
      free_.erase({next->second.size, block_id, next->first});
      chunk.size += next->second.size;
      chunk.dirty += next->second.dirty;
      block.chunks.erase(next);
    }
    if (it != block.chunks.begin()) {
      auto prev = std::prev(it);
      if (prev->second.free) {
        free_.erase({prev->second.size, block_id, prev->first});
        prev->second.size += chunk.size;
        prev->second.dirty += chunk.dirty;
        block.chunks.erase(it);
        it = prev;
      }
    }
    free_.insert({it->second.size, block_id, it->first});
  }

  MemoryStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    MemoryStats out;
    out.in_use_bytes = in_use_;
    out.peak_in_use_bytes = peak_;
    out.reserved_bytes = reserved_;
    out.system_allocations = system_allocations_;
    out.limit_bytes = options_.max_bytes;
    out.cached_bytes = cached_;
    out.untouched_bytes = reserved_ - std::min(reserved_, in_use_ + cached_);
    out.blocks = blocks_.size();
    out.free_chunks = free_.size();
    out.largest_free_bytes = free_.empty() ? 0 : std::get<0>(*free_.rbegin());
    return out;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = in_use_;
  }

  void release_cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached_locked();
  }

 private:
  // What counts against max_device_memory: chunks handed out plus freed chunks the pool keeps
  // committed. Untouched block space is not counted: a 1 GiB block reservation costs no memory
  // until used.
  size_t charged() const { return in_use_ + cached_; }

  std::optional<FreeKey> best_fit(size_t rounded) const {
    auto it = free_.lower_bound({rounded, 0, 0});
    if (it == free_.end()) {
      return std::nullopt;
    }
    return *it;
  }

  size_t extra_charge(const std::optional<FreeKey>& fit, size_t rounded) const {
    if (!fit) {
      return rounded;
    }
    const auto& [size, block_id, offset] = *fit;
    const size_t dirty = blocks_.at(block_id).chunks.at(offset).dirty;
    return rounded - std::min(dirty, rounded);
  }

  FreeKey grow(size_t rounded, size_t asked, std::string_view op_name) {
    const size_t size = round_up(std::max(rounded, options_.block_bytes), block_granule(rounded));
    void* base = map_block(size);
    if (base == nullptr) {
      release_cached_locked();
      base = map_block(size);
    }
    MF_CHECK(base != nullptr, OutOfMemory, oom_prefix(op_name), "asked for ", asked, " bytes (",
             format_bytes(asked), ") but the system refused a block of ", format_bytes(size),
             " with ", format_bytes(reserved_),
             " already reserved. Lower the batch size or mempool_block_size.");
    ++system_allocations_;
    reserved_ += size;
    profile_memory(double(reserved_));
    const uint64_t id = next_block_id_++;
    Block& block = blocks_[id];
    block.base = static_cast<char*>(base);
    block.size = size;
    block.chunks[0] = Chunk{size, true, 0};
    free_.insert({size, id, 0});
    return {size, id, 0};
  }

  // Blocks of at least a huge page are whole huge pages; smaller ones whole base pages.
  static size_t block_granule(size_t rounded) {
    return rounded >= kHugePage ? kHugePage : page_size();
  }

  // Maps `size` bytes of address space, no memory yet: a page is committed (and zeroed by the
  // kernel) when first touched, so a 1 GiB block costs only what the runs write into it. Faults on
  // fresh pages are what a first run pays beyond the steady state (about 10 us per 4 KiB page on
  // a VM), so a block of at least 2 MiB starts on a 2 MiB boundary and asks for transparent huge
  // pages: one fault per 2 MiB instead of 512. Returns null when the system refuses.
  static void* map_block(size_t size) {
    const bool huge = size >= kHugePage && size % kHugePage == 0;
    const size_t span = huge ? size + kHugePage : size;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    if (!huge) return raw;
    // Trim to a 2 MiB aligned range of `size` bytes.
    const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = round_up(begin, kHugePage);
    if (aligned > begin) munmap(raw, aligned - begin);
    const uintptr_t end = aligned + size;
    if (begin + span > end) munmap(reinterpret_cast<void*>(end), begin + span - end);
#ifdef MADV_HUGEPAGE
    if (huge_pages_enabled()) madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
#endif
    return reinterpret_cast<void*>(aligned);
  }

  std::tuple<uint64_t, size_t, void*> split(const FreeKey& key, size_t rounded) {
    const auto [size, block_id, offset] = key;
    free_.erase(key);
    Block& block = blocks_.at(block_id);
    Chunk& chunk = block.chunks.at(offset);
    // Dirty bytes are assumed to sit at the front: an approximation that keeps the totals
    // consistent.
    const size_t reused = std::min(chunk.dirty, rounded);
    cached_ -= reused;
    if (size > rounded) {
      block.chunks[offset + rounded] = Chunk{size - rounded, true, chunk.dirty - reused};
      free_.insert({size - rounded, block_id, offset + rounded});
    }
    Chunk& taken = block.chunks.at(offset);
    taken.size = rounded;
    taken.free = false;
    taken.dirty = 0;
    in_use_ += rounded;
    peak_ = std::max(peak_, in_use_);
    return {block_id, offset, block.base + offset};
  }

  void release_cached_locked() {
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      Block& block = it->second;
      const Chunk& first = block.chunks.begin()->second;
      if (block.chunks.size() == 1 && first.free) {
        free_.erase({first.size, it->first, 0});
        cached_ -= first.dirty;
        reserved_ -= block.size;
        munmap(block.base, block.size);
        it = blocks_.erase(it);
        continue;
      }
      // A block still partly in use stays mapped; its free pages go back to the system.
      for (auto& [offset, chunk] : block.chunks) {
        if (!chunk.free || chunk.dirty == 0) {
          continue;
        }
        const uintptr_t begin =
            round_up(reinterpret_cast<uintptr_t>(block.base + offset), page_size());
        const uintptr_t end = reinterpret_cast<uintptr_t>(block.base + offset + chunk.size) /
                              page_size() * page_size();
        if (end > begin) {
          madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
        }
        cached_ -= chunk.dirty;
        chunk.dirty = 0;
      }
      ++it;
    }
  }

  static std::string oom_prefix(std::string_view op_name) {
    if (op_name.empty()) {
      return "out of memory: ";
    }
    return "out of memory in op '" + std::string(op_name) + "': ";
  }

  mutable std::mutex mutex_;
  PoolOptions options_;
  std::map<uint64_t, Block> blocks_;
  std::set<FreeKey> free_;
  uint64_t next_block_id_ = 0;
  size_t in_use_ = 0;
  size_t peak_ = 0;
  size_t cached_ = 0;
  size_t reserved_ = 0;
  size_t system_allocations_ = 0;
};

// A chunk of the pool; returns itself to the pool when the last owner lets go.
class PoolBuffer final : public Buffer {
 public:
  PoolBuffer(std::shared_ptr<PoolState> state, uint64_t block_id, size_t offset, void* data,
             size_t size)
      : state_(std::move(state)), block_id_(block_id), offset_(offset), data_(data), size_(size) {}
  ~PoolBuffer() override { state_->give_back(block_id_, offset_); }

  void* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  std::shared_ptr<PoolState> state_;
  uint64_t block_id_;
  size_t offset_;
  void* data_;
  size_t size_;
};

// The best-fit caching pool over mmap'd blocks.
// Thread-safe; the limit covers bytes in use plus freed bytes kept for reuse.
class CachingPool final : public MemoryPool {
 public:
  explicit CachingPool(const PoolOptions& options) : state_(std::make_shared<PoolState>(options)) {}

  std::shared_ptr<Buffer> allocate(size_t bytes, std::string_view op_name) override {
    const auto [block_id, offset, data] = state_->take(bytes, op_name);
    try {
      return std::make_shared<PoolBuffer>(state_, block_id, offset, data, bytes);
    } catch (...) {
      state_->give_back(block_id, offset);
      throw;
    }
  }
  MemoryStats stats() const override { return state_->stats(); }
  void reset_peak() override { state_->reset_peak(); }
  void configure(const PoolOptions& options) override { state_->apply(options); }
  void release_cached() override { state_->release_cached(); }

 private:
  std::shared_ptr<PoolState> state_;
};

}  // namespace

std::string describe_reserved(const MemoryStats& stats) {
  return format_bytes(stats.reserved_bytes) + " reserved in " + std::to_string(stats.blocks) +
         (stats.blocks == 1 ? " block: " : " blocks: ") + format_bytes(stats.in_use_bytes) +
         " in use, " + format_bytes(stats.cached_bytes) + " freed and kept for reuse, " +
         format_bytes(stats.untouched_bytes) + " mapped but never touched (costs no memory)";
}

std::unique_ptr<MemoryPool> make_memory_pool(const PoolOptions& options) {
  return std::make_unique<CachingPool>(options);
}

MemoryPool& default_pool() {
  // Leaked on purpose: buffers held by static objects may be freed after any destructor would run.
  static MemoryPool* pool = make_memory_pool(PoolOptions{}).release();
  return *pool;
}

void set_huge_pages(bool enabled) {
  huge_pages = enabled;
}

}  // namespace mf::runtime
