#pragma once
// Fashion-MNIST from its IDX files, as Debian's dataset-fashion-mnist package installs them in
// /usr/share/datasets/fashion-mnist (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
// t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz; the uncompressed names are read too).

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "ir/shape.h"

namespace mf::data {

// Where Debian's package puts the files.
inline constexpr std::string_view kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// A set of images with one label each. MindSpore yields uint8 images (N, 28, 28, 1), channels last,
// and uint32 labels. modeflow's tensors have no uint8 or uint32 dtype, so the images stay bytes
// here (a quarter of the memory of any tensor dtype; batches convert them) and the labels are
// int32, the dtype modeflow's losses take.
struct ImageSet {
  std::vector<uint8_t> images;  // size() * height * width * channels bytes, (N, H, W, C) order
  std::vector<int32_t> labels;  // size() labels
  int64_t height = 0, width = 0, channels = 0;

  int64_t size() const { return int64_t(labels.size()); }
  int64_t image_bytes() const { return height * width * channels; }
  // (N, H, W, C), MindSpore's column shape.
  ir::Shape image_shape() const { return {size(), height, width, channels}; }
};

// usage: "train" (60,000 images), "test" (10,000) or "all" (train then test, 70,000), MindSpore's
// names. NotFound naming the path when the directory or a file is missing (install
// dataset-fashion-mnist); DataLoss when a file is damaged or images and labels disagree in count;
// InvalidArgument for another usage.
ImageSet load_fashion_mnist(const std::filesystem::path& dir, std::string_view usage);

// One images file and its labels file, checked against each other: images of rank 3 (N, H, W) in
// uint8, labels of rank 1 (N) in uint8. What load_fashion_mnist reads for each part; MNIST's files
// have the same layout.
ImageSet load_idx_image_set(const std::filesystem::path& images_file,
                            const std::filesystem::path& labels_file);

}  // namespace mf::data
