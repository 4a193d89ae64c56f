#pragma once
// The device memory pool: grows in blocks of mempool_block_size (or one block per large request),
// never holds more than max_device_memory, and keeps freed memory for reuse, so a second run of a
// network allocates nothing new from the system. Going over the limit throws OutOfMemory naming the
// op, the bytes asked for and the limit; the pool stays usable afterwards.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace mf::runtime {

inline constexpr size_t kTensorAlignment = 64;

// What the pool holds. reserved_bytes = in_use_bytes + cached_bytes + untouched_bytes: memory
// handed out, memory freed and kept committed for reuse (so a second run makes no system
// allocation), and mapped address space no run has written yet (it costs no memory).
struct MemoryStats {
  size_t in_use_bytes = 0;        // handed out now
  size_t peak_in_use_bytes = 0;   // highest in_use since the last reset_peak()
  size_t reserved_bytes = 0;      // obtained from the system and held by the pool
  size_t system_allocations = 0;  // how many times the pool asked the system for memory
  size_t limit_bytes = 0;
  size_t cached_bytes =
      0;  // freed chunks kept committed for reuse; counts against the limit with in_use
  size_t untouched_bytes = 0;     // reserved, never handed out: address space only
  size_t blocks = 0;              // blocks held now (each one mmap)
  size_t free_chunks = 0;         // free pieces of those blocks, after coalescing
  size_t largest_free_bytes = 0;  // the largest request the pool can serve without growing
};

// "1 GiB reserved in 1 block: 48 MiB in use, 12 MiB freed and kept for reuse, 964 MiB mapped but
// never touched (costs no memory)".
std::string describe_reserved(const MemoryStats& stats);

// Whether pool blocks of 2 MiB and more are mapped with transparent huge pages (on by default).
// Set by the tool at start-up (`mf` reads MF_POOL_HUGE_PAGES=0 to turn it off, for measuring):
// the library never reads the environment.
void set_huge_pages(bool enabled);

struct PoolOptions {
  size_t max_bytes = size_t(1024) << 30;  // max_device_memory
  size_t block_bytes = size_t(1) << 30;   // mempool_block_size
};

// An allocation from the pool. Freed (returned to the pool) when the last shared_ptr goes away.
//
// Content identity, for caches of what a kernel derives from the bytes (weights reordered into a
// kernel's layout): id() is unique for the life of the process and never reused (not even when
// the memory is), and version() grows on every write through Tensor::mutable_raw_data. Memory that
// someone else owns (ExternalBuffer) may be written behind the engine's back: it says so with
// owns_its_bytes() == false and is never cached.
class Buffer {
 public:
  Buffer();
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  virtual void* data() const = 0;
  virtual size_t size() const = 0;

  uint64_t id() const { return id_; }
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  void mark_written() { version_.fetch_add(1, std::memory_order_acq_rel); }
  virtual bool owns_its_bytes() const { return true; }
  // {id, version} for a kernel to key what it derives from the bytes (ir::TensorView::content_id),
  // or {0, 0} when it must not keep anything: memory another owner may write.
  std::pair<uint64_t, uint64_t> content_identity() const {
    return owns_its_bytes() ? std::pair<uint64_t, uint64_t>{id(), version()}
                            : std::pair<uint64_t, uint64_t>{0, 0};
  }

 private:
  const uint64_t id_;
  std::atomic<uint64_t> version_{0};
};

class MemoryPool {
 public:
  virtual ~MemoryPool() = default;
  // 64-byte aligned, uninitialised. `op_name` only feeds the OutOfMemory message.
  virtual std::shared_ptr<Buffer> allocate(size_t bytes, std::string_view op_name) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  // Applies new limits; shrinking below what is in use is allowed (later allocations fail until
  // freed).
  virtual void configure(const PoolOptions& options) = 0;
  // Returns cached free memory to the system.
  virtual void release_cached() = 0;
};

// The process-wide pool (thread-safe). Never destroyed, so buffers in static objects free safely.
MemoryPool& default_pool();

// A separate best-fit caching pool (tests, and executors that want their own accounting). Its
// buffers may outlive it.
std::unique_ptr<MemoryPool> make_memory_pool(const PoolOptions& options = {});

}  // namespace mf::runtime
