#include "runtime/storage.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "base/error.h"
#include "runtime/memory_format.h"

namespace mf::runtime {

ExternalBuffer::ExternalBuffer(void* data, size_t size, std::function<void(void*)> release,
                               bool owned)
    : data_(data), size_(size), release_(std::move(release)), owned_(owned) {}

ExternalBuffer::~ExternalBuffer() {
  if (release_) {
    release_(data_);
  }
}

std::shared_ptr<Buffer> wrap_external(void* data, size_t size, std::function<void(void*)> release) {
  MF_CHECK(data != nullptr || size == 0, InvalidArgument,
           "cannot wrap a null pointer as a buffer of ", size, " bytes");
  return std::make_shared<ExternalBuffer>(data, size, std::move(release));
}

std::shared_ptr<Buffer> allocate_unpooled(size_t bytes) {
  const size_t rounded =
      (std::max<size_t>(bytes, 1) + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  MF_CHECK(rounded >= bytes, OutOfMemory, "out of memory: asked for ", bytes, " bytes");
  void* data = std::aligned_alloc(kTensorAlignment, rounded);
  MF_CHECK(data != nullptr, OutOfMemory, "out of memory: the system refused ", bytes, " bytes (",
           format_bytes(bytes), ")");
  try {
    return std::make_shared<ExternalBuffer>(
        data, bytes, [](void* p) { std::free(p); }, /*owned=*/true);
  } catch (...) {
    std::free(data);
    throw;
  }
}

}  // namespace mf::runtime
