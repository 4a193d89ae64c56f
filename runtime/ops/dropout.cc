// dropout(x, counter) {keep_prob, seed} -> (y, mask): each element kept with probability
// keep_prob and scaled by 1 / keep_prob, as MindSpore's Dropout. The draw for element i is a hash
// of (seed, counter, i), not a generator's state, so it is the same in every mode, at every
// thread count and on every machine, and a layer varies it per step by advancing its counter (an
// int64 variable, through assign). The mask (0 or 1 / keep_prob) is the second output: the
// backward multiplies by it.

#include <cmath>
#include <cstdint>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform draw in [0, 1) for element i.
double draw(uint64_t seed, uint64_t counter, uint64_t i) {
  const uint64_t h = mix(mix(seed ^ mix(counter)) + i);
  return double(h >> 11) * 0x1.0p-53;
}

double keep_prob_of(const Attrs& attrs) {
  const double keep = ir::attr_float(attrs, "keep_prob", "dropout");
  MF_CHECK(keep > 0 && keep <= 1, InvalidArgument, "dropout: keep_prob must be in (0, 1], got ",
           keep);
  return keep;
}

template <typename T>
void dropout_kernel(const T* x, T* y, T* mask, int64_t n, double keep, uint64_t seed,
                    uint64_t counter) {
  const T scale = T(1.0 / keep);
  parallel_for(n, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T m = draw(seed, counter, uint64_t(i)) < keep ? scale : T(0);
      mask[i] = m;
      y[i] = x[i] * m;
    }
  });
}

const ir::OpRegistration kDropout =
    ir::define_op("dropout")
        .arity(2)
        .outputs(2)
        .attr("keep_prob", ir::AttrKind::kFloat, 0.5, "the probability of keeping an element")
        .attr("seed", ir::AttrKind::kInt, int64_t{0}, "the layer's seed")
        .traits(Trait::kPure | Trait::kOpaque)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          keep_prob_of(attrs);
          MF_CHECK(ir::is_floating(in[0].dtype), InvalidArgument,
                   "dropout: x must be a floating tensor, got ", ir::type_to_string(in[0]));
          MF_CHECK(in[1].dtype == DType::kInt64 && in[1].shape.empty(), InvalidArgument,
                   "dropout: the counter must be an int64 scalar, got ", ir::type_to_string(in[1]));
          return std::vector<TensorType>{in[0], in[0]};
        })
        .kernel([](const ir::KernelContext& ctx) {
          const double keep = keep_prob_of(ctx.attrs);
          const uint64_t seed = uint64_t(ir::attr_int(ctx.attrs, "seed", "dropout"));
          const uint64_t counter = uint64_t(*ctx.inputs[1].as<int64_t>());
          const int64_t n = ctx.inputs[0].size();
          if (ctx.inputs[0].type.dtype == DType::kFloat32) {
            dropout_kernel(ctx.inputs[0].as<float>(), ctx.outputs[0].as<float>(),
                           ctx.outputs[1].as<float>(), n, keep, seed, counter);
          } else {
            dropout_kernel(ctx.inputs[0].as<double>(), ctx.outputs[0].as<double>(),
                           ctx.outputs[1].as<double>(), n, keep, seed, counter);
          }
        })
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          const double keep = keep_prob_of(attrs);
          const uint64_t seed = uint64_t(ir::attr_int(attrs, "seed", "dropout"));
          const uint64_t counter = uint64_t(int64_t(in[1].values.at(0)));
          RefTensor y{in[0].shape, in[0].values}, mask{in[0].shape, in[0].values};
          for (size_t i = 0; i < y.values.size(); ++i) {
            mask.values[i] = draw(seed, counter, i) < keep ? 1.0 / keep : 0.0;
            y.values[i] = in[0].values[i] * mask.values[i];
          }
          return std::vector<RefTensor>{y, mask};
        })
        .backward({.outputs = 2},
                  [](ir::GradBuilder& b) {
                    if (b.wants_grad(0)) b.set_grad(0, b.op("mul", {b.dout(0), b.output(1)}));
                  })
        .samples({sample({f32({4, 5}), i64({})}, {{"keep_prob", 0.7}, {"seed", int64_t{3}}}),
                  sample({f64({0, 3}), i64({})}), sample({f32({}), i64({})}, {{"keep_prob", 1.0}})})
        .doc(
            "keeps each element with probability keep_prob, scaled by 1/keep_prob; the draw "
            "hashes (seed, counter, index); returns the result and the mask");

}  // namespace
}  // namespace mf::runtime::ops
