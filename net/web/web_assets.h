// The dashboard's files (resources/web: index.html, its scripts and style sheet, login.html),
// embedded into the binary at build time (net/web/embed_assets.cmake), so the page works with no
// internet and no installed resources: every file it loads comes from here.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace shardlab::net {

struct WebAsset {
  const char* path;  // "/index.html"
  const unsigned char* data;
  size_t size;
  std::string_view text() const { return {reinterpret_cast<const char*>(data), size}; }
};

// Every embedded file (generated).
const std::vector<WebAsset>& web_assets();

// The file served at `path` ("/" is /index.html); null when there is none.
inline const WebAsset* find_web_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const WebAsset& a : web_assets())
    if (path == a.path) return &a;
  return nullptr;
}

// The Content-Type for a file name by its extension.
inline std::string_view web_content_type(std::string_view path) {
  auto ends = [&](std::string_view ext) {
    return path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  return "application/octet-stream";
}

}  // namespace shardlab::net
