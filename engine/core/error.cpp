#include "engine/core/error.h"

#include <cstring>

namespace shardlab::detail {

std::string where(const char* file, int line, const char* cond) {
  // Keep the path from the repository root on (engine/..., kernels/...), not the build machine's.
  const char* rel = file;
  for (const char* root : {"/engine/", "/kernels/", "/net/", "/gui/", "/tests/"}) {
    if (const char* p = std::strstr(file, root)) {
      rel = p + 1;
      break;
    }
  }
  std::string s = fmt::format("{}:{}", rel, line);
  if (cond) s += fmt::format(" [{}]", cond);
  return s;
}

}  // namespace shardlab::detail
