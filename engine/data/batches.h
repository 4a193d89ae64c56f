#pragma once
// Batches over an ImageSet, for C++ training loops and the `mf` shell: MindSpore's batch_size,
// drop_remainder, shuffle (with a seed) and sharding (num_shards, shard_id), yielding
// (images, labels) tensors.
//
// Shuffling is a permutation drawn anew for each epoch from (seed, epoch) by a generator this file
// defines (SplitMix64 and Lemire's unbiased bounded draw), not std::shuffle or
// std::uniform_int_distribution, whose outputs differ between standard libraries: the same seed
// gives the same order on every machine. Every shard draws the same permutation, then takes every
// num_shards-th sample of it from position shard_id, so the shards of an epoch partition the set
// exactly (MindSpore's DistributedSampler instead pads shards to equal size by repeating samples).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/data/fashion_mnist.h"
#include "engine/tensor.h"

namespace mf::data {

struct BatchOptions {
  int64_t batch_size = 32;      // > 0
  bool drop_remainder = false;  // drop the last batch of an epoch when it is short
  bool shuffle = false;
  uint64_t seed = 0;  // with shuffle: the same seed, the same order of every epoch, everywhere
  // Both or neither; 0 <= shard_id < num_shards.
  std::optional<int64_t> num_shards = std::nullopt;
  std::optional<int64_t> shard_id = std::nullopt;
};

// A permutation of 0..n-1 drawn from (seed, epoch); identical on every platform.
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, uint64_t epoch);

// The samples one shard visits in an epoch, in order (before batching). Checks the options:
// InvalidArgument for a batch size <= 0, a shard id without a shard count (or the reverse), or a
// shard id outside [0, num_shards).
std::vector<int64_t> epoch_indices(int64_t n, const BatchOptions& options, int64_t epoch);

struct Batch {
  Tensor images;  // float32 (B, C, H, W) by default; whatever the transform makes otherwise
  Tensor labels;  // int32 (B)
};

// Makes a batch's image tensor from the samples `indices` of `set`.
using ImageTransform = std::function<Tensor(const ImageSet& set, std::span<const int64_t> indices)>;
// float32 (B, C, H, W), each pixel p as p * scale + shift: the default, scale 1/255 and shift 0,
// gives [0, 1] (MindSpore's Rescale(1/255, 0) then HWC2CHW). A normalization (x - mean) / std of
// the [0, 1] values is scale 1 / (255 std) and shift -mean / std.
ImageTransform rescale_to_chw(float scale = 1.0f / 255.0f, float shift = 0.0f);

class Batches {
 public:
  explicit Batches(std::shared_ptr<const ImageSet> set, BatchOptions options = {},
                   ImageTransform transform = rescale_to_chw());

  // Samples and batches this shard sees in one epoch.
  int64_t num_samples() const { return int64_t(order_.size()); }
  int64_t num_batches() const;
  int64_t epoch() const { return epoch_; }

  // Starts an epoch (0 is started by the constructor): reshuffles when shuffling.
  void start_epoch(int64_t epoch);
  // The next batch of the current epoch, or false at its end.
  bool next(Batch& batch);
  // Batch i of the current epoch, 0 <= i < num_batches().
  Batch batch(int64_t i) const;

 private:
  std::shared_ptr<const ImageSet> set_;
  BatchOptions options_;
  ImageTransform transform_;
  int64_t epoch_ = 0;
  int64_t next_batch_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace mf::data
