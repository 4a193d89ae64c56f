#include "runtime/dnnl/primitive_cache.h"

#include <unistd.h>

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
    size_t cost, uint64_t version) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end() && it->second->version == version) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->value;
    }
    if (it != index_.end()) erase_locked(it->second);  // made from an older version of the bytes
    ++stats_.creations;
  }
  std::shared_ptr<const void> created = create();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end() && it->second->version == version) {
    // Another thread stored the same key meanwhile: keep one.
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->value;
  }
  if (it != index_.end()) erase_locked(it->second);
  lru_.push_front(Entry{key, created, cost, version});
  index_.emplace(key, lru_.begin());
  used_ += cost;
  evict_locked();
  return created;
}

std::shared_ptr<const void> PrimitiveCache::find_erased(const PrimitiveKey& key, uint64_t version) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end() || it->second->version != version) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  ++stats_.hits;
  return it->second->value;
}

void PrimitiveCache::erase_locked(std::list<Entry>::iterator entry) {
  used_ -= entry->cost;
  index_.erase(entry->key);
  lru_.erase(entry);
  ++stats_.evictions;
}

void PrimitiveCache::evict_locked() {
  while (lru_.size() > 1 && used_ > capacity_) erase_locked(std::prev(lru_.end()));
}

bool PrimitiveCache::contains(const PrimitiveKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return index_.count(key) > 0;
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
  // An eighth of the machine's memory, within 256 MiB and 4 GiB. Least-recent-use eviction gains
  // nothing when a network's weights exceed the capacity: a run visits them in the same order each
  // time, so every lookup would miss (vit_b_32's 337 MB against 256 MiB reordered all of them at
  // every run).
  static PrimitiveCache* cache = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const size_t physical = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
    return new PrimitiveCache(std::clamp(physical / 8, size_t(256) << 20, size_t(4) << 30));
  }();
  return *cache;
}

}  // namespace mf::runtime::dnnl_rt
