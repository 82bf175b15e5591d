// The web server's answers to plain HTTP requests, apart from the sockets (net/web/web_server.h
// owns those): the dashboard's files, /api/run, /metrics, the login page, and the token check
// that guards them all when the server is not on loopback.
//
//   GET /, /index.html, /*.js, /dashboard.css   the page (the embedded files of resources/web)
//   GET /palette.js  the colours of engine/telemetry/palette.h as an ES module, made here
//   GET /plan        the planner's what-if page (plan.html, drawing /api/plan)
//   GET /api/run     the run as one JSON document (a full dashboard frame)
//   GET /metrics     Prometheus text format 0.0.4 (net/web/metrics.h)
//   GET /api/plan?.. a large job's plans, as `shardlab plan --json` (net/web/plan_api.h);
//                    /api/plan/presets the model presets and GPUs
//   GET /login       the login form; POST /login with token=... sets the session cookie
//   GET /ws          (the WebSocket: upgraded by the server, not here)
// Anything else is 404; a method other than GET or HEAD (POST for /login) is 405. Nothing here
// changes the run: the web side is read-only.
//
// With the token required, a request passes with "Authorization: Bearer TOKEN" (scripts,
// Prometheus' authorization: credentials) or the cookie the login page sets (a browser). The
// cookie holds HMAC-SHA256(token, "shardlab web session"), never the token itself. A browser
// asking for a page (/, /plan) without either is sent to /login; anything else gets 401.
#pragma once

#include <boost/beast/http.hpp>
#include <functional>
#include <string>
#include <string_view>

namespace shardlab::net {

namespace http = boost::beast::http;
using WebRequest = http::request<http::string_body>;
using WebResponse = http::response<http::string_body>;

class WebAuth {
 public:
  // required == false: every request passes.
  WebAuth(std::string token, bool required);
  bool required() const { return required_; }
  // Whether the request carries the token (bearer) or the session cookie.
  bool allows(const WebRequest& request) const;
  // Whether `token` (as typed on the login page) is the job's token.
  bool token_matches(const std::string& token) const;
  // The Set-Cookie value of a signed-in browser.
  std::string session_cookie() const;

 private:
  std::string token_;
  std::string session_;  // the cookie's value (hex)
  bool required_;
};

struct WebRoutesContext {
  const WebAuth& auth;
  std::function<std::string()> api_run;  // the /api/run document
  std::function<std::string()> metrics;  // the /metrics text
};

// The response to `request` (keep-alive and version as the request asks).
WebResponse web_respond(const WebRequest& request, const WebRoutesContext& context);

// A response with `status` and a one-line plain-text body (errors the server answers itself:
// 400 malformed, 413 body too large, 431 headers too large, 503 too many connections).
WebResponse web_error(http::status status, const std::string& text, unsigned version = 11);

// Beast's string_view (Boost's in 1.74) as the standard one.
inline std::string_view to_std(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

// The target's path without the query ("/api/run?x=1" -> "/api/run").
std::string target_path(const WebRequest& request);

}  // namespace shardlab::net
