// ShardLab's version (the CMake project's), for `shardlab --version`, the app's About box and
// the packages.
#pragma once

namespace shardlab {

// "0.1.0"
const char* version();

}  // namespace shardlab
