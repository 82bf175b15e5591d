// caught(f): what a call threw, as (exception type, message), for tests that check error types and
// messages without letting the exception end the test.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "engine/comm/communicator.h"
#include "engine/core/error.h"

namespace shardlab::test {

// Runs f and returns (type, message) of what it threw, ("", "") when nothing was thrown.
template <typename F>
std::pair<std::string, std::string> caught(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return {"InvalidArgument", e.what()};
  } catch (const FormatError& e) {
    return {"FormatError", e.what()};
  } catch (const IoError& e) {
    return {"IoError", e.what()};
  } catch (const CommError& e) {
    return {"CommError", e.what()};
  } catch (const TimeoutError& e) {
    return {"TimeoutError", e.what()};
  } catch (const InternalError& e) {
    return {"InternalError", e.what()};
  } catch (const Error& e) {
    return {"Error", e.what()};
  } catch (const std::exception& e) {
    return {"std::exception", e.what()};
  }
  return {"", ""};
}

}  // namespace shardlab::test
