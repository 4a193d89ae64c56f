#pragma once
// What every fuzz target shares. A reader may refuse any input with an mf::Error saying what was
// wrong: that is the reader doing its job. Anything else is a finding and aborts, so libFuzzer
// saves the input: a crash, an Internal error (a broken invariant of ours), or any other exception
// escaping (a bare C++ message such as "vector::_M_default_append" would reach the user).

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "base/error.h"
#include "base/logging.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace mf::fuzz {

// Warnings (a cache entry ignored, a key deprecated) would flood the fuzzer's output, and so
// would protobuf's complaints about damaged strings (the readers refuse such input anyway).
inline void quiet_logs() {
  log::set_level(spdlog::level::off);
  google::protobuf::SetLogHandler(nullptr);
}

// The input as text, for readers of text.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A scratch file holding the input, for readers that take a path (they must also refuse what is
// not a regular file, so the real path-based entry point is the one fuzzed). In /dev/shm when it
// exists: a tmpfs keeps a run at thousands of inputs per second. One name per process and target.
inline std::filesystem::path write_scratch(std::string_view target, const uint8_t* data,
                                           size_t size) {
  static const std::filesystem::path dir =
      std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
  const auto path =
      dir / ("mf-fuzz-" + std::string(target) + "-" + std::to_string(::getpid()) + ".bin");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write the scratch file %s\n", path.c_str());
    std::abort();
  }
  return path;
}

// What the first accepts() of the current input decided, for the replay: the committed seeds are
// valid files and must still be accepted, or a reader that refused everything would pass.
enum class FirstVerdict { kNotAsked, kAccepted, kRefused };
inline FirstVerdict& first_verdict() {
  static FirstVerdict verdict = FirstVerdict::kNotAsked;
  return verdict;
}

// Runs `read`; returns whether it succeeded. A clean refusal returns false; a finding aborts.
template <class Fn>
bool accepts(Fn&& read) {
  FirstVerdict& first = first_verdict();
  try {
    read();
    if (first == FirstVerdict::kNotAsked) first = FirstVerdict::kAccepted;
    return true;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInternal) {
      std::fprintf(stderr, "fuzz: Internal error (a bug): %s\n", e.what());
      std::abort();
    }
    if (first == FirstVerdict::kNotAsked) first = FirstVerdict::kRefused;
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception other than mf::Error escaped: %s\n", e.what());
    std::abort();
  }
}

// A property the reader promises (a round trip, a bound) does not hold: a finding.
[[noreturn]] inline void broken(const char* what) {
  std::fprintf(stderr, "fuzz: %s\n", what);
  std::abort();
}

// Whether running `graph` is cheap enough for a fuzzer (thousands of inputs a second): no
// subgraphs (a while loop may legitimately run for long), a few hundred nodes, small tensors. A
// graph beyond this is only imported and verified, not run.
inline bool small_enough_to_run(const ir::Graph& graph) {
  constexpr int64_t kMaxElements = int64_t{1} << 16;
  if (!graph.subgraphs().empty() || graph.num_nodes() > 256) return false;
  auto small = [&](const ir::TensorType& type) {
    const auto n = ir::try_num_elements(type.shape);
    return n.has_value() && *n <= kMaxElements;
  };
  for (size_t i = 0; i < graph.num_parameters(); ++i) {
    if (!small(graph.parameter(i)->type())) return false;
  }
  for (const ir::Node& node : const_cast<ir::Graph&>(graph).nodes()) {
    for (const auto& type : node.output_types()) {
      if (!small(type)) return false;
    }
  }
  return true;
}

}  // namespace mf::fuzz
