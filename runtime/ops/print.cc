// print(x, ...) {prefix}: writes every input to the print sink (print_sink.h) and returns its first
// input unchanged, so a graph can order later work after it through data flow (`x = print(x)`);
// Trait::kSideEffect keeps it alive and in program order even when the result is unused.

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/print_sink.h"
#include "runtime/kernels/reference.h"

namespace mf::runtime::ops {
namespace {

constexpr int64_t kSummarizeAbove = 1000;  // numpy's threshold
constexpr int64_t kEdgeItems = 3;

struct SinkState {
  std::mutex mutex;
  PrintSink sink;
};

SinkState& state() {
  static SinkState* s = new SinkState();  // leaked: prints may run during static destruction
  return *s;
}

void default_sink(std::string_view op_text, const ir::TensorView& tensor) {
  std::string text;
  if (!op_text.empty()) {
    text += op_text;
    text += '\n';
  }
  text += format_tensor(tensor);
  text += '\n';
  std::cout << text << std::flush;
}

std::string format_value(const ir::TensorView& t, int64_t i) {
  char buf[64];
  switch (t.type.dtype) {
    case DType::kFloat32:
      std::snprintf(buf, sizeof buf, "%.6g", double(t.as<float>()[i]));
      break;
    case DType::kFloat64:
      std::snprintf(buf, sizeof buf, "%.9g", t.as<double>()[i]);
      break;
    case DType::kInt32:
      std::snprintf(buf, sizeof buf, "%" PRId32, t.as<int32_t>()[i]);
      break;
    case DType::kInt64:
      std::snprintf(buf, sizeof buf, "%" PRId64, t.as<int64_t>()[i]);
      break;
    case DType::kBool:
      return t.as<bool>()[i] ? "True" : "False";
  }
  return buf;
}

// Appends the whole nested list, numpy style. Iterative, with one explicit frame per open axis,
// so a tensor of any rank prints without one stack frame per axis.
void format_axes(const ir::TensorView& t, const std::vector<int64_t>& strides, bool summarize,
                 std::string& out) {
  const ir::Shape& shape = t.type.shape;
  const size_t rank = shape.size();
  struct Frame {
    int64_t base;  // first element of this block
    int64_t i;     // next index along the block's axis
  };
  std::vector<Frame> stack;
  stack.reserve(rank);
  out += '[';
  stack.push_back({0, 0});
  while (!stack.empty()) {
    const size_t d = stack.size() - 1;
    const int64_t n = shape[d];
    Frame& f = stack.back();
    if (f.i >= n) {
      out += ']';
      stack.pop_back();
      if (!stack.empty()) {
        // A sub-list of the parent axis ended: separate it from the next one.
        Frame& parent = stack.back();
        const size_t pd = stack.size() - 1;
        if (parent.i + 1 < shape[pd]) {
          out += ',';
          out.append(rank - pd - 1, '\n');
          out.append(pd + 1, ' ');
        }
        ++parent.i;
      }
      continue;
    }
    if (summarize && n > 2 * kEdgeItems && f.i == kEdgeItems) {
      out += d + 1 == rank ? "..., " : std::string("...,\n") + std::string(d + 1, ' ');
      f.i = n - kEdgeItems;
      continue;
    }
    if (d + 1 == rank) {
      out += format_value(t, f.base + f.i);
      if (f.i + 1 < n) out += ", ";
      ++f.i;
    } else {
      const int64_t child = f.base + f.i * strides[d];
      out += '[';
      stack.push_back({child, 0});
    }
  }
}

}  // namespace

PrintSink set_print_sink(PrintSink sink) {
  std::lock_guard<std::mutex> lock(state().mutex);
  PrintSink previous = std::move(state().sink);
  state().sink = std::move(sink);
  return previous;
}

void emit_print(std::string_view op_text, const ir::TensorView& tensor) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().sink) {
    state().sink(op_text, tensor);
  } else {
    default_sink(op_text, tensor);
  }
}

std::string format_tensor(const ir::TensorView& tensor) {
  const ir::Shape& shape = tensor.type.shape;
  std::string out = "Tensor(shape=" + ints_to_string(shape) +
                    ", dtype=" + std::string(ir::dtype_name(tensor.type.dtype)) + ", value=";
  if (shape.empty()) {
    out += format_value(tensor, 0);
  } else if (tensor.size() == 0) {
    // An empty tensor prints as [], as numpy prints it: walking its axes would print a bracket per
    // row, 2^40 of them for shape (2^20, 2^20, 0) (a hang found by print_file_fuzz).
    out += "[]";
  } else {
    out += '\n';
    format_axes(tensor, ir::contiguous_strides(shape), tensor.size() > kSummarizeAbove, out);
  }
  return out + ")";
}

namespace {

const ir::OpRegistration kPrint =
    ir::define_op("print")
        .inputs(1, -1)
        .attr("prefix", ir::AttrKind::kString, std::string(), "text written before the tensors")
        // No gradient flows back through what it prints and passes on.
        .traits(ir::Trait::kSideEffect | ir::Trait::kNoGradient)
        .infer([](std::span<const TensorType> in, const Attrs&) {
          return std::vector<TensorType>{in[0]};
        })
        .kernel([](const ir::KernelContext& ctx) {
          const std::string& prefix = ir::attr_string(ctx.attrs, "prefix", ctx.op_name);
          for (const ir::TensorView& t : ctx.inputs) emit_print(prefix, t);
          if (ctx.outputs[0].data != ctx.inputs[0].data) {
            std::memcpy(ctx.outputs[0].data, ctx.inputs[0].data,
                        ctx.inputs[0].size() * ir::dtype_size(ctx.inputs[0].type.dtype));
          }
        })
        .reference([](std::span<const RefTensor> in, const Attrs&) {
          return std::vector<RefTensor>{in[0]};
        })
        .samples(
            {sample({f32({2, 3})}), sample({f32({}), f32({4})}, {{"prefix", std::string("x:")}})})
        .doc("writes its inputs to the print sink (stdout by default); returns input 0 unchanged");

}  // namespace
}  // namespace mf::runtime::ops
