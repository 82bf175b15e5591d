// Log lines collected from another thread (a collector's or launcher's log callback), read safely
// from the test's thread.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace shardlab::test {

struct LogLines {
  std::mutex m;
  std::vector<std::string> lines;

  // The callback to hand to the code under test.
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      std::lock_guard lock(m);
      lines.push_back(line);
    };
  }
  bool contains(const std::string& needle) {
    std::lock_guard lock(m);
    for (const auto& l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
  size_t count() {
    std::lock_guard lock(m);
    return lines.size();
  }
  // Every line, each ending in a newline (for failure messages).
  std::string all() {
    std::lock_guard lock(m);
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
};

}  // namespace shardlab::test
