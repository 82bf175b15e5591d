// libFuzzer target: the web dashboard's HTTP request handling (net/web/web_routes.h), apart from
// the sockets. The input is the bytes a client sends on one connection. They are parsed as the
// server parses them (net/web/web_server.cpp): Beast's http::request_parser<string_body> with the
// server's limits (headers 8 KiB, bodies 4 KiB), eager, one parser per request, leftover bytes
// going to the next request while the connection is kept alive. A parse error is answered with
// web_error; a request that results goes to WebAuth::allows (as the WebSocket upgrade is checked)
// and to web_respond with a WebAuth that requires a token and small /api/run and /metrics
// lambdas, and the response is serialized as the server writes it.
//
// A finding (fuzz_common.h): a crash, an ASan/UBSan report, any exception (the server runs these
// on its I/O thread), a timeout or an allocation over the limit; and these contracts (the token
// is kToken, the seeds hold requests with it): a request is allowed only when its bytes hold the
// token or the session cookie's value; /api/run and /metrics never answer their documents to a
// request that is not allowed; a session cookie is set only for a POST /login whose bytes hold
// the token; a response has the request's HTTP version.
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "net/web/web_routes.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using namespace shardlab;

constexpr std::string_view kToken = "fuzz-token-5c0f3e1a9b7d42e68a1f0c3b5d7e9a2c";
constexpr std::string_view kApiRunBody = "{\"marker\":\"fuzz-api-run-document\"}";
constexpr std::string_view kMetricsBody = "# fuzz-metrics-document\nshardlab_up 1\n";
// net/web/web_server.h: WebServerOptions::max_header_bytes, max_body_bytes.
constexpr uint32_t kMaxHeaderBytes = 8 * 1024;
constexpr uint64_t kMaxBodyBytes = 4 * 1024;
// Requests answered per input at most (a keep-alive connection's pipeline).
constexpr int kMaxRequests = 16;

bool contains(std::string_view haystack, std::string_view needle) {
  return !needle.empty() && haystack.find(needle) != std::string_view::npos;
}

std::string serialize(const net::WebResponse& res) {
  std::ostringstream out;
  out << res;
  return out.str();
}

void handle(std::string_view input) {
  static const net::WebAuth auth(std::string(kToken), true);
  // "shardlab_session=HEX; Path=/; ...": the cookie's value.
  static const std::string session = [] {
    const std::string c = auth.session_cookie();
    const size_t eq = c.find('='), semi = c.find(';');
    return c.substr(eq + 1, semi - eq - 1);
  }();
  const net::WebRoutesContext ctx{auth, [] { return std::string(kApiRunBody); },
                                  [] { return std::string(kMetricsBody); }};
  const bool holds_secret = contains(input, kToken) || contains(input, session);

  std::string_view rest = input;
  for (int n = 0; n < kMaxRequests; ++n) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kMaxHeaderBytes);
    parser.body_limit(kMaxBodyBytes);
    parser.eager(true);
    beast::error_code ec;
    // What http::async_read does with the bytes it has (boost/beast/http/impl/read.hpp): after
    // need_more it reads from the socket before it parses again, never handing the parser the
    // same bytes twice (Beast asserts that a repeated chunk header has grown). The input is all
    // there is, so that read finds the connection closed.
    while (!parser.is_done()) {
      const size_t used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
      rest.remove_prefix(used);
      if (ec == http::error::need_more) {
        ec = {};
        // All the input there is did not finish the request: the peer closed the connection.
        if (!parser.got_some()) return;  // between two requests: a clean end of stream
        parser.put_eof(ec);
        if (!ec && !parser.is_done()) return;
        break;
      }
      if (ec) break;
      if (used == 0) return;  // no progress and no error: nothing more will come of it
    }
    if (ec) {
      // Malformed or oversized: the server answers once, then closes.
      http::status status = http::status::bad_request;
      if (ec == http::error::header_limit) status = http::status::request_header_fields_too_large;
      if (ec == http::error::body_limit) status = http::status::payload_too_large;
      (void)serialize(net::web_error(
          status, std::to_string(static_cast<unsigned>(status)) + ": " + ec.message()));
      return;
    }
    net::WebRequest req = parser.release();
    const bool allowed = auth.allows(req);
    fuzz::check(!allowed || holds_secret, "a request without the token or the cookie is allowed");
    if (beast::websocket::is_upgrade(req) && net::target_path(req) == "/ws") return;

    const net::WebResponse res = net::web_respond(req, ctx);
    fuzz::check(res.version() == req.version(), "the response's HTTP version is not the request's");
    const std::string path = net::target_path(req);
    if (!allowed) {
      // (Exactly the document: a 404 names the path, which may quote anything.)
      fuzz::check(res.body() != kApiRunBody && res.body() != kMetricsBody,
                  "a request that is not allowed got /api/run's or /metrics' document");
      fuzz::check(!((path == "/api/run" || path == "/metrics") && res.result() == http::status::ok),
                  "a request that is not allowed got 200 for " + path);
    }
    if (res.find(http::field::set_cookie) != res.end())
      fuzz::check(req.method() == http::verb::post && contains(input, kToken),
                  "a session cookie was set for a request without the token");
    (void)serialize(res);
    if (!req.keep_alive()) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    handle(input);
  } catch (const std::exception& e) {
    fuzz::finding("exception from the request handling: " + fuzz::type_name(typeid(e)) + ": " +
                  e.what());
  } catch (...) {
    fuzz::finding("exception of an unknown type from the request handling");
  }
  return 0;
}
