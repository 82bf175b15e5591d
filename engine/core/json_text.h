// JSON string literals written by hand (the flight recorder, the dashboard's frames): the one
// writer, so every such document is valid JSON and valid UTF-8 whatever bytes a rank sends.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shardlab {

// The length of the valid UTF-8 sequence at text[i], or 0 when it is not one (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence_length(std::string_view text, size_t i);

// Appends `text` as a JSON string literal, quotes included. Valid UTF-8 passes; any other byte
// becomes U+FFFD (a host name or failure reason from a rank may be in any encoding, or cut
// mid-character; a browser must drop a WebSocket that sends invalid UTF-8). Control characters
// are escaped, and '<' too, so a string can never close a <script> of a page that embeds it.
void append_json_string(std::string& out, std::string_view text);

inline std::string json_string(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

}  // namespace shardlab
