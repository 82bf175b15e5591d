// The one source of the tests' precompiled-header libraries (tests/CMakeLists.txt,
// shardlab_use_test_pch): the suites reuse the header they compile.
