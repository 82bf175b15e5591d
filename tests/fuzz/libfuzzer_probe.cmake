# Finds a clang++ that links -fsanitize=fuzzer,address,undefined (libFuzzer with ASan and UBSan).
# Sets the cache variables SHARDLAB_FUZZ_CLANGXX (the compiler, or NOTFOUND) and
# SHARDLAB_HAVE_LIBFUZZER (ON when a probe program links). The project compiler is usually GCC,
# which has no libFuzzer; without such a clang++ no fuzz test is registered. Included by
# tests/net (fuzz_decoder) and tests/fuzz/fuzz_tests.cmake (the other fuzzers); the probe runs
# once per build directory.
find_program(SHARDLAB_FUZZ_CLANGXX NAMES clang++ clang++-16 clang++-15 clang++-14
  DOC "clang++ with libFuzzer for the fuzz targets")
if(SHARDLAB_FUZZ_CLANGXX AND NOT DEFINED SHARDLAB_HAVE_LIBFUZZER)
  set(_probe_dir ${PROJECT_BINARY_DIR}/tests/libfuzzer_probe)
  file(MAKE_DIRECTORY ${_probe_dir})
  file(WRITE ${_probe_dir}/probe.cpp
    "#include <cstddef>\n#include <cstdint>\n"
    "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
  execute_process(
    COMMAND ${SHARDLAB_FUZZ_CLANGXX} -std=c++20 -fsanitize=fuzzer,address,undefined
      probe.cpp -o probe
    WORKING_DIRECTORY ${_probe_dir} RESULT_VARIABLE _probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(_probe_rc EQUAL 0)
    set(SHARDLAB_HAVE_LIBFUZZER ON CACHE BOOL "clang++ links -fsanitize=fuzzer")
  else()
    set(SHARDLAB_HAVE_LIBFUZZER OFF CACHE BOOL "clang++ links -fsanitize=fuzzer")
  endif()
endif()
