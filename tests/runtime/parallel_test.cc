#include "runtime/parallel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"

namespace mf::runtime {
namespace {

int cores() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

TEST(ParallelFor, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, cores()}) {
    ScopedIntraOpThreads scope(threads);
    for (int64_t n : {0, 1, 7, 64, 1000, 12345}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(n, 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
            << "n=" << n << " i=" << i << " threads=" << threads;
      }
    }
  }
}

std::vector<std::pair<int64_t, int64_t>> chunks_with(int threads, int64_t n, int64_t grain) {
  ScopedIntraOpThreads scope(threads);
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ParallelFor, ChunkBoundariesIndependentOfThreadCount) {
  const auto one = chunks_with(1, 1003, 100);
  ASSERT_EQ(one.size(), 11u);
  EXPECT_EQ(one.front(), std::make_pair(int64_t{0}, int64_t{100}));
  EXPECT_EQ(one.back(), std::make_pair(int64_t{1000}, int64_t{1003}));
  EXPECT_EQ(chunks_with(2, 1003, 100), one);
  EXPECT_EQ(chunks_with(cores(), 1003, 100), one);
}

double chunked_sum(int threads, const std::vector<float>& values, int64_t grain) {
  ScopedIntraOpThreads scope(threads);
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<float> partial(static_cast<size_t>((n + grain - 1) / grain), 0.0f);
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    float sum = 0.0f;
    for (int64_t i = begin; i < end; ++i) sum += values[static_cast<size_t>(i)];
    partial[static_cast<size_t>(begin / grain)] = sum;
  });
  float total = 0.0f;
  for (float p : partial) total += p;
  return total;
}

TEST(ParallelFor, ChunkedSumIsDeterministicAcrossThreadCounts) {
  std::vector<float> values(100003);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = 1.0f / static_cast<float>(i % 977 + 1) * ((i % 3) ? 1.0f : -0.7f);
  const double one = chunked_sum(1, values, 1024);
  EXPECT_EQ(chunked_sum(2, values, 1024), one);
  EXPECT_EQ(chunked_sum(cores(), values, 1024), one);
  EXPECT_EQ(chunked_sum(cores(), values, 1024), one);
}

TEST(ParallelFor, ExceptionsPropagate) {
  for (int threads : {1, cores()}) {
    ScopedIntraOpThreads scope(threads);
    EXPECT_THROW(parallel_for(1000, 10,
                              [](int64_t begin, int64_t) {
                                if (begin == 500) MF_FAIL(InvalidArgument, "bad chunk");
                              }),
                 mf::Error);
    EXPECT_THROW(parallel_for(1000, 10,
                              [](int64_t begin, int64_t) {
                                if (begin == 990) throw std::runtime_error("boom");
                              }),
                 std::runtime_error);
  }
}

// The chunks run on the OpenMP team (the one oneDNN's primitives use, so the two never compete for
// the cores); a parallel_for inside a chunk runs its own chunks right there, in order.
TEST(ParallelFor, ChunksRunOnTheOpenMpTeamAndNestedCallsRunInPlace) {
  if (cores() < 2) GTEST_SKIP() << "one core: parallel_for is serial";
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer builds run the chunks on threads of their own (parallel.cc)";
#endif
  ScopedIntraOpThreads scope(2);
  std::atomic<int> in_team{0}, chunks{0};
  std::mutex mutex;
  std::vector<std::vector<int64_t>> nested_orders;
  parallel_for(64, 1, [&](int64_t, int64_t) {
    ++chunks;
    if (omp_in_parallel() && omp_get_num_threads() == 2) ++in_team;
    const std::thread::id me = std::this_thread::get_id();
    std::vector<int64_t> order;
    parallel_for(8, 2, [&](int64_t begin, int64_t) {
      EXPECT_EQ(std::this_thread::get_id(), me);
      order.push_back(begin);
    });
    std::lock_guard<std::mutex> lock(mutex);
    nested_orders.push_back(order);
  });
  EXPECT_EQ(chunks.load(), 64);
  EXPECT_EQ(in_team.load(), 64);
  for (const auto& order : nested_orders) EXPECT_EQ(order, (std::vector<int64_t>{0, 2, 4, 6}));
}

TEST(IntraOpThreads, ScopedNestsRestoresAndCapsToCores) {
  const int outer = intra_op_threads();
  EXPECT_EQ(outer, cores());
  {
    ScopedIntraOpThreads one(1);
    EXPECT_EQ(intra_op_threads(), 1);
    {
      ScopedIntraOpThreads many(cores() + 100);
      EXPECT_EQ(intra_op_threads(), cores());
    }
    EXPECT_EQ(intra_op_threads(), 1);
  }
  EXPECT_EQ(intra_op_threads(), outer);
  EXPECT_THROW(ScopedIntraOpThreads bad(0), mf::Error);
}

TEST(IntraOpThreads, ChunksSeeTheCallersCount) {
  ScopedIntraOpThreads two(std::min(2, cores()));
  std::atomic<int> mismatches{0};
  parallel_for(64, 1, [&](int64_t, int64_t) {
    if (intra_op_threads() != std::min(2, cores())) ++mismatches;
  });
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(IntraOpThreads, ThreadLocal) {
  ScopedIntraOpThreads one(1);
  int seen = 0;
  std::thread([&] { seen = intra_op_threads(); }).join();
  EXPECT_EQ(seen, cores());
}

}  // namespace
}  // namespace mf::runtime
