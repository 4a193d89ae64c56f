#include "runtime/dnnl/reorders.h"

#include <vector>

#include "runtime/dnnl/engine.h"
#include "runtime/dnnl/primitive_cache.h"

namespace mf::runtime::dnnl_rt {

dnnl::reorder make_reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  if (from == to) return dnnl::reorder();
  const dnnl::engine& engine = cpu_engine();
  return dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, to));
}

float* reorder_buffer(int slot, size_t bytes) {
  thread_local std::vector<float> buffers[4];
  std::vector<float>& b = buffers[slot];
  if (b.size() * sizeof(float) < bytes) b.resize((bytes + sizeof(float) - 1) / sizeof(float));
  return b.data();
}

dnnl::memory operand_in(const dnnl::reorder& reorder, const dnnl::memory::desc& user,
                        const dnnl::memory::desc& wanted, void* data, int slot,
                        dnnl::stream& stream) {
  const dnnl::engine& engine = cpu_engine();
  dnnl::memory user_memory(user, engine, data);
  if (!reorder) return user_memory;
  dnnl::memory copy(wanted, engine, reorder_buffer(slot, wanted.get_size()));
  reorder.execute(stream, user_memory, copy);
  return copy;
}

dnnl::memory reordered_copy(const dnnl::reorder& reorder, const dnnl::memory::desc& user,
                            const dnnl::memory::desc& wanted, const void* data) {
  const dnnl::engine& engine = cpu_engine();
  dnnl::memory copy(wanted, engine);
  // oneDNN reads the user's bytes and never writes them: the const_cast only fits its API.
  dnnl::memory user_memory(user, engine, const_cast<void*>(data));
  dnnl::stream& stream = thread_stream();
  reorder.execute(stream, user_memory, copy);
  stream.wait();
  return copy;
}

namespace {

struct KeptEntry {
  dnnl::memory memory;  // owns its bytes
  std::shared_ptr<const void> owner;
};

PrimitiveKey kept_key(const KeptBytes& bytes) {
  PrimitiveKey key(bytes.kind);
  key.add(static_cast<int64_t>(bytes.content_id))
      .add(static_cast<int64_t>(reinterpret_cast<intptr_t>(bytes.owner.get())));
  return key;
}

}  // namespace

dnnl::memory find_kept_copy(const KeptBytes& bytes) {
  const auto entry =
      reordered_weights_cache().find_version<KeptEntry>(kept_key(bytes), bytes.content_version);
  return entry != nullptr ? entry->memory : dnnl::memory();
}

dnnl::memory kept_copy(const KeptBytes& bytes, const dnnl::reorder& reorder,
                       const dnnl::memory::desc& user, const dnnl::memory::desc& wanted,
                       const void* data) {
  return reordered_weights_cache()
      .get_version<KeptEntry>(
          kept_key(bytes), bytes.content_version,
          [&] {
            auto entry = std::make_shared<KeptEntry>();
            entry->owner = bytes.owner;
            entry->memory = reordered_copy(reorder, user, wanted, data);
            return std::shared_ptr<const KeptEntry>(entry);
          },
          wanted.get_size())
      ->memory;
}

}  // namespace mf::runtime::dnnl_rt
