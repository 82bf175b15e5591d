#include "engine/core/paths.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#ifndef SHARDLAB_SOURCE_RESOURCE_DIR
#error "SHARDLAB_SOURCE_RESOURCE_DIR must be defined by the build (engine/core/CMakeLists.txt)"
#endif

namespace shardlab {

namespace fs = std::filesystem;

std::string self_executable() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.string();
}

std::string resource_dir() {
  std::error_code ec;
  if (const char* env = std::getenv("SHARDLAB_RESOURCE_DIR"); env != nullptr && *env != '\0') {
    if (fs::is_directory(env, ec)) return env;
  }
  if (const std::string exe = self_executable(); !exe.empty()) {
    const fs::path installed = fs::path(exe).parent_path().parent_path() / "share" / "shardlab";
    if (fs::is_directory(installed / "jobs", ec)) return installed.string();
  }
  return SHARDLAB_SOURCE_RESOURCE_DIR;
}

}  // namespace shardlab
