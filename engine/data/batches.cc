#include "engine/data/batches.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace mf::data {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator whose output is fixed by its definition,
// so a seed means the same sequence everywhere.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0, without modulo bias (Lemire 2019).
  uint64_t below(uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    auto low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

void check_options(const BatchOptions& options) {
  MF_CHECK(options.batch_size > 0, InvalidArgument, "batch_size must be a positive integer, got ",
           options.batch_size);
  MF_CHECK(options.num_shards.has_value() == options.shard_id.has_value(), InvalidArgument,
           "num_shards and shard_id must be given together (got only ",
           options.num_shards ? "num_shards" : "shard_id", ")");
  if (options.num_shards) {
    MF_CHECK(*options.num_shards > 0, InvalidArgument, "num_shards must be positive, got ",
             *options.num_shards);
    MF_CHECK(*options.shard_id >= 0 && *options.shard_id < *options.num_shards, InvalidArgument,
             "shard_id ", *options.shard_id, " is not in [0, ", *options.num_shards,
             ") for num_shards ", *options.num_shards);
  }
}

}  // namespace

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, uint64_t epoch) {
  MF_CHECK(n >= 0, InvalidArgument, "shuffled_indices: negative count ", n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  // Each epoch's stream starts from the seed and the epoch mixed together, so epochs differ and
  // nearby seeds give unrelated orders.
  SplitMix64 mix(seed);
  SplitMix64 rng(mix.next() ^ SplitMix64(epoch).next());
  // Fisher-Yates from the back.
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = int64_t(rng.below(uint64_t(i) + 1));
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

std::vector<int64_t> epoch_indices(int64_t n, const BatchOptions& options, int64_t epoch) {
  check_options(options);
  std::vector<int64_t> all;
  if (options.shuffle) {
    all = shuffled_indices(n, options.seed, uint64_t(epoch));
  } else {
    all.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) all[size_t(i)] = i;
  }
  if (!options.num_shards) return all;
  std::vector<int64_t> mine;
  for (int64_t i = *options.shard_id; i < n; i += *options.num_shards)
    mine.push_back(all[size_t(i)]);
  return mine;
}

ImageTransform rescale_to_chw(float scale, float shift) {
  return [scale, shift](const ImageSet& set, std::span<const int64_t> indices) {
    const int64_t b = int64_t(indices.size()), c = set.channels, h = set.height, w = set.width;
    Tensor out = Tensor::empty({b, c, h, w}, DType::kFloat32);
    auto* dst = static_cast<float*>(out.mutable_raw_data());
    const int64_t plane = h * w;
    for (int64_t n = 0; n < b; ++n) {
      const uint8_t* src = set.images.data() + indices[size_t(n)] * set.image_bytes();
      float* image = dst + n * c * plane;
      // HWC bytes to CHW floats.
      for (int64_t p = 0; p < plane; ++p) {
        for (int64_t ch = 0; ch < c; ++ch)
          image[ch * plane + p] = float(src[p * c + ch]) * scale + shift;
      }
    }
    return out;
  };
}

Batches::Batches(std::shared_ptr<const ImageSet> set, BatchOptions options,
                 ImageTransform transform)
    : set_(std::move(set)), options_(std::move(options)), transform_(std::move(transform)) {
  MF_CHECK(set_ != nullptr, InvalidArgument, "Batches: no image set");
  MF_CHECK(transform_ != nullptr, InvalidArgument, "Batches: no image transform");
  MF_CHECK(int64_t(set_->images.size()) == set_->size() * set_->image_bytes(), InvalidArgument,
           "Batches: the image set holds ", set_->images.size(), " image bytes for ", set_->size(),
           " labels of ", set_->image_bytes(), "-byte images");
  start_epoch(0);
}

int64_t Batches::num_batches() const {
  const int64_t n = num_samples(), b = options_.batch_size;
  return options_.drop_remainder ? n / b : (n + b - 1) / b;
}

void Batches::start_epoch(int64_t epoch) {
  MF_CHECK(epoch >= 0, InvalidArgument, "Batches: negative epoch ", epoch);
  order_ = epoch_indices(set_->size(), options_, epoch);
  epoch_ = epoch;
  next_batch_ = 0;
}

bool Batches::next(Batch& batch) {
  if (next_batch_ >= num_batches()) return false;
  batch = this->batch(next_batch_++);
  return true;
}

Batch Batches::batch(int64_t i) const {
  MF_CHECK(i >= 0 && i < num_batches(), InvalidArgument, "Batches: batch ", i, " is not in [0, ",
           num_batches(), ")");
  const int64_t begin = i * options_.batch_size;
  const int64_t end = std::min(begin + options_.batch_size, num_samples());
  const std::span<const int64_t> indices(order_.data() + begin, size_t(end - begin));
  Batch out;
  out.images = transform_(*set_, indices);
  std::vector<int32_t> labels;
  labels.reserve(indices.size());
  for (const int64_t index : indices) labels.push_back(set_->labels[size_t(index)]);
  out.labels = Tensor::from_vector(labels, {int64_t(labels.size())});
  return out;
}

}  // namespace mf::data
