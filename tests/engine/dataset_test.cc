// engine/data/: the IDX reader (raw and gzip, and every way a file can be damaged), Fashion-MNIST
// loading, and batches (shuffling determinism, sharding, drop_remainder). The IDX files are
// written by the tests; one test reads Debian's real Fashion-MNIST package when it is installed.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "base/error.h"
#include "engine/data/batches.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/idx.h"
#include "tests/unique_temp_path.h"

namespace mf::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::unique_temp_path("mf_dataset");
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const Bytes& bytes) {
    const auto path = dir_ / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return path;
  }

  fs::path dir_;
};

// The error kind and a part of the message of what `fn` throws.
template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

Bytes pixels(size_t n) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = uint8_t(i * 7 + 3);
  return out;
}

// n images of h x w, image i filled with i, and labels i % 10.
std::pair<Bytes, Bytes> image_files(int64_t n, int64_t h = 4, int64_t w = 3) {
  Bytes images(size_t(n * h * w));
  Bytes labels(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    std::fill_n(images.begin() + i * h * w, h * w, uint8_t(i));
    labels[size_t(i)] = uint8_t(i % 10);
  }
  return {encode_idx(IdxType::kUInt8, {n, h, w}, images.data()),
          encode_idx(IdxType::kUInt8, {n}, labels.data())};
}

TEST_F(DatasetTest, RawAndGzipRoundTrip) {
  const Bytes data = pixels(2 * 3 * 5);
  const Bytes file = encode_idx(IdxType::kUInt8, {2, 3, 5}, data.data());
  for (const auto& path : {write("a.idx", file), write("a.idx.gz", gzip_compress(file))}) {
    const IdxArray array = read_idx(path);
    EXPECT_EQ(array.type, IdxType::kUInt8);
    EXPECT_EQ(array.shape, (ir::Shape{2, 3, 5}));
    EXPECT_EQ(array.bytes, data);
  }
}

TEST_F(DatasetTest, WideTypesAreBigEndianInTheFile) {
  const std::vector<int32_t> values = {1, -2, 0x01020304};
  const Bytes file = encode_idx(IdxType::kInt32, {3}, values.data());
  EXPECT_EQ(Bytes(file.begin(), file.begin() + 8), (Bytes{0, 0, 0x0c, 1, 0, 0, 0, 3}));
  EXPECT_EQ(Bytes(file.end() - 4, file.end()), (Bytes{1, 2, 3, 4}));
  const IdxArray array = read_idx(write("i.idx.gz", gzip_compress(file)));
  std::vector<int32_t> back(3);
  std::memcpy(back.data(), array.bytes.data(), 12);
  EXPECT_EQ(back, values);
  const std::vector<double> doubles = {0.5, -1e300};
  const IdxArray d = read_idx(write("d.idx", encode_idx(IdxType::kFloat64, {2}, doubles.data())));
  EXPECT_EQ(d.type, IdxType::kFloat64);
  EXPECT_EQ(0, std::memcmp(d.bytes.data(), doubles.data(), 16));
}

TEST_F(DatasetTest, EmptyArray) {
  const IdxArray array =
      read_idx(write("e.idx", encode_idx(IdxType::kUInt8, {0, 28, 28}, nullptr)));
  EXPECT_EQ(array.shape, (ir::Shape{0, 28, 28}));
  EXPECT_TRUE(array.bytes.empty());
}

TEST_F(DatasetTest, TruncatedAtEveryCutIsDataLoss) {
  const Bytes data = pixels(4 * 6);
  const Bytes file = encode_idx(IdxType::kUInt8, {4, 6}, data.data());
  const Bytes gz = gzip_compress(file);
  for (size_t cut = 0; cut < file.size(); ++cut) {
    const auto path = write("raw_cut", Bytes(file.begin(), file.begin() + cut));
    expect_error([&] { read_idx(path); }, ErrorKind::kDataLoss, "raw_cut");
  }
  for (size_t cut = 0; cut < gz.size(); ++cut) {
    const auto path = write("gz_cut", Bytes(gz.begin(), gz.begin() + cut));
    expect_error([&] { read_idx(path); }, ErrorKind::kDataLoss, "gz_cut");
  }
}

TEST_F(DatasetTest, MessagesSayWhatWasWrong) {
  const Bytes data = pixels(6);
  Bytes file = encode_idx(IdxType::kUInt8, {6}, data.data());
  expect_error([&] { read_idx(write("short", Bytes(file.begin(), file.end() - 2))); },
               ErrorKind::kDataLoss, "needs 6 bytes of data after the header, the file holds 4");
  Bytes longer = file;
  longer.push_back(0);
  expect_error([&] { read_idx(write("long", longer)); }, ErrorKind::kDataLoss,
               "1 bytes after the data its header declares");
  Bytes magic = file;
  magic[0] = 'P';
  expect_error([&] { read_idx(write("magic", magic)); }, ErrorKind::kDataLoss,
               "not an IDX file (magic 50 00 08 01");
  Bytes type = file;
  type[2] = 0x0a;
  expect_error([&] { read_idx(write("type", type)); }, ErrorKind::kDataLoss,
               "unknown element type code 0x0a");
  Bytes rank = file;
  rank[3] = 0;
  expect_error([&] { read_idx(write("rank", rank)); }, ErrorKind::kDataLoss, "rank 0");
  expect_error([&] { read_idx(dir_ / "absent.idx"); }, ErrorKind::kNotFound, "absent.idx");
  expect_error([&] { read_idx(dir_); }, ErrorKind::kInvalidArgument, "not a regular file");
}

TEST_F(DatasetTest, OverflowingDimensionsAreRefusedBeforeAllocating) {
  // 0xffffffff^3 overflows int64; 2^31 * 2^31 exceeds the tensor bound without overflowing.
  Bytes header = {0, 0, 0x08, 3};
  for (int i = 0; i < 12; ++i) header.push_back(0xff);
  expect_error([&] { read_idx(write("huge", header)); }, ErrorKind::kDataLoss,
               "describe more elements than any tensor may hold");
  expect_error([&] { read_idx(write("huge.gz", gzip_compress(header))); }, ErrorKind::kDataLoss,
               "describe more elements");
  const Bytes big = {0, 0, 0x08, 2, 0x80, 0, 0, 0, 0x80, 0, 0, 0};
  expect_error([&] { read_idx(write("big", big)); }, ErrorKind::kDataLoss, "describe more");
  // Within the element bound but above the caller's byte limit.
  const Bytes limited = {0, 0, 0x0e, 1, 0, 0, 0x10, 0};  // 4096 float64: 32 KiB
  expect_error([&] { read_idx(write("limited", limited), 1024); }, ErrorKind::kInvalidArgument,
               "more than the limit of 1024 bytes");
}

TEST_F(DatasetTest, GzipDamage) {
  const Bytes data = pixels(3000);
  const Bytes file = encode_idx(IdxType::kUInt8, {3000}, data.data());
  const Bytes gz = gzip_compress(file);
  // A flipped byte in the deflate data: corrupt data or a CRC mismatch, never garbage accepted.
  for (size_t at = 12; at < gz.size(); at += 7) {
    Bytes bad = gz;
    bad[at] ^= 0x5a;
    const auto path = write("flip.gz", bad);
    try {
      const IdxArray array = read_idx(path);
      ADD_FAILURE() << "a flipped byte at " << at << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << e.what();
    }
  }
  Bytes trailing = gz;
  trailing.push_back(7);
  expect_error([&] { read_idx(write("trail.gz", trailing)); }, ErrorKind::kDataLoss,
               "unexpected bytes after the gzip stream");
  expect_error(
      [&] {
        read_idx(write("junk.gz", {0x1f, 0x8b, 1, 2, 3, 4, 5}));
      },
      ErrorKind::kDataLoss, "gzip");
}

TEST_F(DatasetTest, GzipSizeClaimedLargerOrSmallerThanData) {
  // The header claims 100 elements; the stream holds 50.
  Bytes file = {0, 0, 0x08, 1, 0, 0, 0, 100};
  const Bytes data = pixels(50);
  file.insert(file.end(), data.begin(), data.end());
  expect_error([&] { read_idx(write("claim.gz", gzip_compress(file))); }, ErrorKind::kDataLoss,
               "truncated: its header declares 100 bytes of data");
  // The header claims 10 elements; the stream holds 50.
  file[7] = 10;
  expect_error([&] { read_idx(write("more.gz", gzip_compress(file))); }, ErrorKind::kDataLoss,
               "holds more data than its header declares");
  // A bomb's claim: 2^40 bytes from a few dozen compressed bytes is refused before any read.
  const Bytes bomb = {0, 0, 0x08, 2, 0, 0x10, 0, 0, 0, 0x10, 0, 0};
  expect_error([&] { read_idx(write("bomb.gz", gzip_compress(bomb)), uint64_t{1} << 41); },
               ErrorKind::kDataLoss, "compressed bytes can hold");
}

TEST_F(DatasetTest, ImageAndLabelFilesMustAgree) {
  auto [images, labels] = image_files(5);
  const auto images_path = write("img.gz", gzip_compress(images));
  const auto labels_path = write("lab", labels);
  const ImageSet set = load_idx_image_set(images_path, labels_path);
  EXPECT_EQ(set.size(), 5);
  EXPECT_EQ(set.image_shape(), (ir::Shape{5, 4, 3, 1}));
  EXPECT_EQ(set.labels, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(set.images[2 * 12], 2);
  const auto other_labels = write("lab4", image_files(4).second);
  expect_error([&] { load_idx_image_set(images_path, other_labels); }, ErrorKind::kDataLoss,
               "holds 5 images but");
  expect_error([&] { load_idx_image_set(labels_path, labels_path); }, ErrorKind::kDataLoss,
               "not uint8 images");
}

TEST_F(DatasetTest, FashionMnistLayoutAndUsage) {
  const auto [train_images, train_labels] = image_files(7, 28, 28);
  const auto [test_images, test_labels] = image_files(3, 28, 28);
  write("train-images-idx3-ubyte.gz", gzip_compress(train_images));
  write("train-labels-idx1-ubyte.gz", gzip_compress(train_labels));
  write("t10k-images-idx3-ubyte", test_images);  // uncompressed names are read too
  write("t10k-labels-idx1-ubyte", test_labels);
  EXPECT_EQ(load_fashion_mnist(dir_, "train").size(), 7);
  EXPECT_EQ(load_fashion_mnist(dir_, "test").size(), 3);
  const ImageSet all = load_fashion_mnist(dir_, "all");
  EXPECT_EQ(all.image_shape(), (ir::Shape{10, 28, 28, 1}));
  EXPECT_EQ(all.labels[7], 0);  // train first, then test
  expect_error([&] { load_fashion_mnist(dir_, "valid"); }, ErrorKind::kInvalidArgument,
               "usage 'valid' is not one of");
  expect_error([&] { load_fashion_mnist(dir_ / "nowhere", "train"); }, ErrorKind::kNotFound,
               "dataset-fashion-mnist");
  fs::remove(dir_ / "t10k-labels-idx1-ubyte");
  expect_error([&] { load_fashion_mnist(dir_, "test"); }, ErrorKind::kNotFound,
               "t10k-labels-idx1-ubyte");
}

TEST(DatasetShuffle, DeterministicPermutations) {
  const auto a = shuffled_indices(1000, 42, 0);
  EXPECT_EQ(a, shuffled_indices(1000, 42, 0));
  EXPECT_NE(a, shuffled_indices(1000, 42, 1));
  EXPECT_NE(a, shuffled_indices(1000, 43, 0));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  // Fixed by the generator's definition: the same on every machine and standard library.
  EXPECT_EQ(shuffled_indices(8, 1, 0), (std::vector<int64_t>{2, 3, 5, 7, 0, 1, 4, 6}));
  EXPECT_TRUE(shuffled_indices(0, 1, 0).empty());
  EXPECT_EQ(shuffled_indices(1, 1, 0), (std::vector<int64_t>{0}));
}

TEST(DatasetShards, PartitionTheSetExactly) {
  for (const bool shuffle : {false, true}) {
    for (const int64_t shards : {1, 3, 4, 7}) {
      std::vector<int64_t> seen;
      for (int64_t id = 0; id < shards; ++id) {
        BatchOptions options;
        options.shuffle = shuffle;
        options.seed = 9;
        options.num_shards = shards;
        options.shard_id = id;
        const auto mine = epoch_indices(50, options, 2);
        EXPECT_LE(std::abs(int64_t(mine.size()) - 50 / shards), 1);
        seen.insert(seen.end(), mine.begin(), mine.end());
      }
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> iota(50);
      std::iota(iota.begin(), iota.end(), 0);
      EXPECT_EQ(seen, iota) << "shuffle " << shuffle << ", " << shards << " shards";
    }
  }
}

TEST(DatasetShards, BadOptions) {
  BatchOptions options;
  options.batch_size = 0;
  expect_error([&] { epoch_indices(10, options, 0); }, ErrorKind::kInvalidArgument,
               "batch_size must be a positive integer, got 0");
  options.batch_size = 2;
  options.num_shards = 2;
  expect_error([&] { epoch_indices(10, options, 0); }, ErrorKind::kInvalidArgument,
               "given together (got only num_shards)");
  options.shard_id = 2;
  expect_error([&] { epoch_indices(10, options, 0); }, ErrorKind::kInvalidArgument,
               "shard_id 2 is not in [0, 2)");
  options.shard_id = -1;
  expect_error([&] { epoch_indices(10, options, 0); }, ErrorKind::kInvalidArgument, "shard_id -1");
}

std::shared_ptr<ImageSet> small_set(int64_t n) {
  auto set = std::make_shared<ImageSet>();
  set->height = 2;
  set->width = 2;
  set->channels = 1;
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < 4; ++p) set->images.push_back(uint8_t(i * 4 + p));
    set->labels.push_back(int32_t(i));
  }
  return set;
}

TEST(DatasetBatches, ShapesScalingAndRemainder) {
  BatchOptions options;
  options.batch_size = 4;
  Batches batches(small_set(10), options);
  EXPECT_EQ(batches.num_batches(), 3);
  Batch batch;
  std::vector<int64_t> sizes;
  while (batches.next(batch)) sizes.push_back(batch.labels.numel());
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  const Batch first = batches.batch(0);
  EXPECT_EQ(first.images.shape(), (ir::Shape{4, 1, 2, 2}));
  EXPECT_EQ(first.images.dtype(), DType::kFloat32);
  EXPECT_EQ(first.labels.dtype(), DType::kInt32);
  EXPECT_FLOAT_EQ(first.images.data<float>()[5], 5.0f / 255.0f);
  EXPECT_EQ(first.labels.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3}));

  options.drop_remainder = true;
  Batches dropped(small_set(10), options, rescale_to_chw(1.0f, -1.0f));
  EXPECT_EQ(dropped.num_batches(), 2);
  EXPECT_FLOAT_EQ(dropped.batch(1).images.data<float>()[0], 16.0f - 1.0f);
  expect_error([&] { dropped.batch(2); }, ErrorKind::kInvalidArgument, "batch 2 is not in [0, 2)");
}

TEST(DatasetBatches, ShuffledEpochsAreReproducible) {
  BatchOptions options;
  options.batch_size = 3;
  options.shuffle = true;
  options.seed = 7;
  auto labels_of_epoch = [&](Batches& batches, int64_t epoch) {
    batches.start_epoch(epoch);
    std::vector<int32_t> labels;
    Batch batch;
    while (batches.next(batch)) {
      const auto part = batch.labels.to_vector<int32_t>();
      labels.insert(labels.end(), part.begin(), part.end());
    }
    return labels;
  };
  Batches a(small_set(20), options), b(small_set(20), options);
  const auto a0 = labels_of_epoch(a, 0), a1 = labels_of_epoch(a, 1);
  EXPECT_EQ(a0, labels_of_epoch(b, 0));
  EXPECT_EQ(a1, labels_of_epoch(b, 1));
  EXPECT_NE(a0, a1);
  EXPECT_EQ(std::set<int32_t>(a0.begin(), a0.end()).size(), 20u);
}

// Debian's dataset-fashion-mnist package, when installed.
TEST(DatasetFashionMnist, RealPackage) {
  if (!fs::is_directory(kFashionMnistDir)) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const ImageSet train = load_fashion_mnist(kFashionMnistDir, "train");
  const ImageSet test = load_fashion_mnist(kFashionMnistDir, "test");
  EXPECT_EQ(train.image_shape(), (ir::Shape{60000, 28, 28, 1}));
  EXPECT_EQ(test.image_shape(), (ir::Shape{10000, 28, 28, 1}));
  for (const ImageSet* set : {&train, &test}) {
    std::vector<int64_t> counts(10, 0);
    for (const int32_t label : set->labels) {
      ASSERT_TRUE(label >= 0 && label <= 9) << label;
      ++counts[size_t(label)];
    }
    // Fashion-MNIST is balanced: each class is a tenth of each part.
    for (const int64_t count : counts) EXPECT_EQ(count, set->size() / 10);
  }
  BatchOptions options;
  options.batch_size = 64;
  Batches batches(std::make_shared<ImageSet>(test), options);
  const Batch batch = batches.batch(0);
  const auto values = batch.images.to_vector<float>();
  EXPECT_EQ(batch.images.shape(), (ir::Shape{64, 1, 28, 28}));
  EXPECT_GE(*std::min_element(values.begin(), values.end()), 0.0f);
  EXPECT_LE(*std::max_element(values.begin(), values.end()), 1.0f);
  EXPECT_GT(*std::max_element(values.begin(), values.end()), 0.5f);
}

}  // namespace
}  // namespace mf::data
