// One error style for all of ShardLab: a small typed family of exceptions, thrown through the
// SL_ENFORCE / SL_THROW macros, which record file, line and the failed condition.
//
// what() is the user-facing message (one clear line, e.g. "job.optimizer.lr: must be > 0, got -1");
// where() holds "file:line [condition]" for developers. Library code never calls exit(): only a
// main() turns an Error into an exit code.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace shardlab {

class Error : public std::runtime_error {
 public:
  Error(const std::string& msg, std::string where)
      : std::runtime_error(msg), where_(std::move(where)) {}
  const std::string& where() const noexcept { return where_; }

 private:
  std::string where_;
};

// Bad input from a user: job files, flags, shapes passed to an API, configuration values.
class InvalidArgument : public Error {
  using Error::Error;
};
// A file or stream that cannot be opened, read or written.
class IoError : public Error {
  using Error::Error;
};
// Data that was read but is malformed: corrupt or truncated files, bad magic numbers.
class FormatError : public Error {
  using Error::Error;
};
// A wait that ran past its deadline.
class TimeoutError : public Error {
  using Error::Error;
};
// A broken invariant inside ShardLab itself: a bug, not a user mistake.
class InternalError : public Error {
  using Error::Error;
};
// A failed CUDA or cuBLAS call (out of memory, a failed launch, a lost device), naming the call
// (engine/core/cuda_check.h).
class DeviceError : public Error {
  using Error::Error;
};

namespace detail {
std::string where(const char* file, int line, const char* cond);
}  // namespace detail

}  // namespace shardlab

// Throw `Type` with a fmt-style message.
#define SL_THROW(Type, ...) \
  throw Type(fmt::format(__VA_ARGS__), ::shardlab::detail::where(__FILE__, __LINE__, nullptr))

// Throw `Type` with a fmt-style message unless `cond` holds.
#define SL_ENFORCE_T(Type, cond, ...)                                                             \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      throw Type(fmt::format(__VA_ARGS__), ::shardlab::detail::where(__FILE__, __LINE__, #cond)); \
  } while (0)

// Invariants and argument checks inside the library: throws InvalidArgument.
#define SL_ENFORCE(cond, ...) SL_ENFORCE_T(::shardlab::InvalidArgument, cond, __VA_ARGS__)
