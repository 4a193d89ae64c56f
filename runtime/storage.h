#pragma once
// Buffers that do not come from the pool: memory owned by someone else (a mapped .npy file, a
// caller's array) wrapped so tensors can hold it like any pool buffer, and plain aligned heap
// memory.

#include <cstddef>
#include <functional>
#include <memory>

#include "runtime/memory_pool.h"

namespace mf::runtime {

// A Buffer over memory the pool does not own.
// Calls `release` (if any) exactly once when the last owner lets go; never frees the memory itself.
class ExternalBuffer final : public Buffer {
 public:
  ExternalBuffer(void* data, size_t size, std::function<void(void*)> release, bool owned = false);
  ~ExternalBuffer() override;
  ExternalBuffer(const ExternalBuffer&) = delete;
  ExternalBuffer& operator=(const ExternalBuffer&) = delete;

  void* data() const override { return data_; }
  size_t size() const override { return size_; }
  // False unless made by allocate_unpooled: wrapped memory belongs to someone who may write it.
  bool owns_its_bytes() const override { return owned_; }

 private:
  void* data_;
  size_t size_;
  std::function<void(void*)> release_;
  bool owned_;
};

// Wraps external memory; `release` runs when the last owner lets go (pass {} to borrow without
// release).
std::shared_ptr<Buffer> wrap_external(void* data, size_t size,
                                      std::function<void(void*)> release = {});

// kTensorAlignment-aligned heap memory outside the pool and its limit (constants baked into a
// graph, scratch for tests). Throws OutOfMemory when the system refuses.
std::shared_ptr<Buffer> allocate_unpooled(size_t bytes);

}  // namespace mf::runtime
