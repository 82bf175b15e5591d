// What a call threw, for tests that check error types and messages without letting the exception
// end the test (or, on a rank thread, end the run). The one exception-capture helper of the suites.
#pragma once

#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine/comm/communicator.h"
#include "engine/core/error.h"

namespace shardlab::test {

// Runs f and returns (type, message) of what it threw, ("", "") when nothing was thrown. The type
// is the most derived ShardLab error class ("InvalidArgument", "CommError", ...), "Error" for the
// base, "std::exception" for anything else.
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

// The message of the E (or subclass) that f throws; otherwise a line that says what happened
// instead, which no expected message contains: "(wrong exception type) <message>" or
// "(no exception)".
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(wrong exception type) ") + e.what();
  }
  return "(no exception)";
}

// caught() per rank, for calls made on rank threads: type[r] and message[r] as caught() gives
// them ("" when rank r's call did not throw). Safe to fill from several threads at once.
struct RankOutcomes {
  std::mutex mu;
  std::map<int, std::string> type, message;

  template <typename F>
  void capture(int rank, F&& f) {
    auto [t, m] = caught(std::forward<F>(f));
    std::lock_guard lock(mu);
    type[rank] = std::move(t);
    message[rank] = std::move(m);
  }
};

}  // namespace shardlab::test
