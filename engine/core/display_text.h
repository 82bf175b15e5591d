// Text taken from a file (a job file's key or string value, a manifest's strategy or shard file
// name, a shard's tensor name) or a path, shown in an error message or a listing, goes through
// display_text() first. Every message is one printable line (engine/core/error.h); text from a
// file could break that: a newline splits the line, a NUL ends the C string what() returns (an
// empty message), an ESC starts a terminal escape sequence that recolours, clears or retitles the
// terminal the message is printed on; and a key of a megabyte would make a message of a megabyte.
//
// display_text() shows each C0 control character (0x00-0x1f) and DEL (0x7f) as \xNN (lower-case
// hex: "a\x1b[2J", "no\x0asuch.json") and caps the length. Everything else is kept as it is,
// UTF-8 included (a cut never splits a UTF-8 sequence); a backslash is not escaped, so the shown
// text is for reading, not for parsing back. (net/display_text.h's net::printable() is the
// counterpart for strings from the wire that the monitor keeps: it replaces them with '?'.)
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shardlab {

// A key, a name, a value: at most this many bytes shown.
inline constexpr size_t kMaxDisplayBytes = 64;
// A path (or a command-line assignment): at most this many bytes shown.
inline constexpr size_t kMaxDisplayPathBytes = 512;

// `text` with its control characters shown as \xNN, at most `max_bytes` bytes long (max_bytes >=
// 3; std::string_view::npos: no cap): text that does not fit is cut at a character and ends with
// "..." ("a\x1b[31m" + 61 bytes of key -> its first 61 bytes shown + "...").
inline std::string display_text(std::string_view text, size_t max_bytes = kMaxDisplayBytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  size_t cut = 0;  // the longest prefix so far that leaves room for "..."
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t n = 1;  // a UTF-8 lead byte takes its continuation bytes with it
    if (c >= 0xc0)
      while (n < 4 && i + n < text.size() &&
             (static_cast<unsigned char>(text[i + n]) & 0xc0) == 0x80)
        ++n;
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out.append(text.substr(i, n));
    }
    if (out.size() > max_bytes) {
      out.resize(cut);
      return out += "...";
    }
    if (out.size() + 3 <= max_bytes) cut = out.size();
    i += n;
  }
  return out;
}

}  // namespace shardlab
