#include "engine/core/version.h"

#ifndef SHARDLAB_VERSION
#error "SHARDLAB_VERSION must be defined by the build (engine/core/CMakeLists.txt)"
#endif

namespace shardlab {

const char* version() {
  return SHARDLAB_VERSION;
}

}  // namespace shardlab
