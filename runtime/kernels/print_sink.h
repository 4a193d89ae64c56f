#pragma once
// Where the `print` op writes. Process-wide: stdout by default; the engine routes it elsewhere (the
// print_file_path protobuf file) by installing its own sink. Calls are serialized, so lines of
// concurrent prints never interleave.

#include <functional>
#include <string>
#include <string_view>

#include "ir/op_def.h"

namespace mf::runtime::ops {

// Receives the print node's `prefix` attribute (may be empty) and one of its input tensors; called
// once per input, in input order.
using PrintSink = std::function<void(std::string_view op_text, const ir::TensorView& tensor)>;

// Installs `sink` and returns the previous one; an empty sink restores the stdout default.
PrintSink set_print_sink(PrintSink sink);

// Runs the current sink (what the print kernel calls).
void emit_print(std::string_view op_text, const ir::TensorView& tensor);

// The text the default sink writes for a tensor, numpy-like as MindSpore prints it:
// "Tensor(shape=[2, 2], dtype=Float32, value=\n[[1, 2],\n [3, 4]])". Beyond 1000 elements each axis
// shows its first and last 3 entries around "...".
std::string format_tensor(const ir::TensorView& tensor);

// Installs a sink for a scope (tests); restores the previous one on exit.
class ScopedPrintSink {
 public:
  explicit ScopedPrintSink(PrintSink sink) : previous_(set_print_sink(std::move(sink))) {}
  ~ScopedPrintSink() { set_print_sink(std::move(previous_)); }
  ScopedPrintSink(const ScopedPrintSink&) = delete;
  ScopedPrintSink& operator=(const ScopedPrintSink&) = delete;

 private:
  PrintSink previous_;
};

}  // namespace mf::runtime::ops
