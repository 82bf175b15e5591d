// Teaching mode from the web page's side: a real `shardlab run --http` of the toy job with
// telemetry.teaching on, and a WebSocket viewer (as the page is): every frame says whether the run
// is paused and after which phase; {"cmd":"teach","do":...} from the viewer steps it on by one
// phase, to the end of the step, or lets it run to the end, which the process then reaches.
// The phases counted are the ranks' own (the PhaseEvents behind the frames' timeline), and the
// gate's figures in the frames must agree with them.
#include <QtTest>

#include <QTemporaryDir>

#include <nlohmann/json.hpp>

#include "tests/net/web_client.h"
#include "tests/web/web_test_util.h"

using namespace shardlab::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const QString kToy = QStringLiteral(SHARDLAB_SOURCE_DIR "/resources/jobs/toy.json");

// The toy job in teaching mode for 3 steps, serving the page.
const QStringList kTeachingRun = {
    "run",           kToy,     "--set",      "telemetry.teaching=true", "--set",
    "train.steps=3", "--http", "127.0.0.1:0"};

uint16_t port_of(const QString& url) {
  return static_cast<uint16_t>(QUrl(url).port());
}

// Reads frames until the newest "teaching" section satisfies `ok`; that section, or null after
// 30 s.
json teaching_until(WsClient& ws, json& last, const std::function<bool(const json&)>& ok) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (last.is_object() && ok(last)) return last;
    const std::optional<std::string> m = ws.next(1000ms);
    if (!m) continue;
    const json frame = json::parse(*m, nullptr, false);
    if (frame.is_object() && frame.contains("teaching")) last = frame["teaching"];
  }
  return json();
}

}  // namespace

class TestWebTeaching : public QObject {
  Q_OBJECT

 private slots:
  void pageStepsTheRunOn() {
    QTemporaryDir dir;
    ServingChild run(kTeachingRun, dir.path());
    const QString url = run.url();
    QVERIFY2(!url.isEmpty(), qPrintable(run.output()));
    const uint16_t port = port_of(url);

    WsClient ws(port);
    QVERIFY(!ws.connect());
    ws.start_reading();
    json t;
    // Held after the first forward on all 4 ranks.
    t = teaching_until(ws, t, [](const json& s) { return s["paused"] == true; });
    QVERIFY2(t.is_object(), qPrintable(run.output()));
    QCOMPARE(t["phases"].get<int>(), 1);
    QCOMPARE(t["held"].get<int>(), 4);
    QCOMPARE(t["last_phase"].get<std::string>(), std::string("forward"));
    QCOMPARE(t["free"].get<bool>(), false);
    // /api/run says the same to a script.
    const HttpReply api = http_get(port, "/api/run");
    QCOMPARE(api.status, 200u);
    const json doc = json::parse(api.body, nullptr, false);
    QCOMPARE(doc["teaching"]["paused"].get<bool>(), true);

    // Next phase: the backward, and held again.
    QVERIFY(!ws.send(R"({"cmd":"teach","do":"next_phase"})"));
    t = teaching_until(ws, t,
                       [](const json& s) { return s["paused"] == true && s["phases"] == 2; });
    QVERIFY(t.is_object());
    QCOMPARE(t["last_phase"].get<std::string>(), std::string("backward"));
    // Next step: the rest of step 1 (its update).
    QVERIFY(!ws.send(R"({"cmd":"teach","do":"next_step"})"));
    t = teaching_until(ws, t,
                       [](const json& s) { return s["paused"] == true && s["phases"] == 3; });
    QVERIFY(t.is_object());
    QCOMPARE(t["last_phase"].get<std::string>(), std::string("optimizer"));
    QCOMPARE(t["step"].get<int>(), 1);
    // Garbage and unknown commands change nothing.
    QVERIFY(!ws.send(R"({"cmd":"teach","do":"skip_ahead"})"));
    QVERIFY(!ws.send("not json"));
    std::this_thread::sleep_for(500ms);
    QCOMPARE(json::parse(http_get(port, "/api/run").body)["teaching"]["phases"].get<int>(), 3);
    // Run: the job finishes by itself.
    QVERIFY(!ws.send(R"({"cmd":"teach","do":"run"})"));
    QVERIFY2(run.wait(60000), qPrintable(run.output()));
    QCOMPARE(run.exit_code(), 0);
    QVERIFY2(run.output().contains("completed 3 steps"), qPrintable(run.output()));
  }

  // The page's bar in headless Chromium (tests/web/teaching_check.py): shown, paused after the
  // first forward, and its buttons step the run; the run then finishes by itself.
  void pageBarInTheBrowser() {
    QTemporaryDir dir;
    ServingChild run(kTeachingRun, dir.path());
    const QString url = run.url();
    QVERIFY2(!url.isEmpty(), qPrintable(run.output()));
    ProcessOptions o;
    o.timeout_ms = 120000;
    const ProcessOutcome check = run_process(
        "/usr/bin/python3", {SHARDLAB_SOURCE_DIR "/tests/web/teaching_check.py", url}, o);
    if (check.exit_code == 2)
      QSKIP(qPrintable("headless Chromium cannot run here: " + check.err.right(300)));
    QVERIFY2(check.exit_code == 0, qPrintable(check.out + check.err));
    QVERIFY2(run.wait(60000), qPrintable(run.output()));
    QCOMPARE(run.exit_code(), 0);
  }

  // Without teaching mode the frames' "teaching" is null and nothing waits for the viewer.
  void noTeachingSectionWithoutTeachingMode() {
    QTemporaryDir dir;
    ServingChild run({"run", kToy, "--set", "train.steps=200000", "--http", "127.0.0.1:0"},
                     dir.path());
    const QString url = run.url();
    QVERIFY2(!url.isEmpty(), qPrintable(run.output()));
    const json doc = json::parse(http_get(port_of(url), "/api/run").body, nullptr, false);
    QVERIFY2(doc.is_object() && doc.contains("teaching") && doc["teaching"].is_null(),
             doc.dump().substr(0, 300).c_str());
  }
};

QTEST_GUILESS_MAIN(TestWebTeaching)
#include "tst_web_teaching.moc"
