# Sanitizer and fuzzing builds. Each option instruments every target of the build (the library,
# mf, the tests, the benchmarks, the fuzz targets), so use a separate build directory per option:
#   cmake -S . -B build-asan -DMODEFLOW_ASAN_UBSAN=ON   (GCC or Clang)
#   cmake -S . -B build-tsan -DMODEFLOW_TSAN=ON         (GCC or Clang)
#   CXX=clang++-16 cmake -S . -B build-fuzz -DMODEFLOW_FUZZ=ON   (Clang only: libFuzzer)
option(MODEFLOW_ASAN_UBSAN "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(MODEFLOW_TSAN "Build everything with ThreadSanitizer" OFF)
option(MODEFLOW_FUZZ "Build the libFuzzer targets in fuzz/ (Clang; implies ASan+UBSan)" OFF)

if(MODEFLOW_TSAN AND (MODEFLOW_ASAN_UBSAN OR MODEFLOW_FUZZ))
  message(FATAL_ERROR "MODEFLOW_TSAN cannot be combined with MODEFLOW_ASAN_UBSAN or MODEFLOW_FUZZ: "
                      "ThreadSanitizer and AddressSanitizer exclude each other; use two build directories")
endif()
if(MODEFLOW_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "MODEFLOW_FUZZ needs Clang's libFuzzer: configure a fresh build directory with "
                      "CXX=clang++-16 (Debian packages clang-16 and libclang-rt-16-dev; Clang 14 cannot compile this C++20)")
endif()

set(MODEFLOW_SANITIZER_FLAGS "")
if(MODEFLOW_ASAN_UBSAN OR MODEFLOW_FUZZ)
  # Every UBSan finding stops the program (a test fails), instead of a line in the log. vptr is
  # left out: it needs RTTI of every library in the process, and protobuf's is not instrumented.
  list(APPEND MODEFLOW_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize=vptr
       -fno-sanitize-recover=undefined)
endif()
if(MODEFLOW_TSAN)
  list(APPEND MODEFLOW_SANITIZER_FLAGS -fsanitize=thread)
endif()
if(MODEFLOW_SANITIZER_FLAGS)
  list(APPEND MODEFLOW_SANITIZER_FLAGS -fno-omit-frame-pointer -g)
  add_compile_options(${MODEFLOW_SANITIZER_FLAGS})
  add_link_options(${MODEFLOW_SANITIZER_FLAGS})
endif()
if(MODEFLOW_FUZZ)
  # Coverage feedback everywhere; only the fuzz targets link libFuzzer's main (fuzz/CMakeLists.txt).
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
