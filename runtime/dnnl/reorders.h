#pragma once
// What the kernels that run oneDNN primitives on plain tensors share: the reorder between a plain
// layout and the one a primitive chose, and per-thread buffers for the reordered copies.

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

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

// Bytes with a content identity (ir::TensorView::content_id, content_version) reordered for one
// primitive and kept in reordered_weights_cache() under `kind`, the identity and `owner` (the
// primitive the layout is for; the entry keeps it, and so the key's address, alive) until the
// bytes' version moves.
struct KeptBytes {
  std::string_view kind;  // "conv2d weights", ...
  uint64_t content_id = 0;
  uint64_t content_version = 0;
  std::shared_ptr<const void> owner;
};

// The kept copy for `bytes`, or an empty memory when none is kept for their current version.
dnnl::memory find_kept_copy(const KeptBytes& bytes);

// The kept copy for `bytes`, made with reordered_copy(reorder, user, wanted, data) when none is.
dnnl::memory kept_copy(const KeptBytes& bytes, const dnnl::reorder& reorder,
                       const dnnl::memory::desc& user, const dnnl::memory::desc& wanted,
                       const void* data);

}  // namespace mf::runtime::dnnl_rt
