#include "runtime/dnnl/reorders.h"

#include <vector>

#include "runtime/dnnl/engine.h"

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

}  // namespace mf::runtime::dnnl_rt
