#include "net/web/web_routes.h"

#include <fmt/format.h>

#include <boost/range/iterator_range.hpp>

#include <cctype>
#include <string_view>

#include "net/auth.h"
#include "net/web/metrics.h"
#include "net/web/plan_api.h"
#include "net/web/web_assets.h"

namespace shardlab::net {

namespace {

constexpr std::string_view kCookieName = "shardlab_session";

std::string hex(const Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string o;
  for (const uint8_t b : d) {
    o += digits[b >> 4];
    o += digits[b & 15];
  }
  return o;
}

Digest digest_of(std::string_view text) {
  return sha256({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

// Equal in constant time (their digests compared), whatever the lengths.
bool same_secret(std::string_view a, std::string_view b) {
  return digest_equal(digest_of(a), digest_of(b));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// application/x-www-form-urlencoded value of `name` in `body` ("" when absent).
std::string form_value(std::string_view body, std::string_view name) {
  while (!body.empty()) {
    const size_t amp = body.find('&');
    const std::string_view pair = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) != name || eq == std::string_view::npos) continue;
    std::string out;
    const std::string_view v = pair.substr(eq + 1);
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '+') {
        out += ' ';
      } else if (v[i] == '%' && i + 2 < v.size() &&
                 std::isxdigit(static_cast<unsigned char>(v[i + 1])) &&
                 std::isxdigit(static_cast<unsigned char>(v[i + 2]))) {
        out += static_cast<char>(std::stoi(std::string(v.substr(i + 1, 2)), nullptr, 16));
        i += 2;
      } else {
        out += v[i];
      }
    }
    return out;
  }
  return {};
}

WebResponse respond_with(const WebRequest& req, http::status status, std::string_view type,
                         std::string body) {
  WebResponse res{status, req.version()};
  res.set(http::field::server, "shardlab");
  res.set(http::field::content_type, std::string(type));
  res.set("X-Content-Type-Options", "nosniff");
  res.set(http::field::cache_control, "no-store");
  res.keep_alive(req.keep_alive());
  if (req.method() == http::verb::head) {
    res.content_length(body.size());  // what GET would send, without the body
  } else {
    res.body() = std::move(body);
    res.prepare_payload();
  }
  return res;
}

WebResponse login_page(const WebRequest& req, http::status status, const std::string& error) {
  const WebAsset* page = find_web_asset("/login.html");
  std::string html = page ? std::string(page->text()) : std::string("<!--ERROR-->");
  const std::string marker = "<!--ERROR-->";
  if (const size_t at = html.find(marker); at != std::string::npos)
    html.replace(at, marker.size(),
                 error.empty() ? std::string() : "<p class=\"error\">" + error + "</p>");
  return respond_with(req, status, "text/html; charset=utf-8", std::move(html));
}

}  // namespace

WebAuth::WebAuth(std::string token, bool required) : token_(std::move(token)), required_(required) {
  const std::string_view label = "shardlab web session";
  session_ = hex(hmac_sha256({reinterpret_cast<const uint8_t*>(token_.data()), token_.size()},
                             {reinterpret_cast<const uint8_t*>(label.data()), label.size()}));
}

bool WebAuth::token_matches(const std::string& token) const {
  return !token_.empty() && same_secret(token, token_);
}

std::string WebAuth::session_cookie() const {
  return fmt::format("{}={}; Path=/; HttpOnly; SameSite=Strict", kCookieName, session_);
}

bool WebAuth::allows(const WebRequest& req) const {
  if (!required_) return true;
  if (token_.empty()) return false;
  if (const auto it = req.find(http::field::authorization); it != req.end()) {
    const std::string_view v = trim(to_std(it->value()));
    if (v.size() > 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer "))
      return same_secret(trim(v.substr(7)), token_);
  }
  for (const auto& field : boost::make_iterator_range(req.equal_range(http::field::cookie))) {
    std::string_view cookies = to_std(field.value());
    while (!cookies.empty()) {
      const size_t semi = cookies.find(';');
      const std::string_view c = trim(cookies.substr(0, semi));
      cookies = semi == std::string_view::npos ? std::string_view() : cookies.substr(semi + 1);
      const size_t eq = c.find('=');
      if (eq != std::string_view::npos && c.substr(0, eq) == kCookieName &&
          same_secret(c.substr(eq + 1), session_))
        return true;
    }
  }
  return false;
}

std::string target_path(const WebRequest& request) {
  const std::string_view t = to_std(request.target());
  return std::string(t.substr(0, t.find('?')));
}

WebResponse web_error(http::status status, const std::string& text, unsigned version) {
  WebResponse res{status, version};
  res.set(http::field::server, "shardlab");
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.set(http::field::cache_control, "no-store");
  res.keep_alive(false);
  res.body() = text + "\n";
  res.prepare_payload();
  return res;
}

WebResponse web_respond(const WebRequest& req, const WebRoutesContext& ctx) {
  const std::string path = target_path(req);
  const bool get = req.method() == http::verb::get || req.method() == http::verb::head;

  if (path == "/login") {
    if (!ctx.auth.required()) {
      WebResponse res = respond_with(req, http::status::see_other, "text/plain", "");
      res.set(http::field::location, "/");
      return res;
    }
    if (get) return login_page(req, http::status::ok, "");
    if (req.method() != http::verb::post) {
      WebResponse res = respond_with(req, http::status::method_not_allowed, "text/plain",
                                     "405: /login takes GET or POST\n");
      res.set(http::field::allow, "GET, HEAD, POST");
      return res;
    }
    if (!ctx.auth.token_matches(form_value(req.body(), "token")))
      return login_page(req, http::status::unauthorized, "That is not this job's token.");
    WebResponse res = respond_with(req, http::status::see_other, "text/plain", "");
    res.set(http::field::location, "/");
    res.set(http::field::set_cookie, ctx.auth.session_cookie());
    return res;
  }

  if (!get) {
    WebResponse res = respond_with(req, http::status::method_not_allowed, "text/plain",
                                   fmt::format("405: {} is read-only (GET)\n", path));
    res.set(http::field::allow, "GET, HEAD");
    return res;
  }

  // Browsers ask for it on their own; the page has none (and a 404 would be a console error).
  if (path == "/favicon.ico") return respond_with(req, http::status::no_content, "text/plain", "");
  // The planner's what-if page: /plan is plan.html.
  const std::string file = path == "/plan" ? "/plan.html" : path;
  const WebAsset* asset = file == "/login.html" ? nullptr : find_web_asset(file);
  const bool page = asset != nullptr && web_content_type(asset->path).starts_with("text/html");
  const bool known = path == "/api/run" || path == "/metrics" || path == "/ws" ||
                     path == "/api/plan" || path == "/api/plan/presets" || asset != nullptr;
  if (!known)
    return respond_with(req, http::status::not_found, "text/plain",
                        fmt::format("404: nothing at {}\n", path));

  if (!ctx.auth.allows(req)) {
    if (page) {
      WebResponse res = respond_with(req, http::status::see_other, "text/plain", "");
      res.set(http::field::location, "/login");
      return res;
    }
    WebResponse res = respond_with(
        req, http::status::unauthorized, "text/plain",
        "401: this dashboard needs the job's token (Authorization: Bearer TOKEN, or sign in at "
        "/login)\n");
    res.set(http::field::www_authenticate, "Bearer realm=\"shardlab\"");
    return res;
  }

  if (path == "/api/run")
    return respond_with(req, http::status::ok, "application/json", ctx.api_run());
  if (path == "/metrics")
    return respond_with(req, http::status::ok, kPrometheusContentType, ctx.metrics());
  if (path == "/api/plan") {
    const PlanApiReply plan = plan_api(to_std(req.target()));
    return respond_with(req, plan.status == 200 ? http::status::ok : http::status::bad_request,
                        "application/json", plan.json);
  }
  if (path == "/api/plan/presets")
    return respond_with(req, http::status::ok, "application/json", plan_presets_json());
  if (path == "/ws")
    return respond_with(req, http::status::upgrade_required, "text/plain",
                        "426: /ws is the dashboard's WebSocket\n");
  WebResponse res = respond_with(req, http::status::ok, web_content_type(asset->path),
                                 std::string(asset->text()));
  if (page)
    res.set("Content-Security-Policy",
            "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; "
            "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'");
  return res;
}

}  // namespace shardlab::net
