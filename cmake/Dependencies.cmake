# Every dependency is a Debian 12 package (tools/install-deps.sh installs them); found, never fetched.
find_package(Threads REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(TBB REQUIRED)
find_package(Protobuf REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
# zlib (zlib1g-dev): gzip-compressed IDX data sets (engine/data/idx.cc).
find_package(ZLIB REQUIRED)
# Collectives between the workers of a data-parallel job (runtime/comm/), Debian's libgloo-dev.
find_package(Gloo REQUIRED CONFIG)
if(MODEFLOW_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MODEFLOW_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
# oneDNN (libdnnl-dev: 2.6, OpenMP CPU runtime) runs conv2d, matmul and the pools
# (runtime/dnnl/). Found directly, not through Debian's dnnl-config.cmake: that file asks for
# OpenCL (REQUIRED, for its GPU runtime), which a machine without ocl-icd-opencl-dev lacks, and a
# REQUIRED inside a config file fails the configure even when the outer lookup is QUIET.
find_library(MODEFLOW_DNNL_LIBRARY NAMES dnnl REQUIRED)
find_path(MODEFLOW_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
add_library(modeflow_dnnl INTERFACE IMPORTED)
target_link_libraries(modeflow_dnnl INTERFACE "${MODEFLOW_DNNL_LIBRARY}")
target_include_directories(modeflow_dnnl INTERFACE "${MODEFLOW_DNNL_INCLUDE_DIR}")
set(MODEFLOW_DNNL_TARGET modeflow_dnnl)
# libgomp, for omp_set_num_threads: the kernels bound oneDNN's OpenMP team to runtime_num_threads.
# Linked, never -fopenmp: that would also turn on Eigen's own OpenMP parallelism.
find_library(MODEFLOW_GOMP_LIBRARY NAMES gomp libgomp.so.1
  HINTS ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES} REQUIRED)
