#include "engine/data/fashion_mnist.h"

#include <string>

#include "base/error.h"
#include "engine/data/idx.h"

namespace mf::data {
namespace {

constexpr std::string_view kInstallHint =
    "install Debian's dataset-fashion-mnist package (tools/install-deps.sh does) or pass the "
    "directory holding the IDX files";

// The file for a part's base name: the gzip-compressed one as Debian ships it, else the raw one.
std::filesystem::path find_part(const std::filesystem::path& dir, const std::string& base) {
  const auto gz = dir / (base + ".gz");
  if (std::filesystem::exists(gz)) return gz;
  const auto raw = dir / base;
  if (std::filesystem::exists(raw)) return raw;
  MF_FAIL(NotFound, "Fashion-MNIST: neither '", echo(gz.string()), "' nor '", echo(raw.string()),
          "' exists; ", kInstallHint);
}

void append(ImageSet& to, ImageSet&& part) {
  if (to.size() == 0 && to.images.empty()) {
    to = std::move(part);
    return;
  }
  MF_CHECK(to.height == part.height && to.width == part.width, DataLoss,
           "Fashion-MNIST: the train images are ", to.height, "x", to.width,
           " but the test images are ", part.height, "x", part.width);
  to.images.insert(to.images.end(), part.images.begin(), part.images.end());
  to.labels.insert(to.labels.end(), part.labels.begin(), part.labels.end());
}

}  // namespace

ImageSet load_idx_image_set(const std::filesystem::path& images_file,
                            const std::filesystem::path& labels_file) {
  IdxArray images = read_idx(images_file);
  const IdxArray labels = read_idx(labels_file);
  MF_CHECK(images.type == IdxType::kUInt8 && images.shape.size() == 3, DataLoss, "IDX file '",
           echo(images_file.string()), "' holds ", idx_type_name(images.type), " ",
           ir::shape_to_string(images.shape), ", not uint8 images (N, height, width)");
  MF_CHECK(labels.type == IdxType::kUInt8 && labels.shape.size() == 1, DataLoss, "IDX file '",
           echo(labels_file.string()), "' holds ", idx_type_name(labels.type), " ",
           ir::shape_to_string(labels.shape), ", not uint8 labels (N)");
  MF_CHECK(images.shape[0] == labels.shape[0], DataLoss, "'", echo(images_file.string()),
           "' holds ", images.shape[0], " images but '", echo(labels_file.string()), "' holds ",
           labels.shape[0], " labels; the two files must come from the same set");
  ImageSet set;
  set.height = images.shape[1];
  set.width = images.shape[2];
  set.channels = 1;
  set.images = std::move(images.bytes);
  set.labels.assign(labels.bytes.begin(), labels.bytes.end());
  return set;
}

ImageSet load_fashion_mnist(const std::filesystem::path& dir, std::string_view usage) {
  MF_CHECK(usage == "train" || usage == "test" || usage == "all", InvalidArgument,
           "Fashion-MNIST: usage '", echo(usage, 40), "' is not one of 'train', 'test', 'all'");
  MF_CHECK(std::filesystem::is_directory(dir), NotFound, "Fashion-MNIST: directory '",
           echo(dir.string()), "' does not exist; ", kInstallHint);
  ImageSet set;
  // "all" is train then test, in MindSpore's order.
  for (const std::string prefix : {"train", "t10k"}) {
    if (usage == "train" && prefix != "train") continue;
    if (usage == "test" && prefix != "t10k") continue;
    append(set, load_idx_image_set(find_part(dir, prefix + "-images-idx3-ubyte"),
                                   find_part(dir, prefix + "-labels-idx1-ubyte")));
  }
  return set;
}

}  // namespace mf::data
