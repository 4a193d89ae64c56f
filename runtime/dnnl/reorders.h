#pragma once
// What the kernels that run oneDNN primitives on plain tensors share: the reorder between a plain
// layout and the one a primitive chose, and per-thread buffers for the reordered copies.

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>

namespace mf::runtime::dnnl_rt {

// The reorder from `from` to `to` on cpu_engine(); empty (no handle) when the layouts agree.
dnnl::reorder make_reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to);

// A per-thread buffer of at least `bytes` for reordered tensors, grown as needed and kept. Slots
// 0-3 are distinct buffers, so a kernel can hold up to four copies at once.
float* reorder_buffer(int slot, size_t bytes);

// `user` (plain, at `data`) in `wanted`'s layout: the user's memory itself when `reorder` is empty,
// otherwise a copy in reorder_buffer(slot), reordered on `stream`.
dnnl::memory operand_in(const dnnl::reorder& reorder, const dnnl::memory::desc& user,
                        const dnnl::memory::desc& wanted, void* data, int slot,
                        dnnl::stream& stream);

// `user` (plain, at `data`) reordered by `reorder` into `wanted`'s layout, in memory of its own
// (weights kept in a primitive's layout); waits for the copy.
dnnl::memory reordered_copy(const dnnl::reorder& reorder, const dnnl::memory::desc& user,
                            const dnnl::memory::desc& wanted, const void* data);

}  // namespace mf::runtime::dnnl_rt
