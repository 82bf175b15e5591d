// The web server's routes (net/web/web_server.h, net/web/web_routes.h) on loopback, through the
// Beast clients of tests/net/web_client.h: every route's status code and content type, HEAD,
// malformed, oversized and silent requests (the request timeout), the token (bearer, the login
// form and its cookie, the WebSocket's handshake and Origin) and the connection cap.
//
// Every wait has a deadline: the clients run their own io_context with run_one_for / run_for
// and Beast's stream timeouts, and a server's thread is stopped outright when it does not end.
#include <QtTest>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "net/protocol.h"
#include "net/run_model.h"
#include "net/web/web_routes.h"
#include "net/web/web_server.h"
#include "tests/common/log_lines.h"
#include "tests/common/telemetry_events.h"
#include "tests/common/wait.h"
#include "tests/net/web_client.h"
#include "tests/net/web_host.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tl = shardlab::telemetry;
using boost::system::error_code;
using nlohmann::json;
using namespace shardlab::test;
using namespace std::chrono_literals;

namespace {

// QVERIFY that a reply's Content-Type starts with `prefix`.
#define VERIFY_TYPE(reply, prefix)                                            \
  QVERIFY2((reply).header(http::field::content_type).rfind((prefix), 0) == 0, \
           (reply).header(http::field::content_type).c_str())

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A RunModel with a few ranks, for the routes' tests.
void feed_small_run(RunModel& m) {
  const double t = tl::now_seconds();
  for (int r = 0; r < 4; ++r) {
    Hello h = grid_hello("web-test", r, 4, 1, 1, 4);
    h.host = "node";
    m.add(Message(h));
    tl::StepEvent s;
    s.step = 1;
    s.loss = 2.5;
    s.step_seconds = 0.5;
    m.add(Message(make_event(r, t, s)));
  }
}

// application/x-www-form-urlencoded: unreserved characters as they are, space as '+', the rest
// %XX.
std::string form_encode(const std::string& s) {
  std::string o;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      o += c;
    } else if (c == ' ') {
      o += '+';
    } else {
      static const char* hex = "0123456789ABCDEF";
      o += '%';
      o += hex[u >> 4];
      o += hex[u & 15];
    }
  }
  return o;
}

}  // namespace

class TestWebRoutes : public QObject {
  Q_OBJECT

 private slots:
  // Every route's status and content type; HEAD as GET without the body.
  void routes() {
    RunModel model;
    feed_small_run(model);
    WebHost host(WebOptions{}, live(model));
    const uint16_t port = host.port();
    QVERIFY(port != 0);
    QCOMPARE(host.web().url(), "http://127.0.0.1:" + std::to_string(port) + "/");

    Reply r = get(port, "/");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "text/html");
    QVERIFY(lower(r.body()).find("<html") != std::string::npos);
    const size_t page_size = r.body().size();
    QCOMPARE(get(port, "/index.html").body(), r.body());

    r = get(port, "/dashboard.js");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "text/javascript");
    QVERIFY(!r.body().empty());
    r = get(port, "/dashboard.css");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "text/css");
    QVERIFY(!r.body().empty());

    r = get(port, "/api/run");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "application/json");
    const json run = json::parse(r.body(), nullptr, false);
    QVERIFY2(!run.is_discarded(), r.body().substr(0, 500).c_str());
    QVERIFY(run.contains("job"));
    QVERIFY(run.contains("ranks"));
    QCOMPARE(run["job"]["id"], json("web-test"));
    QCOMPARE(run["ranks"].size(), size_t{4});
    // No rank sent a LAYOUT (as in a recording made before protocol version 4): the page is told
    // the layout is unknown.
    QVERIFY2(r.body().find("\"layout\":null") != std::string::npos, r.body().c_str());
    QCOMPARE(run["layout"], json(nullptr));

    r = get(port, "/metrics");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    QVERIFY2(r.header(http::field::content_type).rfind("text/plain; version=0.0.4", 0) == 0,
             r.header(http::field::content_type).c_str());
    QVERIFY(r.body().find("shardlab_step{") != std::string::npos);

    for (const char* missing : {"/nope", "/api", "/api/run/x", "/login.html", "/../etc/passwd"}) {
      r = get(port, missing);
      QVERIFY2(r.status() == 404, qPrintable(QString(missing) + ": " + describe(r)));
    }
    r = get(port, "/api/run?pretty=1");  // the query is not part of the path
    QCOMPARE(r.status(), 200u);

    r = request(port, http::verb::post, "/api/run", {}, "x");
    QVERIFY2(r.status() == 405, qPrintable(describe(r)));
    QVERIFY(!r.header(http::field::allow).empty());
    r = request(port, http::verb::delete_, "/");
    QVERIFY2(r.status() == 405, qPrintable(describe(r)));
    r = get(port, "/ws");  // not an upgrade
    QVERIFY2(r.status() == 426, qPrintable(describe(r)));

    r = request(port, http::verb::head, "/");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    QVERIFY(r.body().empty());
    QCOMPARE(r.header(http::field::content_length), std::to_string(page_size));

    // HEAD sends no body: a second request on the same connection reads cleanly after it.
    HttpConn c(port);
    QCOMPARE(c.connect(), error_code());
    WebRequest head{http::verb::head, "/api/run", 11};
    head.set(http::field::host, "127.0.0.1");
    QCOMPARE(c.write(head), error_code());
    WebResponse res;
    QCOMPARE(c.read(res, true), error_code());
    QCOMPARE(res.result_int(), 200u);
    const std::string declared(to_std(res[http::field::content_length]));
    WebRequest again{http::verb::get, "/dashboard.css", 11};
    again.set(http::field::host, "127.0.0.1");
    QCOMPARE(c.write(again), error_code());
    QCOMPARE(c.read(res), error_code());
    QCOMPARE(res.result_int(), 200u);
    QCOMPARE(res.body(), get(port, "/dashboard.css").body());
    QVERIFY(std::stoul(declared) > 0);
    QVERIFY(host.web().stats().requests >= 18);
  }

  // /palette.js: the colours both front ends draw with, as an ES module whose one export is the
  // object of every meaning's colour; the expected colours are written out here.
  void paletteModule() {
    RunModel model;
    feed_small_run(model);
    WebContent content;
    content.live = &model;
    WebHost host(WebOptions{}, content);
    const uint16_t port = host.port();
    const Reply r = get(port, "/palette.js");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "text/javascript");
    QCOMPARE(r.header("X-Content-Type-Options"), std::string("nosniff"));
    const std::string& body = r.body();
    // Comment lines, then one `export const PALETTE = {...};` and nothing else.
    const std::string lead = "export const PALETTE = ";
    const size_t at = body.find(lead);
    QVERIFY2(at != std::string::npos, body.c_str());
    std::string before = body.substr(0, at);
    for (size_t line = 0; line < before.size();) {
      const size_t end = before.find('\n', line);
      QVERIFY2(before.compare(line, 3, "// ") == 0, before.c_str());
      line = end == std::string::npos ? before.size() : end + 1;
    }
    const std::string tail = "};\n";
    QVERIFY2(body.size() > at + lead.size() + tail.size() &&
                 body.compare(body.size() - tail.size(), tail.size(), tail) == 0,
             body.c_str());
    const std::string object = body.substr(at + lead.size(), body.size() - at - lead.size() - 2);
    QCOMPARE(body.find("export", at + lead.size()), std::string::npos);
    const json palette = json::parse(object, nullptr, false);
    QVERIFY2(!palette.is_discarded() && palette.is_object(), object.c_str());
    const json expected = {
        {"span",
         {{"forward", "#4e79a7"},
          {"backward", "#f28e2b"},
          {"optimizer", "#59a14f"},
          {"collective", "#b07aa1"},
          {"idle", "#dedede"}}},
        {"memory",
         {{"params", "#0072b2"},
          {"grads", "#e69f00"},
          {"optimizer_state", "#009e73"},
          {"activations", "#cc79a7"},
          {"comm", "#56b4e9"}}},
        {"rank", {{"straggler", "#f0af00"}, {"failed", "#d62728"}, {"silent", "#646464"}}},
        {"group", {{"tp", "#ff6e00"}, {"dp", "#0050ff"}, {"pp", "#c800c8"}}},
        {"limit", {{"usable", "#b71c1c"}, {"hbm", "#303030"}}},
    };
    QVERIFY2(palette == expected, palette.dump(2).c_str());
    // One colour per meaning: no two meanings share one.
    std::set<std::string> seen;
    for (const auto& [group, named] : palette.items())
      for (const auto& [name, hex] : named.items())
        QVERIFY2(seen.insert(hex.get<std::string>()).second, (group + "." + name).c_str());

    // The pages load their scripts as modules, and every module they import is served as
    // JavaScript (a module script with another type is refused by the browser).
    for (const char* page : {"/", "/plan"}) {
      const Reply p = get(port, page);
      QVERIFY2(p.status() == 200, qPrintable(describe(p)));
      QVERIFY(p.body().find("type=\"module\"") != std::string::npos);
      QVERIFY(p.body().find(" defer") == std::string::npos);
      QVERIFY2(p.header("Content-Security-Policy").find("default-src 'self'") != std::string::npos,
               p.header("Content-Security-Policy").c_str());
    }
    std::vector<std::string> todo{"/dashboard.js", "/plan.js"};
    std::set<std::string> served;
    while (!todo.empty()) {
      const std::string path = todo.back();
      todo.pop_back();
      if (!served.insert(path).second) continue;
      const Reply m = get(port, path);
      QVERIFY2(m.status() == 200, qPrintable(QString::fromStdString(path) + ": " + describe(m)));
      VERIFY_TYPE(m, "text/javascript");
      QVERIFY2(m.body().find("window.ShardLab") == std::string::npos, path.c_str());
      for (size_t from = m.body().find("from './"); from != std::string::npos;
           from = m.body().find("from './", from + 1)) {
        const size_t end = m.body().find('\'', from + 8);
        todo.push_back("/" + m.body().substr(from + 8, end - from - 8));
      }
    }
    for (const char* module : {"/draw.js", "/state.js", "/socket.js", "/rank_grid.js", "/charts.js",
                               "/comm_views.js", "/holdings.js", "/controls.js", "/palette.js"})
      QVERIFY2(served.count(module) == 1, module);

    // With the token required it is guarded like the other scripts.
    WebOptions o;
    o.token = "palette-token";
    o.require_token = true;
    WebHost guarded(o, content);
    QCOMPARE(get(guarded.port(), "/palette.js").status(), 401u);
    const Reply ok =
        get(guarded.port(), "/palette.js", {{http::field::authorization, "Bearer palette-token"}});
    QVERIFY2(ok.status() == 200, qPrintable(describe(ok)));
    QCOMPARE(ok.body(), body);
  }

  // Garbage is answered 400 and the connection closed; headers over max_header_bytes 431; a
  // body over max_body_bytes 413; a client that sends nothing is closed after request_timeout.
  void badRequests() {
    RunModel model;
    feed_small_run(model);
    WebOptions o;
    o.request_timeout = 500ms;
    LogLines log;
    o.log = log.sink();
    WebHost host(o, live(model));
    const uint16_t port = host.port();

    {
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      QCOMPARE(c.write_raw(std::string("\x01\x02 nonsense\r\n\r\n")), error_code());
      WebResponse res;
      QCOMPARE(c.read(res), error_code());
      QCOMPARE(res.result_int(), 400u);
      QVERIFY(!res.keep_alive());
      QVERIFY2(c.closed_within(3000ms), "the connection stayed open after a 400");
    }
    {
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      const std::string big =
          "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(20 * 1024, 'a') + "\r\n\r\n";
      QCOMPARE(c.write_raw(big), error_code());
      WebResponse res;
      const error_code ec = c.read(res);
      QVERIFY2(!ec, ec.message().c_str());
      QCOMPARE(res.result_int(), 431u);
      QVERIFY2(c.closed_within(3000ms), "the connection stayed open after a 431");
    }
    {
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      const std::string body(10 * 1024, 'x');
      const std::string post =
          "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
          "application/x-www-form-urlencoded\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      QCOMPARE(c.write_raw(post), error_code());
      WebResponse res;
      const error_code ec = c.read(res);
      QVERIFY2(!ec, ec.message().c_str());
      QCOMPARE(res.result_int(), 413u);
      QVERIFY2(c.closed_within(3000ms), "the connection stayed open after a 413");
    }
    {
      // Connects and says nothing: closed after about request_timeout, not at once, not never.
      HttpConn c(port);
      const auto start = Clock::now();
      QCOMPARE(c.connect(), error_code());
      size_t bytes = 0;
      QVERIFY2(c.closed_within(4000ms, &bytes), "a silent client was never closed");
      const double took = seconds_since(start);
      QVERIFY2(took >= 0.4 && took < 3.0, qPrintable(QString("closed after %1 s").arg(took)));
      QCOMPARE(bytes, size_t{0});
    }
    {
      // Half a request, then silence: closed the same way.
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      QCOMPARE(c.write_raw("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"), error_code());
      QVERIFY2(c.closed_within(4000ms), "a client stalled mid-request was never closed");
    }
    // The server is still fine.
    QCOMPARE(get(port, "/api/run").status(), 200u);
  }

  // A client still sending when its request is refused (headers over max_header_bytes: 431; a
  // body over max_body_bytes: 413) reads the answer instead of a reset: the server stops sending
  // after it and discards what comes in for a while (closing a socket with unread input sends RST,
  // which would throw away the response). Each client writes 1 MiB before it reads anything, far
  // more than the socket buffers hold while the server has stopped reading (the client's send
  // buffer is made small: left to grow, on loopback it could take the whole megabyte).
  void refusedRequestsAreReadNotReset() {
    RunModel model;
    feed_small_run(model);
    WebOptions o;
    LogLines log;
    o.log = log.sink();
    WebHost host(o, live(model));
    const uint16_t port = host.port();
    constexpr size_t kSent = size_t{1} << 20;
    const auto small_send_buffer = [](HttpConn& c) {
      c.socket().set_option(boost::asio::socket_base::send_buffer_size(8192));
    };

    {
      std::string big = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ";
      big += std::string(kSent - big.size() - 4, 'a');
      big += "\r\n\r\n";
      QCOMPARE(big.size(), kSent);
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      small_send_buffer(c);
      const error_code wrote = c.write_raw(big);
      QVERIFY2(!wrote,
               qPrintable("writing the headers: " + QString::fromStdString(wrote.message())));
      WebResponse res;
      const error_code ec = c.read(res);
      QVERIFY2(!ec, qPrintable("reading the 431: " + QString::fromStdString(ec.message())));
      QCOMPARE(res.result_int(), 431u);
      QVERIFY(!res.keep_alive());
      QVERIFY2(c.closed_within(3000ms), "the connection stayed open after a 431");
    }
    {
      std::string post =
          "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
          "application/x-www-form-urlencoded\r\nContent-Length: 1073741824\r\n\r\n";
      post += std::string(kSent - post.size(), 'x');
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      small_send_buffer(c);
      const error_code wrote = c.write_raw(post);
      QVERIFY2(!wrote, qPrintable("writing the body: " + QString::fromStdString(wrote.message())));
      WebResponse res;
      const error_code ec = c.read(res);
      QVERIFY2(!ec, qPrintable("reading the 413: " + QString::fromStdString(ec.message())));
      QCOMPARE(res.result_int(), 413u);
      QVERIFY(!res.keep_alive());
      QVERIFY2(c.closed_within(3000ms), "the connection stayed open after a 413");
    }
    {
      // A client that goes on sending for ever is cut off anyway (after 1 MiB or about 1 s).
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      small_send_buffer(c);
      const auto start = Clock::now();
      bool ended = bool(c.write_raw(
          "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1073741824\r\n\r\n"));
      const std::string more(64 * 1024, 'x');
      while (!ended && seconds_since(start) < 10) ended = bool(c.write_raw(more));
      QVERIFY2(ended, "a client sending without end was never cut off");
      QVERIFY2(seconds_since(start) < 5,
               qPrintable(QString("cut off after %1 s").arg(seconds_since(start))));
    }
    // The server is still fine.
    QCOMPARE(get(port, "/api/run").status(), 200u);
  }

  // With the token required: bearer, the login form and its cookie, the WebSocket's handshake
  // and Origin.
  void tokenRequired() {
    RunModel model;
    feed_small_run(model);
    WebOptions o;
    // '+', '/', '%', '&', '=' and a space: the form must encode them all.
    const std::string token = "tok+en/with space&and=eq%2B;";
    o.token = token;
    o.require_token = true;
    WebHost host(o, live(model));
    const uint16_t port = host.port();
    const std::pair<http::field, std::string> bearer{http::field::authorization, "Bearer " + token};
    const std::pair<http::field, std::string> wrong{http::field::authorization,
                                                    "Bearer tok+en/with space&and=eq%2B"};

    for (const char* path : {"/api/run", "/metrics", "/dashboard.js", "/api/plan/presets"}) {
      Reply r = get(port, path);
      QVERIFY2(r.status() == 401, qPrintable(QString(path) + ": " + describe(r)));
      QVERIFY2(r.header(http::field::www_authenticate).rfind("Bearer", 0) == 0,
               r.header(http::field::www_authenticate).c_str());
      QVERIFY(r.body().find(token) == std::string::npos);
      r = get(port, path, {wrong});
      QVERIFY2(r.status() == 401, qPrintable(QString(path) + ": " + describe(r)));
      r = get(port, path, {{http::field::authorization, "Basic " + token}});
      QVERIFY2(r.status() == 401, qPrintable(QString(path) + ": " + describe(r)));
      r = get(port, path, {bearer});
      QVERIFY2(r.status() == 200, qPrintable(QString(path) + ": " + describe(r)));
    }
    QVERIFY(!json::parse(get(port, "/api/run", {bearer}).body(), nullptr, false).is_discarded());

    // A browser without the cookie is sent to the login page.
    Reply r = get(port, "/");
    QVERIFY2(r.status() == 303, qPrintable(describe(r)));
    QCOMPARE(r.header(http::field::location), std::string("/login"));
    r = get(port, "/login");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    QVERIFY(r.header(http::field::content_type).rfind("text/html", 0) == 0);
    QVERIFY(lower(r.body()).find("<form") != std::string::npos);

    const std::pair<http::field, std::string> form{http::field::content_type,
                                                   "application/x-www-form-urlencoded"};
    r = request(port, http::verb::post, "/login", {form}, "token=wrong");
    QVERIFY2(r.status() == 401, qPrintable(describe(r)));
    QVERIFY(r.header(http::field::set_cookie).empty());
    // The token as typed but not encoded: '+' reads as a space, "%2B" as '+': not the token.
    r = request(port, http::verb::post, "/login", {form}, "token=" + token);
    QVERIFY2(r.status() == 401, qPrintable(describe(r)));
    r = request(port, http::verb::post, "/login", {form}, "");
    QVERIFY2(r.status() == 401, qPrintable(describe(r)));

    // Encoded properly, among other fields.
    r = request(port, http::verb::post, "/login", {form},
                "user=x&token=" + form_encode(token) + "&next=%2F");
    QVERIFY2(r.status() == 303, qPrintable(describe(r)));
    QCOMPARE(r.header(http::field::location), std::string("/"));
    const std::string set_cookie = r.header(http::field::set_cookie);
    QVERIFY2(set_cookie.rfind("shardlab_session=", 0) == 0, set_cookie.c_str());
    QVERIFY2(lower(set_cookie).find("httponly") != std::string::npos, set_cookie.c_str());
    const std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
    const std::string value = cookie.substr(cookie.find('=') + 1);
    QVERIFY(value.size() >= 32);
    QVERIFY2(set_cookie.find(token) == std::string::npos, set_cookie.c_str());
    QVERIFY2(set_cookie.find(form_encode(token)) == std::string::npos, set_cookie.c_str());
    QVERIFY(value.find("tok") == std::string::npos);
    // The same with %20 for the space and lower-case hex digits.
    r = request(port, http::verb::post, "/login", {form},
                "token=tok%2Ben%2Fwith%20space%26and%3deq%252B%3b");
    QVERIFY2(r.status() == 303, qPrintable(describe(r)));
    QCOMPARE(r.header(http::field::set_cookie), set_cookie);

    const std::pair<http::field, std::string> with_cookie{http::field::cookie, cookie};
    QCOMPARE(get(port, "/api/run", {with_cookie}).status(), 200u);
    QCOMPARE(get(port, "/metrics", {with_cookie}).status(), 200u);
    QCOMPARE(get(port, "/", {with_cookie}).status(), 200u);
    QCOMPARE(get(port, "/api/run", {{http::field::cookie, "a=b; " + cookie + "; c=d"}}).status(),
             200u);
    QCOMPARE(get(port, "/api/run", {{http::field::cookie, "shardlab_session=" + token}}).status(),
             401u);
    QCOMPARE(
        get(port, "/api/run", {{http::field::cookie, "shardlab_session=" + value + "0"}}).status(),
        401u);
    QCOMPARE(get(port, "/api/run", {{http::field::cookie, "other=" + value}}).status(), 401u);

    // The WebSocket: refused without credentials, upgraded with the cookie or the bearer.
    {
      WsClient ws(port);
      unsigned status = 0;
      QVERIFY(ws.connect(&status));
      QCOMPARE(status, 401u);
    }
    for (const auto& credential : {with_cookie, bearer}) {
      WsClient ws(port);
      ws.headers = {credential};
      unsigned status = 0;
      const error_code ec = ws.connect(&status);
      QVERIFY2(!ec, ec.message().c_str());
      QCOMPARE(status, 101u);
      ws.start_reading();
      const auto first = ws.next(5000ms);
      QVERIFY2(first.has_value(), "no frame within 5 s");
      const json j = json::parse(*first, nullptr, false);
      QVERIFY(j.is_object());
      QCOMPARE(j["type"], json("full"));
    }
    // Another site's page (Origin of another host) is refused even with the cookie; the page's
    // own origin is not.
    const std::string self_origin = "http://127.0.0.1:" + std::to_string(port);
    for (const std::string& origin :
         {std::string("http://evil.example"), "http://evil.example:" + std::to_string(port),
          std::string("http://127.0.0.1:1"), std::string("null")}) {
      WsClient ws(port);
      ws.headers = {with_cookie, {http::field::origin, origin}};
      unsigned status = 0;
      QVERIFY(ws.connect(&status));
      QVERIFY2(status == 403,
               qPrintable(QString::fromStdString(origin) + QString(": %1").arg(status)));
    }
    {
      WsClient ws(port);
      ws.headers = {with_cookie, {http::field::origin, self_origin}};
      unsigned status = 0;
      const error_code ec = ws.connect(&status);
      QVERIFY2(!ec, ec.message().c_str());
      QCOMPARE(status, 101u);
      ws.start_reading();
      const auto first = ws.next(5000ms);
      QVERIFY(first.has_value());
      QCOMPARE(json::parse(*first, nullptr, false).value("type", ""), std::string("full"));
    }
  }

  // Without the token, the login page has nothing to do: it sends the browser to the dashboard.
  void loginWithoutToken() {
    RunModel model;
    WebHost host(WebOptions{}, live(model));
    for (const http::verb v : {http::verb::get, http::verb::post}) {
      const Reply r = request(host.port(), v, "/login", {}, "token=x");
      QVERIFY2(r.status() == 303, qPrintable(describe(r)));
      QCOMPARE(r.header(http::field::location), std::string("/"));
      QVERIFY(r.header(http::field::set_cookie).empty());
    }
    QCOMPARE(get(host.port(), "/api/run").status(), 200u);
  }

  // max_connections: the fifth connection is closed at once; once the four go, new ones work.
  // Connections that are not viewers are capped lower than all (max_pending): idle clients
  // holding every such slot cannot keep a new client out; the oldest idle one is closed instead,
  // and a viewer already watching is never the one to go.
  void idleClientsCannotKeepOthersOut() {
    RunModel model;
    feed_small_run(model);
    WebOptions o;
    o.max_connections = 16;
    o.max_pending = 3;
    o.pending_grace = std::chrono::milliseconds(0);
    WebHost host(o, live(model));
    const uint16_t port = host.port();
    WsClient viewer(port);
    QCOMPARE(viewer.connect(), error_code());
    std::vector<std::unique_ptr<HttpConn>> idle;
    for (int i = 0; i < 3; ++i) {
      idle.push_back(std::make_unique<HttpConn>(port));
      QCOMPARE(idle.back()->connect(), error_code());
    }
    QVERIFY(wait_for([&] { return host.web().stats().accepted == 4; }, 5000ms));
    // A new client is served at once; the oldest idle connection was closed for it.
    QCOMPARE(get(port, "/api/run").status(), 200u);
    size_t bytes = 0;
    QVERIFY2(idle[0]->closed_within(3000ms, &bytes), "the oldest idle connection is still open");
    QVERIFY(host.web().stats().dropped_pending >= 1);
    QVERIFY(!viewer.closed());
    QCOMPARE(host.web().stats().viewers_open, uint64_t{1});
  }

  void connectionCap() {
    RunModel model;
    feed_small_run(model);
    WebOptions o;
    o.max_connections = 4;
    LogLines log;
    o.log = log.sink();
    WebHost host(o, live(model));
    const uint16_t port = host.port();
    std::vector<std::unique_ptr<HttpConn>> idle;
    for (int i = 0; i < 4; ++i) {
      idle.push_back(std::make_unique<HttpConn>(port));
      QCOMPARE(idle.back()->connect(), error_code());
    }
    QVERIFY(wait_for([&] { return host.web().stats().accepted == 4; }, 5000ms));
    {
      HttpConn fifth(port);
      QCOMPARE(fifth.connect(), error_code());  // the kernel accepts; the server closes
      const auto start = Clock::now();
      size_t bytes = 0;
      QVERIFY2(fifth.closed_within(3000ms, &bytes), "the fifth connection was not closed");
      QVERIFY(seconds_since(start) < 2.0);
      QVERIFY(wait_for([&] { return host.web().stats().refused == 1; }, 2000ms));
    }
    QCOMPARE(host.web().stats().accepted, uint64_t{4});
    QVERIFY2(log.contains("refused"), log.all().c_str());
    // The four are still served.
    {
      WebRequest req{http::verb::get, "/api/run", 11};
      req.set(http::field::host, "127.0.0.1");
      QCOMPARE(idle[0]->write(req), error_code());
      WebResponse res;
      QCOMPARE(idle[0]->read(res), error_code());
      QCOMPARE(res.result_int(), 200u);
    }
    idle.clear();  // closes them
    // The server notices the closes; then new connections are served.
    bool served = false;
    const auto deadline = Clock::now() + 5s;
    while (!served && Clock::now() < deadline) {
      served = get(port, "/api/run").status() == 200;
      if (!served) std::this_thread::sleep_for(50ms);
    }
    QVERIFY(served);
    std::vector<std::unique_ptr<HttpConn>> again;
    for (int i = 0; i < 4; ++i) {
      again.push_back(std::make_unique<HttpConn>(port));
      QCOMPARE(again.back()->connect(), error_code());
      WebRequest req{http::verb::get, "/metrics", 11};
      req.set(http::field::host, "127.0.0.1");
      QCOMPARE(again.back()->write(req), error_code());
      WebResponse res;
      QCOMPARE(again.back()->read(res), error_code());
      QCOMPARE(res.result_int(), 200u);
    }
  }
};

QTEST_GUILESS_MAIN(TestWebRoutes)
#include "tst_web_routes.moc"
