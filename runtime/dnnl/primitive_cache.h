#pragma once
// A bounded, thread-safe LRU cache of created oneDNN primitives (or anything a kernel prepares once
// per shape), keyed by the op kind and every number the primitive depends on: shapes, strides,
// attributes, post-ops and the thread count it was created for. Light: entries are type-erased, so
// this header needs no oneDNN include; each kernel stores its own struct (primitive + descriptors).
//
// A kernel calls get() on every run: the first run of a shape creates, later runs only look up.
// A compile-time step can call the same function ahead of the first run to prepare the entry.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mf::runtime::dnnl_rt {

class PrimitiveKey {
 public:
  explicit PrimitiveKey(std::string_view kind) : kind_(kind) {}
  PrimitiveKey& add(int64_t v) {
    values_.push_back(v);
    return *this;
  }
  // A list, length first, so [1, 2] + [3] and [1] + [2, 3] differ.
  PrimitiveKey& add(std::span<const int64_t> v) {
    values_.push_back(static_cast<int64_t>(v.size()));
    values_.insert(values_.end(), v.begin(), v.end());
    return *this;
  }
  PrimitiveKey& add(std::initializer_list<int64_t> v) {
    return add(std::span<const int64_t>(v.begin(), v.size()));
  }
  bool operator==(const PrimitiveKey&) const = default;
  size_t hash() const;
  std::string to_string() const;  // "conv2d[1, 3, 224, ...]", for messages

 private:
  std::string kind_;
  std::vector<int64_t> values_;
};

struct PrimitiveCacheStats {
  int64_t hits = 0;
  int64_t creations = 0;  // create() calls: misses
  int64_t evictions = 0;
  size_t size = 0;  // entries
  size_t used = 0;  // the entries' costs, in capacity's unit
  size_t capacity = 0;
};

class PrimitiveCache {
 public:
  explicit PrimitiveCache(size_t capacity);

  // The entry for `key`, made by create() (returning std::shared_ptr<const T>) on a miss. create()
  // runs outside the lock: two threads missing the same key at once may both create; the first
  // stored is kept and returned to both. `cost` is what the entry counts against the capacity (1:
  // capacity is a number of entries; a cache of buffers counts bytes); the newest entry is kept
  // even when it alone exceeds the capacity.
  template <typename T, typename Create>
  std::shared_ptr<const T> get(const PrimitiveKey& key, Create&& create, size_t cost = 1) {
    return std::static_pointer_cast<const T>(get_erased(
        key, [&]() -> std::shared_ptr<const void> { return create(); }, cost, 0));
  }

  // As get(), for an entry made from bytes that are rewritten in place (weights reordered from a
  // tensor with a content identity): `key` names the bytes and what is made of them, `version` is
  // the bytes' current version. An entry of another version is replaced, not kept beside the new
  // one, so a weight updated at every training step holds one entry instead of one per step.
  template <typename T, typename Create>
  std::shared_ptr<const T> get_version(const PrimitiveKey& key, uint64_t version, Create&& create,
                                       size_t cost = 1) {
    return std::static_pointer_cast<const T>(get_erased(
        key, [&]() -> std::shared_ptr<const void> { return create(); }, cost, version));
  }

  // The entry for `key` made from `version` of its bytes, or null (nothing is created).
  template <typename T>
  std::shared_ptr<const T> find_version(const PrimitiveKey& key, uint64_t version) {
    return std::static_pointer_cast<const T>(find_erased(key, version));
  }

  // Whether an entry for `key` is held, of any version.
  bool contains(const PrimitiveKey& key) const;

  PrimitiveCacheStats stats() const;
  void set_capacity(size_t capacity);  // evicts the least recently used beyond it
  void clear();                        // drops entries; counters stay

 private:
  struct KeyHash {
    size_t operator()(const PrimitiveKey& k) const { return k.hash(); }
  };
  struct Entry {
    PrimitiveKey key;
    std::shared_ptr<const void> value;
    size_t cost;
    uint64_t version;
  };

  std::shared_ptr<const void> get_erased(const PrimitiveKey& key,
                                         const std::function<std::shared_ptr<const void>()>& create,
                                         size_t cost, uint64_t version);
  std::shared_ptr<const void> find_erased(const PrimitiveKey& key, uint64_t version);
  void erase_locked(std::list<Entry>::iterator entry);
  void evict_locked();

  mutable std::mutex mutex_;
  size_t capacity_;
  size_t used_ = 0;       // sum of the entries' costs
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<PrimitiveKey, std::list<Entry>::iterator, KeyHash> index_;
  PrimitiveCacheStats stats_;
};

// The cache the kernels use (capacity 1024 entries).
PrimitiveCache& primitive_cache();

// Weights a kernel reordered into its primitive's layout, kept under the weights' content identity
// (ir::TensorView::content_id, through get_version) and the primitive they were made for, so a
// weight tensor bound again unchanged (a parameter at every GRAPH run without infer_boost, an eager
// product's or convolution's weights) is not reordered again. A weight rewritten in place (a
// training step) replaces its entry. Counted in bytes: capacity an eighth of the machine's memory,
// within 256 MiB and 4 GiB (a network's weights fit; entries of tensors since dropped leave only
// by least recent use, so the bound is also what they can cost).
PrimitiveCache& reordered_weights_cache();

}  // namespace mf::runtime::dnnl_rt
