// The data loading under modeflow.dataset (python/modeflow/dataset/): the IDX and Fashion-MNIST
// readers returning numpy arrays in MindSpore's column dtypes (uint8 images, uint32 labels; numpy
// has the unsigned dtypes that modeflow's tensors lack), and the engine's portable shuffle, so a
// seed orders a Python pipeline exactly as it orders the C++ Batches.
#include <pybind11/numpy.h>
#include <pybind11/stl/filesystem.h>

#include <cstring>

#include "bindings.h"
#include "engine/data/batches.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/idx.h"

namespace mf::python {
namespace {

py::dtype numpy_dtype(data::IdxType type) {
  switch (type) {
    case data::IdxType::kUInt8:
      return py::dtype::of<uint8_t>();
    case data::IdxType::kInt8:
      return py::dtype::of<int8_t>();
    case data::IdxType::kInt16:
      return py::dtype::of<int16_t>();
    case data::IdxType::kInt32:
      return py::dtype::of<int32_t>();
    case data::IdxType::kFloat32:
      return py::dtype::of<float>();
    case data::IdxType::kFloat64:
      return py::dtype::of<double>();
  }
  return py::dtype::of<uint8_t>();
}

// A numpy array owning a copy of `bytes`.
py::array to_numpy(const py::dtype& dtype, const ir::Shape& shape, const void* bytes) {
  py::array out(dtype, std::vector<py::ssize_t>(shape.begin(), shape.end()));
  if (out.nbytes() > 0) std::memcpy(out.mutable_data(), bytes, size_t(out.nbytes()));
  return out;
}

}  // namespace

void bind_dataset(py::module_& m) {
  m.def(
      "_read_idx",
      [](const std::filesystem::path& file) {
        data::IdxArray array;
        {
          py::gil_scoped_release release;
          array = data::read_idx(file);
        }
        return to_numpy(numpy_dtype(array.type), array.shape, array.bytes.data());
      },
      py::arg("file"),
      "An IDX file (raw or gzip-compressed) as a numpy array in this machine's byte order.");
  m.def(
      "_load_fashion_mnist",
      [](const std::filesystem::path& dir, const std::string& usage) {
        data::ImageSet set;
        {
          py::gil_scoped_release release;
          set = data::load_fashion_mnist(dir, usage);
        }
        py::array images = to_numpy(py::dtype::of<uint8_t>(), set.image_shape(), set.images.data());
        // MindSpore's label column is uint32.
        py::array_t<uint32_t> labels(py::ssize_t(set.labels.size()));
        auto* out = labels.mutable_data();
        for (size_t i = 0; i < set.labels.size(); ++i) out[i] = uint32_t(set.labels[i]);
        return py::make_tuple(images, labels);
      },
      py::arg("dataset_dir"), py::arg("usage"),
      "(images uint8 (N, 28, 28, 1), labels uint32 (N,)) of Fashion-MNIST's 'train', 'test' or "
      "'all'.");
  m.def(
      "_shuffled_indices",
      [](int64_t n, uint64_t seed, uint64_t epoch) {
        const auto order = data::shuffled_indices(n, seed, epoch);
        return to_numpy(py::dtype::of<int64_t>(), {int64_t(order.size())}, order.data());
      },
      py::arg("n"), py::arg("seed"), py::arg("epoch"),
      "The engine's portable permutation of range(n) for (seed, epoch).");
  m.attr("_FASHION_MNIST_DIR") = std::string(data::kFashionMnistDir);
}

}  // namespace mf::python
