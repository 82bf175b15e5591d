#include "engine/cli/json_output.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "engine/core/error.h"

namespace shardlab::cli {

StdoutToStderr::StdoutToStderr(bool active) {
  if (!active) return;
  std::cout.flush();
  std::fflush(stdout);
  saved_ = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  SL_ENFORCE_T(IoError, saved_ >= 0, "--json: cannot duplicate stdout");
  SL_ENFORCE_T(IoError, dup2(STDERR_FILENO, STDOUT_FILENO) >= 0,
               "--json: cannot send the text output to stderr");
}

StdoutToStderr::~StdoutToStderr() {
  restore();
}

void StdoutToStderr::restore() {
  if (saved_ < 0) return;
  std::cout.flush();
  std::fflush(stdout);
  dup2(saved_, STDOUT_FILENO);
  close(saved_);
  saved_ = -1;
}

void print_json(const Json& doc) {
  std::cout.flush();
  // Strings from files (job names, paths) may hold invalid UTF-8: replaced, not thrown on.
  const std::string text = doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace shardlab::cli
