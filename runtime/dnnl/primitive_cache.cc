#include "runtime/dnnl/primitive_cache.h"

#include <algorithm>

namespace mf::runtime::dnnl_rt {

size_t PrimitiveKey::hash() const {
  size_t h = std::hash<std::string>()(kind_);
  for (int64_t v : values_) {
    h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return h;
}

std::string PrimitiveKey::to_string() const {
  std::string out = kind_ + "[";
  for (size_t i = 0; i < values_.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values_[i]);
  }
  return out + "]";
}

PrimitiveCache::PrimitiveCache(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}

std::shared_ptr<const void> PrimitiveCache::get_erased(
    const PrimitiveKey& key, const std::function<std::shared_ptr<const void>()>& create,
    size_t cost) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->value;
    }
    ++stats_.creations;
  }
  std::shared_ptr<const void> created = create();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    // Another thread stored the same key meanwhile: keep one.
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->value;
  }
  lru_.push_front(Entry{key, created, cost});
  index_.emplace(key, lru_.begin());
  used_ += cost;
  evict_locked();
  return created;
}

void PrimitiveCache::evict_locked() {
  while (lru_.size() > 1 && used_ > capacity_) {
    used_ -= lru_.back().cost;
    index_.erase(lru_.back().key);
    lru_.pop_back();
    ++stats_.evictions;
  }
}

PrimitiveCacheStats PrimitiveCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PrimitiveCacheStats s = stats_;
  s.size = lru_.size();
  s.used = used_;
  s.capacity = capacity_;
  return s;
}

void PrimitiveCache::set_capacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = std::max<size_t>(1, capacity);
  evict_locked();
}

void PrimitiveCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  index_.clear();
  lru_.clear();
  used_ = 0;
}

PrimitiveCache& primitive_cache() {
  // Leaked on purpose: kernels may run from static destructors of other objects.
  static PrimitiveCache* cache = new PrimitiveCache(1024);
  return *cache;
}

PrimitiveCache& reordered_weights_cache() {
  static PrimitiveCache* cache = new PrimitiveCache(size_t(256) << 20);
  return *cache;
}

}  // namespace mf::runtime::dnnl_rt
