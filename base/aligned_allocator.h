#pragma once
// A std::allocator replacement whose blocks start on an `Alignment`-byte boundary (64: a cache
// line, and what oneDNN and the AVX-512 kernels load whole). std::vector's own allocator gives 16
// bytes, and glibc's large blocks sit 16 bytes past a page, so every 64-byte load of such a buffer
// straddles two cache lines.

#include <cstddef>
#include <new>

namespace mf {

template <typename T, size_t Alignment = 64>
struct AlignedAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = AlignedAllocator<U, Alignment>;
  };

  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U, Alignment>&) {}

  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{Alignment}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{Alignment}); }

  template <typename U>
  bool operator==(const AlignedAllocator<U, Alignment>&) const {
    return true;
  }
};

}  // namespace mf
