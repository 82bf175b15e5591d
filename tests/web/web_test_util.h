// For the suites that test the web dashboard with real programs: a `shardlab` child serving
// --http (its URL read from its output), a plain HTTP GET on loopback, and which of the Debian
// programs the tests drive (chromium, chromedriver, python3-selenium, prometheus) are missing.
#pragma once

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QString>
#include <QStringList>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <string>

#include "tests/common/process.h"

namespace shardlab::test {

inline QString shardlab_binary() {
  return QStringLiteral(SHARDLAB_BINARY_DIR "/engine/cli/shardlab");
}

// A `shardlab` child that serves the dashboard: started with `args` (which include --http
// 127.0.0.1:0), the URL taken from its "web: ... http://..." line. Killed when it goes.
class ServingChild {
 public:
  ServingChild(const QStringList& args, const QString& cwd,
               const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
    p_.setWorkingDirectory(cwd);
    p_.setProcessEnvironment(env);
    p_.setProcessChannelMode(QProcess::MergedChannels);
    p_.start(shardlab_binary(), args);
  }
  ~ServingChild() {
    if (p_.state() != QProcess::NotRunning) {
      p_.terminate();
      if (!p_.waitForFinished(10000)) {
        p_.kill();
        p_.waitForFinished(5000);
      }
    }
  }
  // Waits (at most timeout_ms) for the URL; "" when it did not come (output() says why).
  QString url(int timeout_ms = 60000) {
    static const QRegularExpression re(QStringLiteral("(http://127\\.0\\.0\\.1:\\d+/)"));
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < timeout_ms) {
      out_ += QString::fromUtf8(p_.readAll());
      const auto m = re.match(out_);
      if (m.hasMatch()) return m.captured(1);
      if (p_.state() == QProcess::NotRunning) break;
      p_.waitForReadyRead(200);
    }
    out_ += QString::fromUtf8(p_.readAll());
    return {};
  }
  // Everything it printed so far.
  QString output() {
    out_ += QString::fromUtf8(p_.readAll());
    return out_;
  }
  bool running() const { return p_.state() != QProcess::NotRunning; }
  // Waits for it to exit by itself; false at the timeout.
  bool wait(int timeout_ms) { return p_.waitForFinished(timeout_ms); }
  int exit_code() const { return p_.exitCode(); }

 private:
  QProcess p_;
  QString out_;
};

// GET http://127.0.0.1:port/target, with a 10 s deadline; status 0 when it could not be done
// (body then says why).
struct HttpReply {
  unsigned status = 0;
  std::string body;
};
inline HttpReply http_get(uint16_t port, const std::string& target) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  HttpReply r;
  try {
    boost::asio::io_context io;
    beast::tcp_stream s(io);
    s.expires_after(std::chrono::seconds(10));
    s.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(s, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(s, buf, res);
    r.status = res.result_int();
    r.body = res.body();
  } catch (const std::exception& e) {
    r.body = e.what();
  }
  return r;
}

// A free loopback port (bound, read, released: a tiny race, fine for tests).
inline uint16_t free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

// "" when everything `what` names is installed, else a skip message naming what is missing and
// the package to install.
inline QString missing(const QStringList& what) {
  QStringList gone;
  for (const QString& w : what) {
    if (w == QLatin1String("selenium")) {
      QProcess p;
      p.start(QStringLiteral("/usr/bin/python3"),
              {QStringLiteral("-c"), QStringLiteral("import selenium")});
      if (!p.waitForFinished(30000) || p.exitCode() != 0)
        gone << QStringLiteral("python3-selenium (the selenium module of /usr/bin/python3)");
    } else if (!QFileInfo::exists(QStringLiteral("/usr/bin/") + w)) {
      gone << (w == QLatin1String("chromedriver")
                   ? QStringLiteral("chromium-driver (/usr/bin/chromedriver)")
                   : w + QStringLiteral(" (/usr/bin/") + w + ")");
    }
  }
  if (gone.isEmpty()) return {};
  return QStringLiteral("not installed: ") + gone.join(QStringLiteral(", ")) +
         QStringLiteral(" (installer/bootstrap test installs them)");
}

}  // namespace shardlab::test
