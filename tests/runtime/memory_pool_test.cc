#include "runtime/memory_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "base/error.h"
#include "runtime/memory_format.h"
#include "runtime/storage.h"

namespace mf::runtime {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

PoolOptions options(size_t max_bytes, size_t block_bytes = 64 * kMiB) {
  PoolOptions out;
  out.max_bytes = max_bytes;
  out.block_bytes = block_bytes;
  return out;
}

TEST(FormatBytes, BinaryUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(256 * kMiB), "256 MiB");
  EXPECT_EQ(format_bytes(size_t(1) << 30), "1 GiB");
  EXPECT_EQ(format_bytes(size_t(1.1 * (size_t(1) << 30))), "1.1 GiB");
}

TEST(FormatBytes, StatsLine) {
  MemoryStats stats;
  stats.in_use_bytes = 12 * kMiB;
  stats.peak_in_use_bytes = 40 * kMiB;
  stats.cached_bytes = 8 * kMiB;
  stats.reserved_bytes = size_t(1) << 30;
  stats.system_allocations = 1;
  stats.limit_bytes = size_t(1) << 40;
  EXPECT_EQ(format_stats(stats),
            "in use 12 MiB, peak 40 MiB, cached 8 MiB, reserved 1 GiB in 1 system allocation, "
            "limit 1 TiB");
}

TEST(MemoryPool, AlignedAndWritable) {
  auto pool = make_memory_pool(options(256 * kMiB));
  std::vector<std::shared_ptr<Buffer>> buffers;
  for (size_t bytes : {1, 3, 63, 64, 65, 1000, 4096, 100000}) {
    auto buffer = pool->allocate(bytes, "test");
    ASSERT_NE(buffer->data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % kTensorAlignment, 0u) << bytes;
    EXPECT_EQ(buffer->size(), bytes);
    std::memset(buffer->data(), 0xab, bytes);
    buffers.push_back(buffer);
  }
  EXPECT_EQ(pool->stats().system_allocations, 1u);  // all fit in one block
}

TEST(MemoryPool, InUseAndPeakAccounting) {
  auto pool = make_memory_pool(options(256 * kMiB));
  auto a = pool->allocate(100, "a");   // rounds to 128
  auto b = pool->allocate(1000, "b");  // rounds to 1024
  EXPECT_EQ(pool->stats().in_use_bytes, 128u + 1024u);
  EXPECT_EQ(pool->stats().peak_in_use_bytes, 128u + 1024u);
  b.reset();
  EXPECT_EQ(pool->stats().in_use_bytes, 128u);
  EXPECT_EQ(pool->stats().peak_in_use_bytes, 128u + 1024u);
  EXPECT_EQ(pool->stats().cached_bytes, 1024u);
  pool->reset_peak();
  EXPECT_EQ(pool->stats().peak_in_use_bytes, 128u);
  a.reset();
  const MemoryStats stats = pool->stats();
  EXPECT_EQ(stats.in_use_bytes, 0u);
  EXPECT_EQ(stats.reserved_bytes, 64 * kMiB);
  EXPECT_EQ(stats.limit_bytes, 256 * kMiB);
}

// The allocation pattern of one "run" of a network: activations of assorted sizes, some freed
// early.
void run_pattern(MemoryPool& pool) {
  std::vector<std::shared_ptr<Buffer>> live;
  for (int layer = 0; layer < 20; ++layer) {
    live.push_back(pool.allocate(size_t(layer % 5 + 1) * 3 * kMiB + 17, "layer"));
    live.push_back(pool.allocate(4096 * (layer % 3 + 1), "bias"));
    if (live.size() > 6) {
      live.erase(live.begin(), live.begin() + 2);
    }
  }
  auto big = pool.allocate(100 * kMiB, "big");  // larger than a block: a block of its own
  std::memset(big->data(), 1, 4096);
}

TEST(MemoryPool, RepeatedPatternMakesNoNewSystemAllocations) {
  auto pool = make_memory_pool(options(1024 * kMiB, 32 * kMiB));
  run_pattern(*pool);
  const MemoryStats first = pool->stats();
  EXPECT_GT(first.system_allocations, 1u);
  EXPECT_EQ(first.in_use_bytes, 0u);
  for (int run = 0; run < 3; ++run) {
    run_pattern(*pool);
  }
  EXPECT_EQ(pool->stats().system_allocations, first.system_allocations);
  EXPECT_EQ(pool->stats().reserved_bytes, first.reserved_bytes);
}

TEST(MemoryPool, FreedChunksCoalesceForALargerRequest) {
  auto pool = make_memory_pool(options(256 * kMiB, 16 * kMiB));
  {
    auto a = pool->allocate(4 * kMiB, "a");
    auto b = pool->allocate(4 * kMiB, "b");
    auto c = pool->allocate(4 * kMiB, "c");
  }
  auto whole = pool->allocate(16 * kMiB, "whole");
  EXPECT_EQ(pool->stats().system_allocations, 1u);
}

char* at(const std::shared_ptr<Buffer>& buffer) {
  return static_cast<char*>(buffer->data());
}

TEST(MemoryPool, BestFitTakesTheSmallestFreeChunkThatFits) {
  auto pool = make_memory_pool(options(256 * kMiB, 64 * kMiB));
  // Free holes of 8, 2 and 4 MiB, kept apart by live separators so they cannot coalesce.
  auto h8 = pool->allocate(8 * kMiB, "h8");
  auto s1 = pool->allocate(kMiB, "s1");
  auto h2 = pool->allocate(2 * kMiB, "h2");
  auto s2 = pool->allocate(kMiB, "s2");
  auto h4 = pool->allocate(4 * kMiB, "h4");
  auto s3 = pool->allocate(kMiB, "s3");
  char* const p8 = at(h8);
  char* const p2 = at(h2);
  char* const p4 = at(h4);
  h8.reset();
  h2.reset();
  h4.reset();
  EXPECT_EQ(pool->stats().free_chunks, 4u);  // the three holes and the block's tail
  auto a = pool->allocate(3 * kMiB, "a");    // 2 is too small, 4 is the best fit
  EXPECT_EQ(at(a), p4);
  auto b = pool->allocate(2 * kMiB, "b");  // exact fit
  EXPECT_EQ(at(b), p2);
  auto c = pool->allocate(5 * kMiB, "c");  // only the 8 MiB hole (before the tail) fits
  EXPECT_EQ(at(c), p8);
  EXPECT_EQ(pool->stats().system_allocations, 1u);
}

TEST(MemoryPool, FreeingCoalescesWithBothNeighbours) {
  auto pool = make_memory_pool(options(256 * kMiB, 64 * kMiB));
  auto a = pool->allocate(4 * kMiB, "a");
  auto b = pool->allocate(4 * kMiB, "b");
  auto c = pool->allocate(4 * kMiB, "c");
  auto wall = pool->allocate(kMiB, "wall");  // keeps the three apart from the block's tail
  char* const base = at(a);
  a.reset();
  c.reset();
  EXPECT_EQ(pool->stats().free_chunks, 3u);  // a, c and the tail
  b.reset();                                 // joins a and c: one 12 MiB chunk
  EXPECT_EQ(pool->stats().free_chunks, 2u);
  auto whole = pool->allocate(12 * kMiB, "whole");
  EXPECT_EQ(at(whole), base);
  EXPECT_EQ(pool->stats().system_allocations, 1u);
  whole.reset();
  wall.reset();  // everything joins the tail: the block is one free chunk again
  const MemoryStats stats = pool->stats();
  EXPECT_EQ(stats.free_chunks, 1u);
  EXPECT_EQ(stats.largest_free_bytes, 64 * kMiB);
}

TEST(MemoryPool, NoSystemAllocationInASecondIterationAfterGrowingPastABlock) {
  // Each "iteration" holds more than one block at its peak, in assorted sizes freed out of order.
  auto pool = make_memory_pool(options(1024 * kMiB, 16 * kMiB));
  auto iteration = [&] {
    std::vector<std::shared_ptr<Buffer>> live;
    for (int i = 0; i < 40; ++i) {
      live.push_back(pool->allocate(size_t(i % 7 + 1) * 300 * 1024 + 64 * i, "act"));
      if (i % 3 == 2) live.erase(live.begin() + (i % static_cast<int>(live.size())));
    }
  };
  iteration();
  const MemoryStats first = pool->stats();
  EXPECT_GT(first.blocks, 1u);
  EXPECT_EQ(first.in_use_bytes, 0u);
  for (int i = 0; i < 5; ++i) iteration();
  const MemoryStats later = pool->stats();
  EXPECT_EQ(later.system_allocations, first.system_allocations);
  EXPECT_EQ(later.reserved_bytes, first.reserved_bytes);
}

TEST(MemoryPool, StatsSayWhatStaysReservedAndWhy) {
  auto pool = make_memory_pool(options(256 * kMiB, 64 * kMiB));
  auto keep = pool->allocate(4 * kMiB, "keep");
  { auto freed = pool->allocate(8 * kMiB, "freed"); }
  const MemoryStats stats = pool->stats();
  EXPECT_EQ(stats.reserved_bytes, 64 * kMiB);
  EXPECT_EQ(stats.in_use_bytes, 4 * kMiB);
  EXPECT_EQ(stats.cached_bytes, 8 * kMiB);
  EXPECT_EQ(stats.untouched_bytes, 52 * kMiB);
  EXPECT_EQ(stats.in_use_bytes + stats.cached_bytes + stats.untouched_bytes, stats.reserved_bytes);
  EXPECT_EQ(stats.blocks, 1u);
  EXPECT_EQ(describe_reserved(stats),
            "64 MiB reserved in 1 block: 4 MiB in use, 8 MiB freed and kept for reuse, 52 MiB "
            "mapped but never touched (costs no memory)");
}

TEST(MemoryPool, LargeBlocksStartOnAHugePageBoundary) {
  auto pool = make_memory_pool(options(256 * kMiB, 8 * kMiB));
  auto first = pool->allocate(64, "first");  // the first chunk of a fresh block is its base
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first->data()) % (2 * kMiB), 0u);
  auto big = pool->allocate(9 * kMiB + 5, "big");  // a block of its own, whole huge pages
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big->data()) % (2 * kMiB), 0u);
  EXPECT_EQ(pool->stats().reserved_bytes, 8 * kMiB + 10 * kMiB);
  std::memset(big->data(), 1, 9 * kMiB + 5);
}

TEST(MemoryPool, OutOfMemoryNamesOpBytesAndLimitAndPoolStaysUsable) {
  auto pool = make_memory_pool(options(size_t(1.1 * (size_t(1) << 30))));
  auto held = pool->allocate(size_t(1) << 30, "weights");
  try {
    pool->allocate(256 * kMiB, "matmul");
    FAIL() << "expected OutOfMemory";
  } catch (const mf::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kOutOfMemory);
    EXPECT_EQ(error.message(),
              "out of memory in op 'matmul': asked for 268435456 bytes (256 MiB) with 1073741824 "
              "bytes (1 GiB) "
              "in use; the limit max_device_memory is 1.1 GiB. Lower the batch size or raise "
              "max_device_memory.");
  }
  EXPECT_EQ(pool->stats().in_use_bytes, size_t(1) << 30);
  auto small = pool->allocate(kMiB, "after");  // still usable
  std::memset(small->data(), 0, kMiB);
  held.reset();
  auto again = pool->allocate(256 * kMiB, "matmul");  // fits once the weights are gone
  EXPECT_EQ(pool->stats().in_use_bytes, 256 * kMiB + kMiB);
}

TEST(MemoryPool, CachedMemoryIsReleasedBeforeFailing) {
  auto pool = make_memory_pool(options(64 * kMiB, 16 * kMiB));
  {
    std::vector<std::shared_ptr<Buffer>> buffers;
    for (int i = 0; i < 3; ++i) buffers.push_back(pool->allocate(15 * kMiB, "fill"));
  }
  EXPECT_EQ(pool->stats().cached_bytes, 45 * kMiB);
  // 40 MiB does not fit any cached block, and 45 cached + 40 new exceed 64: the cache must go
  // first.
  auto big = pool->allocate(40 * kMiB, "big");
  EXPECT_EQ(pool->stats().in_use_bytes, 40 * kMiB);
  EXPECT_LE(pool->stats().in_use_bytes + pool->stats().cached_bytes, 64 * kMiB);
}

TEST(MemoryPool, ConfigureChangesLimits) {
  auto pool = make_memory_pool(options(256 * kMiB));
  auto a = pool->allocate(8 * kMiB, "a");
  pool->configure(options(4 * kMiB));  // below what is in use: allowed
  EXPECT_EQ(pool->stats().limit_bytes, 4 * kMiB);
  EXPECT_THROW(pool->allocate(64, "tiny"), mf::Error);
  a.reset();
  auto b = pool->allocate(2 * kMiB, "b");
  EXPECT_THAT(
      [&] { pool->configure(options(0)); },
      testing::ThrowsMessage<mf::Error>(testing::HasSubstr("max_device_memory must be positive")));
}

TEST(MemoryPool, ReleaseCachedReturnsFreeBlocks) {
  auto pool = make_memory_pool(options(256 * kMiB, 8 * kMiB));
  auto keep = pool->allocate(kMiB, "keep");
  { auto big = pool->allocate(32 * kMiB, "big"); }
  EXPECT_EQ(pool->stats().reserved_bytes, 40 * kMiB);
  pool->release_cached();
  EXPECT_EQ(pool->stats().reserved_bytes, 8 * kMiB);
  EXPECT_EQ(pool->stats().cached_bytes, 0u);
  EXPECT_EQ(pool->stats().in_use_bytes, kMiB);
}

TEST(MemoryPool, ConcurrentAllocateAndFree) {
  auto pool = make_memory_pool(options(512 * kMiB, 16 * kMiB));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::shared_ptr<Buffer>> live;
      for (int i = 0; i < 2000; ++i) {
        const size_t bytes = size_t((i * 7919 + t * 104729) % 65536) + 1;
        auto buffer = pool->allocate(bytes, "thread");
        static_cast<unsigned char*>(buffer->data())[0] = static_cast<unsigned char>(t);
        static_cast<unsigned char*>(buffer->data())[bytes - 1] = static_cast<unsigned char>(t);
        live.push_back(std::move(buffer));
        if (live.size() > 16) live.erase(live.begin() + (i % 16));
      }
      for (auto& buffer : live) {
        EXPECT_EQ(static_cast<unsigned char*>(buffer->data())[0], static_cast<unsigned char>(t));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(pool->stats().in_use_bytes, 0u);
}

TEST(MemoryPool, BuffersMayOutliveTheirPool) {
  auto pool = make_memory_pool(options(64 * kMiB));
  auto buffer = pool->allocate(1000, "late");
  auto bytes = static_cast<unsigned char*>(buffer->data());
  for (int i = 0; i < 1000; ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  pool.reset();
  // The memory stays mapped and keeps its contents after the pool object is gone.
  ASSERT_EQ(buffer->size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(bytes[i], static_cast<unsigned char>(i * 7)) << "byte " << i;
  }
  std::memset(buffer->data(), 0, 1000);
  buffer
      .reset();  // frees into the state the buffer keeps alive (ASan/valgrind would flag a misuse)
}

TEST(MemoryPool, DefaultPoolIsShared) {
  // An allocation made through one call is accounted in the state every later call sees.
  const size_t before = default_pool().stats().in_use_bytes;
  auto buffer = default_pool().allocate(128 * 1024, "default");
  EXPECT_GE(default_pool().stats().in_use_bytes, before + 128 * 1024);
  buffer.reset();
  EXPECT_EQ(default_pool().stats().in_use_bytes, before);
}

TEST(Storage, WrapExternalCallsReleaseOnce) {
  int released = 0;
  std::vector<float> data(16);
  {
    auto buffer = wrap_external(data.data(), data.size() * sizeof(float), [&](void* p) {
      EXPECT_EQ(p, data.data());
      ++released;
    });
    auto copy = buffer;
    EXPECT_EQ(copy->size(), 64u);
  }
  EXPECT_EQ(released, 1);
  auto unpooled = allocate_unpooled(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(unpooled->data()) % kTensorAlignment, 0u);
}

}  // namespace
}  // namespace mf::runtime
