// A main for the fuzz targets in ordinary builds (GCC, no libFuzzer): runs a target's
// LLVMFuzzerTestOneInput once over every file given, or every file in the directories given. ctest
// replays each committed corpus (seeds and past findings) this way, so a regression fails the
// normal suite without a Clang build; a finding aborts, as under libFuzzer. A file named as
// libFuzzer names a finding (crash-, timeout-, leak-, oom-, slow-unit-) may be refused; a file
// named refused-... is an input the reader must refuse (a format it does not take); every other
// file is a valid seed, and the reader refusing it fails the replay.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else {
      files.push_back(arg);
    }
  }
  size_t seeds = 0;
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
      return 2;
    }
    std::fprintf(stderr, "replay: %s\n", file.c_str());
    mf::fuzz::first_verdict() = mf::fuzz::FirstVerdict::kNotAsked;
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const std::string name = file.filename().string();
    bool finding = false;
    for (const char* prefix : {"crash-", "timeout-", "leak-", "oom-", "slow-unit-"}) {
      finding = finding || name.rfind(prefix, 0) == 0;
    }
    if (name.rfind("refused-", 0) == 0) {
      if (mf::fuzz::first_verdict() != mf::fuzz::FirstVerdict::kRefused) {
        std::fprintf(stderr, "replay: %s must be refused, but was accepted\n", file.c_str());
        return 3;
      }
    } else if (!finding) {
      ++seeds;
      if (mf::fuzz::first_verdict() != mf::fuzz::FirstVerdict::kAccepted) {
        std::fprintf(stderr, "replay: the seed %s is a valid file but was refused\n", file.c_str());
        return 3;
      }
    }
  }
  std::printf("replayed %zu inputs, %zu of them seeds, each accepted\n", files.size(), seeds);
  return files.empty() ? 1 : 0;
}
