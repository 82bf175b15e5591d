// Shared by the libFuzzer targets in tests/fuzz: what counts as a finding, and a scratch file for
// readers that take a path.
//
// A reader given any input must return a value or throw a shardlab::Error that says what is wrong
// with the input. A finding is anything else: a crash or an ASan/UBSan report (the sanitizers
// abort), an allocation beyond libFuzzer's -rss_limit_mb/-malloc_limit_mb, an input that runs past
// -timeout, any exception that is not a shardlab::Error (nlohmann's out_of_range for 1e400,
// std::length_error, std::bad_alloc...), a shardlab::InternalError (the library's own word for "a
// bug, not a user mistake"; `shardlab` reports it as an internal error, exit 70), a shardlab::Error
// whose message is not one printable line (check_message()), or a broken contract a target checks
// (check()). Each is reported on stderr with "FINDING" and aborts, so libFuzzer keeps the input
// (-artifact_prefix).
#pragma once

#include <cxxabi.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <typeinfo>

#include "engine/core/error.h"

namespace shardlab::fuzz {

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\nFINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// A contract the target checks on a reader's result.
inline void check(bool ok, const std::string& what) {
  if (!ok) finding("contract violated: " + what);
}

inline std::string type_name(const std::type_info& t) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(t.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : t.name();
}

// `text` with its C0 control characters and DEL shown as \xNN.
inline std::string escaped(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// What `shardlab` prints of a refused input is one line naming the problem (engine/core/error.h:
// "one clear line"; engine/core/display_text.h: control characters shown as \xNN in anything
// displayed): a message that is empty (a NUL from the input ends the C string what() returns) or
// holds a C0 control character (a newline, the ESC of a terminal escape sequence from the input)
// is a finding. (DEL, 0x7f, which nlohmann's parse errors quote as it is, does nothing on a
// terminal and passes.)
inline void check_message(const shardlab::Error& e) {
  const std::string what = e.what();
  if (what.empty())
    finding(type_name(typeid(e)) + " with an empty message (a NUL from the input?) [" + e.where() +
            "]");
  for (const unsigned char c : what)
    if (c < 0x20)
      finding(type_name(typeid(e)) + " whose message holds a control character: \"" +
              escaped(what) + "\" [" + e.where() + "]");
}

// Runs `f`; true when it returned, false when it threw a shardlab::Error (the input was refused).
// Anything else is a finding.
template <class F>
bool value_or_error(F&& f) {
  try {
    f();
    return true;
  } catch (const shardlab::InternalError& e) {
    finding("shardlab::InternalError (a bug, not a user mistake): " + std::string(e.what()) + " [" +
            e.where() + "]");
  } catch (const shardlab::Error& e) {
    check_message(e);
    return false;
  } catch (const std::exception& e) {
    finding("exception that is not a shardlab::Error: " + type_name(typeid(e)) + ": " + e.what());
  } catch (...) {
    finding("exception of an unknown type (not a std::exception)");
  }
}

// The stack the JSON readers' inputs run on (on_small_stack). ShardLab bounds nesting at 64 levels
// (engine/core/json_limits.h), which takes a few KiB of stack, while recursion that an unbounded
// nesting drives (copying, comparing, dumping a document: about 500 bytes a level under ASan)
// overflows the main thread's 8 MiB only at some 16,000 levels, far over -max_len. Here 500 levels
// overflow: ASan reports a stack-overflow and the input is kept. (On a -timeout, libFuzzer prints
// the main thread's stack, which waits for this one; rerun the input under gdb for the other.)
inline constexpr size_t kReaderStack = 256 * 1024;

// A thread started at the first input and kept (starting a thread per input
// cost a third of the executions per second), that runs each input while the caller waits.
class StackRunner {
 public:
  explicit StackRunner(size_t stack_bytes) {
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, stack_bytes) != 0 ||
        pthread_create(&thread, &attr, &StackRunner::loop, this) != 0)
      finding("cannot start the thread that runs the inputs");
    pthread_attr_destroy(&attr);
    pthread_detach(thread);
  }

  void run(void (*fn)(void*), void* arg) {
    std::unique_lock lock(mutex_);
    fn_ = fn;
    arg_ = arg;
    cv_.notify_all();
    cv_.wait(lock, [&] { return fn_ == nullptr; });
  }

 private:
  static void* loop(void* self) {
    auto* r = static_cast<StackRunner*>(self);
    std::unique_lock lock(r->mutex_);
    while (true) {
      r->cv_.wait(lock, [&] { return r->fn_ != nullptr; });
      r->fn_(r->arg_);
      r->fn_ = nullptr;
      r->cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  void (*fn_)(void*) = nullptr;
  void* arg_ = nullptr;
};

// Runs f() on a thread whose stack is `stack_bytes`, while the caller waits.
template <class F>
void on_small_stack(size_t stack_bytes, F&& f) {
  // One per call site, never destroyed: its thread waits on it until the process ends.
  static StackRunner& runner = *new StackRunner(stack_bytes);
  runner.run([](void* p) { (*static_cast<std::remove_reference_t<F>*>(p))(); }, &f);
}

// A file holding the current input, for readers that take a path, rewritten for each input: an
// in-memory file (memfd) opened by its /proc/self/fd path where Linux offers that, else one file
// per process, $TMPDIR/shardlab-fuzz-<tag>-<pid> (or /tmp), removed at exit. (Rewriting a file on
// ext4 costs about 3 ms, which made 100,000 inputs take minutes; the memfd costs microseconds.)
class ScratchFile {
 public:
  explicit ScratchFile(const char* tag) {
    fd_ = ::memfd_create((std::string("shardlab-fuzz-") + tag).c_str(), MFD_CLOEXEC);
    if (fd_ >= 0) {
      path_ = "/proc/self/fd/" + std::to_string(fd_);
      if (::access(path_.c_str(), R_OK) == 0) return;
      ::close(fd_);
      fd_ = -1;
    }
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/shardlab-fuzz-" + tag + "-" +
            std::to_string(::getpid());
  }
  ~ScratchFile() {
    if (fd_ >= 0)
      ::close(fd_);
    else
      std::remove(path_.c_str());
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's contents with `data`; returns the path.
  const std::string& write(const uint8_t* data, size_t size) {
    if (fd_ >= 0) {
      if (::ftruncate(fd_, 0) != 0) finding("cannot truncate the scratch memfd");
      for (size_t done = 0; done < size;) {
        const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
        if (n <= 0) finding("cannot write the scratch memfd");
        done += static_cast<size_t>(n);
      }
      return path_;
    }
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (f == nullptr) finding("cannot create the scratch file " + path_);
    const bool ok = (size == 0 || std::fwrite(data, 1, size, f) == size);
    if (std::fclose(f) != 0 || !ok) finding("cannot write the scratch file " + path_);
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace shardlab::fuzz
