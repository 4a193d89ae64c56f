// The float32 conv2d and matmul kernels (oneDNN, runtime/dnnl/) on resnet18's distinct conv shapes
// (batch 1, 224x224 input), a mobilenet_v2-style depthwise 3x3 and three GEMMs, each reporting
// GFLOP/s, next to this machine's FMA peak (a tight AVX-512 FMA loop per thread), so each figure
// reads as a fraction of peak:
//   flock /work/.build.lock build/benchmarks/dnnl_kernels_bench --benchmark_min_time=0.3
// BM_ConvColdWeights compares the packed-weights convolution with oneDNN's on the shapes it takes,
// its weights coming from memory as in a network.
// The second argument of every case is the intra-op thread count (runtime_num_threads).
// BM_ConvThenRelu times a conv followed by an elementwise op back to back: both run on the one
// OpenMP team (runtime/parallel.cc; a TBB arena beside it used to fight it for the cores).

#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ir/op_def.h"
#include "runtime/dnnl/engine.h"
#include "runtime/kernels/packed_conv.h"
#include "runtime/parallel.h"

namespace {

using namespace mf;

struct Buffer {
  ir::TensorType type;
  std::vector<float> data;
  explicit Buffer(ir::Shape shape) : type{ir::DType::kFloat32, std::move(shape)} {
    data.resize(ir::num_elements(type.shape));
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (float& v : data) v = dist(rng);
  }
  ir::TensorView view() { return {data.data(), type}; }
};

// A rate counter: `per_iteration` units (flops, bytes) each iteration, reported in billions per
// second under `name`; nothing when there is nothing to count.
void report_rate(benchmark::State& state, const char* name, double per_iteration) {
  if (per_iteration <= 0) return;
  state.counters[name] =
      benchmark::Counter(per_iteration * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// Runs one op's kernel through the registry, as an executor would, timing the kernel only.
void run_op(benchmark::State& state, const std::string& name, std::vector<ir::Shape> inputs,
            ir::Attrs attrs, double flops) {
  const ir::OpDef& op = ir::get_op(name);
  std::vector<ir::TensorType> types;
  std::vector<Buffer> in;
  for (ir::Shape& s : inputs) {
    in.emplace_back(s);
    types.push_back(in.back().type);
  }
  const std::vector<ir::TensorType> out_types = op.infer_types(types, attrs);
  Buffer out(out_types[0].shape);
  std::vector<ir::TensorView> in_views, out_views{out.view()};
  for (Buffer& b : in) in_views.push_back(b.view());
  runtime::ScopedIntraOpThreads threads(static_cast<int>(state.range(1)));
  const ir::KernelContext ctx{in_views, out_views, attrs, op.name, false};
  op.kernel(ctx);  // creates the primitive outside the timing
  for (auto _ : state) {
    op.kernel(ctx);
    benchmark::DoNotOptimize(out.data.data());
  }
  report_rate(state, "GFLOP/s", flops);
}

struct ConvShape {
  const char* label;
  int64_t c, h, o, k, stride, pad, groups;
};

// resnet18 (batch 1, 224x224): every distinct conv, then a depthwise 3x3 and pointwise 1x1s as in
// mobilenet_v2.
const ConvShape kConvs[] = {
    {"7x7s2_3to64_224", 3, 224, 64, 7, 2, 3, 1},
    {"3x3_64to64_56", 64, 56, 64, 3, 1, 1, 1},
    {"3x3s2_64to128_56", 64, 56, 128, 3, 2, 1, 1},
    {"1x1s2_64to128_56", 64, 56, 128, 1, 2, 0, 1},
    {"3x3_128to128_28", 128, 28, 128, 3, 1, 1, 1},
    {"3x3s2_128to256_28", 128, 28, 256, 3, 2, 1, 1},
    {"1x1s2_128to256_28", 128, 28, 256, 1, 2, 0, 1},
    {"3x3_256to256_14", 256, 14, 256, 3, 1, 1, 1},
    {"3x3s2_256to512_14", 256, 14, 512, 3, 2, 1, 1},
    {"1x1s2_256to512_14", 256, 14, 512, 1, 2, 0, 1},
    {"3x3_512to512_7", 512, 7, 512, 3, 1, 1, 1},
    {"dw3x3_144_56", 144, 56, 144, 3, 1, 1, 144},
    // mobilenet_v2's pointwise (1x1) convolutions: few input channels over large planes.
    {"1x1_16to96_112", 16, 112, 96, 1, 1, 0, 1},
    {"1x1_24to144_56", 24, 56, 144, 1, 1, 0, 1},
    {"1x1_144to24_56", 144, 56, 24, 1, 1, 0, 1},
    {"1x1_96to576_14", 96, 14, 576, 1, 1, 0, 1},
    {"1x1_320to1280_7", 320, 7, 1280, 1, 1, 0, 1},
};

// conv2d's attributes for shape `s` (square window and stride, symmetric padding) and its flops.
ir::Attrs conv_attrs(const ConvShape& s) {
  return {{"stride", std::vector<int64_t>{s.stride, s.stride}},
          {"padding", std::vector<int64_t>{s.pad, s.pad}},
          {"dilation", std::vector<int64_t>{1, 1}},
          {"groups", s.groups}};
}
double conv_flops(const ConvShape& s) {
  const int64_t out = (s.h + 2 * s.pad - s.k) / s.stride + 1;
  return 2.0 * s.o * out * out * (s.c / s.groups) * s.k * s.k;
}

void BM_Conv(benchmark::State& state) {
  const ConvShape& s = kConvs[state.range(0)];
  state.SetLabel(s.label);
  run_op(state, "conv2d", {{1, s.c, s.h, s.h}, {s.o, s.c / s.groups, s.k, s.k}}, conv_attrs(s),
         conv_flops(s));
}
BENCHMARK(BM_Conv)
    ->ArgsProduct({benchmark::CreateDenseRange(0, std::size(kConvs) - 1, 1), {1, 2}})
    ->Unit(benchmark::kMicrosecond);

// mobilenet_v2's depthwise 3x3s as GRAPH mode runs them: channels last, with bias and relu6
// (clip), every distinct shape (input plane, channels, stride), on oneDNN's brdgmm_dw. On the 14x14
// and 7x7 planes two threads gain little (3x3 over 14x14x384: 25 -> 23 us, over 7x7x960: 22 -> 22
// us). A kernel of our own (16 channels per vector, 8 pixels of a row sharing their input loads,
// rows x channel runs split between threads) was written and measured against it in three
// layouts of its loops: at best level (28.6 against 25-31 us, 22.1 against 21.1), no better at two
// threads, so it was not kept (docs/performance.md §6.8).
void BM_DepthwiseNhwc(benchmark::State& state) {
  struct Case {
    int64_t h, c, stride;
  };
  const Case cases[] = {{112, 32, 1}, {112, 96, 2}, {56, 144, 1}, {56, 144, 2}, {28, 192, 1},
                        {28, 192, 2}, {14, 384, 1}, {14, 576, 1}, {14, 576, 2}, {7, 960, 1}};
  const Case& c = cases[state.range(0)];
  const int64_t out = (c.h + 2 - 3) / c.stride + 1;
  state.SetLabel("dw3x3s" + std::to_string(c.stride) + "_" + std::to_string(c.c) + "_" +
                 std::to_string(c.h));
  run_op(state, "conv2d", {{1, c.h, c.h, c.c}, {c.c, 1, 3, 3}, {c.c}},
         {{"stride", std::vector<int64_t>{c.stride, c.stride}},
          {"padding", std::vector<int64_t>{1, 1}},
          {"dilation", std::vector<int64_t>{1, 1}},
          {"groups", c.c},
          {"data_format", std::string("NHWC")},
          {"activation", std::string("clip")},
          {"clip_min", 0.0},
          {"clip_max", 6.0}},
         2.0 * c.c * out * out * 9);
}
BENCHMARK(BM_DepthwiseNhwc)
    ->ArgsProduct({benchmark::CreateDenseRange(0, 9, 1), {1, 2}})
    ->Unit(benchmark::kMicrosecond);

// The convolutions the packed-weights kernel takes (runtime/kernels/packed_conv.cc), channels-last,
// with their weights coming from memory as in a network: each iteration uses the next of enough
// weight copies (each kept in its kernel's layout under its own content identity, as a network's
// are) that 40 MB of other weights pass between two uses of one. Third argument: 0 = the kernel
// conv2d picks, 1 = oneDNN forced (brgconv).
const ConvShape kColdConvs[] = {
    {"3x3_512to512_7", 512, 7, 512, 3, 1, 1, 1},
    {"3x3s2_256to512_14", 256, 14, 512, 3, 2, 1, 1},
    {"1x1s2_256to512_14", 256, 14, 512, 1, 2, 0, 1},
    {"3x3_256to256_14", 256, 14, 256, 3, 1, 1, 1},
    {"3x3s2_128to256_28", 128, 28, 256, 3, 2, 1, 1},
    {"1x1_320to1280_7", 320, 7, 1280, 1, 1, 0, 1},
    {"1x1_960to160_7", 960, 7, 160, 1, 1, 0, 1},
    {"1x1_96to576_14", 96, 14, 576, 1, 1, 0, 1},
    {"1x1_512to1000_13", 512, 13, 1000, 1, 1, 0, 1},
};

void BM_ConvColdWeights(benchmark::State& state) {
  const ConvShape& s = kColdConvs[state.range(0)];
  const bool onednn = state.range(2) == 1;
  state.SetLabel(std::string(s.label) + (onednn ? " onednn" : " picked"));
  const double flops = conv_flops(s);
  const ir::OpDef& op = ir::get_op("conv2d");
  ir::Attrs attrs = conv_attrs(s);  // every shape here has one group
  attrs["data_format"] = std::string("NHWC");
  Buffer x({1, s.h, s.h, s.c});
  const ir::Shape weight_shape = {s.o, s.c, s.k, s.k};
  const int64_t weight_bytes = ir::num_elements(weight_shape) * 4;
  const int64_t copies = std::max<int64_t>(2, 1 + (int64_t{40} << 20) / weight_bytes);
  std::vector<Buffer> weights;
  for (int64_t i = 0; i < copies; ++i) weights.emplace_back(weight_shape);
  const std::vector<ir::TensorType> types = {x.type, weights[0].type};
  Buffer y(op.infer_types(types, attrs)[0].shape);
  using mf::runtime::dnnl_rt::ConvLayout;
  mf::runtime::dnnl_rt::set_conv_layout(onednn ? ConvLayout::kBlocked : ConvLayout::kAuto);
  runtime::ScopedIntraOpThreads threads(static_cast<int>(state.range(1)));
  auto run_copy = [&](int64_t i) {
    ir::TensorView in[] = {x.view(), weights[i].view()};
    in[1].content_id = 0x636f6c64 + static_cast<uint64_t>(i);
    in[1].content_version = 1;
    const ir::TensorView out_view[] = {y.view()};
    op.kernel(ir::KernelContext{in, out_view, attrs, op.name, false});
  };
  for (int64_t i = 0; i < copies; ++i) run_copy(i);  // weights into the kernel's layout, untimed
  int64_t next = 0;
  for (auto _ : state) {
    run_copy(next);
    next = (next + 1) % copies;
    benchmark::DoNotOptimize(y.data.data());
  }
  mf::runtime::dnnl_rt::set_conv_layout(ConvLayout::kAuto);
  report_rate(state, "GFLOP/s", flops);
}
BENCHMARK(BM_ConvColdWeights)
    ->ArgsProduct({benchmark::CreateDenseRange(0, std::size(kColdConvs) - 1, 1), {1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// What the first use of a weight costs the packed kernel: resnet18's largest weights (9.4 MB)
// packed into panels, each time from a different copy (from memory, as a first iteration reads
// them) into a fresh allocation (its page faults included, as on a first iteration). GB/s counts
// the bytes read and written. Mapping the allocation's pages in one call first
// (MADV_POPULATE_WRITE) took this from 5.0 to 3.6 ms at one thread (with the row-by-row packing of
// then), but resnet18's first iteration went from 45.0 to 47.2 ms (medians of 10 alternating runs;
// in the network the allocator mostly hands back pages already mapped), so it was not kept.
void BM_PackConvWeights(benchmark::State& state) {
  const ir::Shape weight_shape = {512, 512, 3, 3};
  const int64_t copies = 5;
  std::vector<Buffer> weights;
  for (int64_t i = 0; i < copies; ++i) weights.emplace_back(weight_shape);
  runtime::ops::WindowGeometry g;
  g.batch = 1, g.channels = 512, g.h = g.w = g.oh = g.ow = 7, g.kh = g.kw = 3, g.top = g.left = 1;
  runtime::ScopedIntraOpThreads threads(static_cast<int>(state.range(0)));
  // A fixed threshold keeps glibc from raising it after the first free and recycling the block:
  // every allocation is a fresh mapping, faulted in page by page as on a first iteration.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  int64_t next = 0;
  for (auto _ : state) {
    auto packed = runtime::ops::pack_conv_weights(weights[next].data.data(), g, 512);
    benchmark::DoNotOptimize(packed->data.get());
    next = (next + 1) % copies;
  }
  report_rate(state, "GB/s", 2.0 * 4 * ir::num_elements(weight_shape));
}
BENCHMARK(BM_PackConvWeights)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

struct GemmShape {
  int64_t m, k, n;
};
const GemmShape kGemms[] = {{64, 784, 512}, {64, 512, 512}, {1024, 256, 1024}};

void BM_Matmul(benchmark::State& state) {
  const GemmShape& g = kGemms[state.range(0)];
  state.SetLabel(std::to_string(g.m) + "x" + std::to_string(g.k) + "x" + std::to_string(g.n));
  run_op(state, "matmul", {{g.m, g.k}, {g.k, g.n}}, {}, 2.0 * g.m * g.k * g.n);
}
BENCHMARK(BM_Matmul)->ArgsProduct({{0, 1, 2}, {1, 2}})->Unit(benchmark::kMicrosecond);

// Max pools as the networks run them: squeezenet1_0's first and resnet18's, channels last
// (runtime/kernels/max_pool_nhwc.cc; oneDNN 2.6's channels-last pool took 0.525 ms on the first,
// `ONEDNN_VERBOSE=1`), and resnet18's in NCHW (oneDNN).
void BM_MaxPool(benchmark::State& state) {
  struct Case {
    const char* label;
    ir::Shape x;
    bool channels_last;
    std::vector<int64_t> padding;
  };
  const Case cases[] = {{"nhwc_96_109_3x3s2", {1, 109, 109, 96}, true, {0, 1, 0, 1}},
                        {"nhwc_64_112_3x3s2", {1, 112, 112, 64}, true, {1, 1}},
                        {"nchw_64_112_3x3s2", {1, 64, 112, 112}, false, {1, 1}}};
  const Case& c = cases[state.range(0)];
  state.SetLabel(c.label);
  ir::Attrs attrs = {{"kernel", std::vector<int64_t>{3, 3}},
                     {"stride", std::vector<int64_t>{2, 2}},
                     {"padding", c.padding}};
  if (c.channels_last) attrs["data_format"] = std::string("NHWC");
  run_op(state, "max_pool2d", {c.x}, attrs, 0);
}
BENCHMARK(BM_MaxPool)->ArgsProduct({{0, 1, 2}, {1, 2}})->Unit(benchmark::kMicrosecond);

// The transposes format-transform puts at the edges of a channels-last chain: each network's input
// into NHWC and its last feature map back to NCHW (runtime/kernels/strided.cc). Reported as bytes
// moved (read + written) per second, to set beside the machine's copy bandwidth.
void BM_LayoutTranspose(benchmark::State& state) {
  struct Case {
    const char* label;
    ir::Shape x;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {{"input_3x224x224_to_nhwc", {1, 3, 224, 224}, {0, 2, 3, 1}},
                        {"mobilenet_7x7x1280_to_nchw", {1, 7, 7, 1280}, {0, 3, 1, 2}},
                        {"squeezenet_13x13x1000_to_nchw", {1, 13, 13, 1000}, {0, 3, 1, 2}},
                        {"cnn_32x3x32x32_to_nhwc", {32, 3, 32, 32}, {0, 2, 3, 1}},
                        {"cnn_32x8x8x64_to_nchw", {32, 8, 8, 64}, {0, 3, 1, 2}}};
  const Case& c = cases[state.range(0)];
  state.SetLabel(c.label);
  run_op(state, "transpose", {c.x}, {{"perm", c.perm}}, 0);
  report_rate(state, "GB/s", 2.0 * sizeof(float) * ir::num_elements(c.x));
}
BENCHMARK(BM_LayoutTranspose)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {1, 2}})
    ->Unit(benchmark::kMicrosecond);

// squeezenet1_0's fire-module concats as GRAPH mode runs them: two channels-last expand outputs
// joined along channels (runtime/ops/shape_ops.cc). GB/s counts the bytes read and written.
void BM_ConcatChannels(benchmark::State& state) {
  struct Case {
    int64_t h, c;  // each input is (1, h, h, c)
  };
  const Case cases[] = {{55, 64}, {27, 128}, {27, 192}, {13, 256}};
  const Case& c = cases[state.range(0)];
  state.SetLabel("2x" + std::to_string(c.c) + "_" + std::to_string(c.h));
  run_op(state, "concat", {{1, c.h, c.h, c.c}, {1, c.h, c.h, c.c}}, {{"axis", int64_t{3}}}, 0);
  report_rate(state, "GB/s", 2.0 * 2 * 4 * c.h * c.h * c.c);
}
BENCHMARK(BM_ConcatChannels)->ArgsProduct({{0, 1, 2, 3}, {1, 2}})->Unit(benchmark::kMicrosecond);

// A conv then relu on its output, back to back, both on the OpenMP team.
void BM_ConvThenRelu(benchmark::State& state) {
  const ir::OpDef& conv = ir::get_op("conv2d");
  const ir::OpDef& relu = ir::get_op("relu");
  Buffer x({1, 64, 56, 56}), w({64, 64, 3, 3}), y({1, 64, 56, 56}), z({1, 64, 56, 56});
  ir::Attrs conv_attrs = {{"padding", std::vector<int64_t>{1, 1}}};
  ir::Attrs relu_attrs;
  const ir::TensorType conv_in[] = {x.type, w.type};
  conv.infer_types(conv_in, conv_attrs);
  const ir::TensorType relu_in[] = {y.type};
  relu.infer_types(relu_in, relu_attrs);
  const ir::TensorView conv_views[] = {x.view(), w.view()};
  const ir::TensorView y_view[] = {y.view()};
  const ir::TensorView z_view[] = {z.view()};
  runtime::ScopedIntraOpThreads threads(static_cast<int>(state.range(0)));
  const ir::KernelContext conv_ctx{conv_views, y_view, conv_attrs, conv.name, false};
  const ir::KernelContext relu_ctx{y_view, z_view, relu_attrs, relu.name, false};
  for (auto _ : state) {
    conv.kernel(conv_ctx);
    for (int i = 0; i < 4; ++i) relu.kernel(relu_ctx);
    benchmark::DoNotOptimize(z.data.data());
  }
}
BENCHMARK(BM_ConvThenRelu)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

// The FMA peak: 24 independent zmm accumulators (latency 4 x 2 pipes, with room), the loop body
// unrolled so nothing but FMAs and the loop counter run. (An earlier version forced half of the
// accumulators through an asm barrier every iteration and measured 77 GFLOP/s, below what the
// convolutions reach; this one measures 207-209 GFLOP/s on one core here.)
constexpr int kAccumulators = 24;
__attribute__((target("avx512f"), noinline)) float fma_loop(int64_t iterations) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
}

void BM_FmaPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr int64_t kIterations = 1 << 22;
  std::atomic<float> sink{0};
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] { sink = sink + fma_loop(kIterations); });
    for (std::thread& th : pool) th.join();
  }
  benchmark::DoNotOptimize(sink.load());
  const double flops = 2.0 * 16 * kAccumulators * kIterations * threads;
  report_rate(state, "GFLOP/s", flops);
}
BENCHMARK(BM_FmaPeak)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// MF_DNNL_CONV_LAYOUT=plain|blocked forces the convolutions' layouts for this run (the library
// never reads the environment).
const bool kConvLayoutFromEnvironment = [] {
  using mf::runtime::dnnl_rt::ConvLayout;
  if (const char* v = std::getenv("MF_DNNL_CONV_LAYOUT"); v != nullptr) {
    const std::string layout(v);
    mf::runtime::dnnl_rt::set_conv_layout(layout == "plain"     ? ConvLayout::kPlain
                                          : layout == "blocked" ? ConvLayout::kBlocked
                                                                : ConvLayout::kAuto);
  }
  return true;
}();

BENCHMARK_MAIN();
