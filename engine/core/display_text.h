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
// text is for reading, not for parsing back.
//
// printable() is the counterpart for strings that come from the wire (a rank's host name, a
// failure reason, a collective's group) and that the monitor keeps and shows on terminals, in the
// app and on the web page: control characters (ESC and the rest of C0, and DEL) become '?', so a
// peer cannot move the monitor's cursor, retitle a terminal or forge table lines, and the length
// is capped, so it cannot bloat every view.
#pragma once

#include <algorithm>
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

// Group and operation names ("all_reduce", "dp[12]") are short: at most this many bytes are kept.
inline constexpr size_t kMaxLabelBytes = 64;
// Host names, job ids, failure reasons: at most this many bytes are kept.
inline constexpr size_t kMaxTextBytes = 512;

// `text` with its control characters as '?', cut to at most `max_bytes` bytes at a character (a
// cut never splits a UTF-8 sequence) and then marked with "...".
inline std::string printable(std::string_view text, size_t max_bytes = kMaxTextBytes) {
  size_t keep = std::min(text.size(), max_bytes);
  if (keep < text.size())  // back to the lead byte when the cut falls inside a sequence
    while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xc0) == 0x80) --keep;
  std::string out(text.substr(0, keep));
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

}  // namespace shardlab
