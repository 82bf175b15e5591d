// Whole files as bytes or text, for suites that write inputs and read outputs. A file that cannot
// be opened reads as empty (the suites' comparisons then fail and name it).
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace shardlab::test {

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Replaces the file's contents with the first n bytes (all of them by default): a truncated copy.
inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes,
                        size_t n = static_cast<size_t>(-1)) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            std::streamsize(n < bytes.size() ? n : bytes.size()));
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace shardlab::test
