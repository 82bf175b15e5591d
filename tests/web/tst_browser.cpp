// The dashboard in a real browser: headless Chromium (Debian chromium + chromium-driver, driven by
// python3-selenium through tests/web/browser_check.py) opens the page that `shardlab run --http`
// serves during a live 2x2x2 gpt-3d run, and the page that `shardlab replay --http` serves for its
// recording, and checks what a person would see: 8 rank cells, each showing its step, loss points
// growing while the run (or the replay) goes, memory bars for 8 ranks with the legend's
// optimizer_state in full and a "model states only" switch that changes the chart's scale, 8
// heat-map rows, the communication table, the timeline; live, rank 5 (slowed for real) marked as
// the straggler and named in the diagnosis box; in the replay, pause and seek. The live page's
// screenshot is kept at <build>/screenshots/web-dashboard.png (the README's picture). The planner's
// page (/plan, served by `shardlab monitor --http`): GPT-3 175B on 1024 A100s planned from the
// form, the table and charts against /api/plan, an error on the page's error line; its screenshot
// is <build>/screenshots/web-plan.png.
// "Who holds what": the panel of a live run of the toy job under zero2 and fsdp against /api/run's
// layout and the strategies' definitions, down to the canvas's pixels (screenshots
// <build>/screenshots/web-holdings-zero2.png and -fsdp.png); and the replay of a recording
// without LAYOUT events (as one made before protocol version 4) says the layout is unknown
// (web-holdings-unknown.png). Its step scrubber: the first reduce_scatter of the gradients and the
// update, lit where the layout's units and holdings put them (web-step-zero2.png, -fsdp.png);
// Left and Right on its bar; as pp 2 x dp 2, the ranks not in a stage's forward dimmed.
// Both pages must show the run's meanings in the desktop app's colours: the app's colour of a
// backward span, a params bar, the straggler flag, ... is handed to browser_check.py (--colour),
// which reads the page's legend swatches and the pixels its canvases paint.
#include <QtTest>

#include <QDir>
#include <QTemporaryDir>

#include "engine/telemetry/palette.h"
#include "net/recording.h"
#include "tests/web/web_test_util.h"

#ifdef SHARDLAB_TEST_WITH_APP
#include "gui/memory_view.h"
#include "gui/plan_view.h"
#include "gui/rank_grid.h"
#include "gui/timeline_view.h"
#endif

using namespace shardlab::test;

namespace {

const QString kJob = QStringLiteral(SHARDLAB_SOURCE_DIR "/resources/jobs/gpt-3d.json");
const QString kCheck = QStringLiteral(SHARDLAB_SOURCE_DIR "/tests/web/browser_check.py");
const QString kToy = QStringLiteral(SHARDLAB_SOURCE_DIR "/resources/jobs/toy.json");

// browser_check.py on `url`; QSKIPs when the browser cannot start (exit 2).
ProcessOutcome check_in_browser(const QStringList& extra) {
  ProcessOptions o;
  o.timeout_ms = 180000;
  return run_process(QStringLiteral("/usr/bin/python3"), QStringList{kCheck} + extra, o);
}

[[maybe_unused]] QString hex(std::string_view h) {
  return QString::fromLatin1(h.data(), qsizetype(h.size()));
}

// "--colour MEANING=#rrggbb" for each meaning both pages and the app show, in the app's colour
// (built without the app: in the colour of the table the app reads, engine/telemetry/palette.h).
QStringList app_colours(bool plan_page) {
  namespace tl = shardlab::telemetry;
  using shardlab::MemCategory;
  QStringList out;
  auto add = [&](const char* meaning, const QString& hex) {
    out << QStringLiteral("--colour") << QString::fromLatin1(meaning) + '=' + hex;
  };
#ifdef SHARDLAB_TEST_WITH_APP
  using namespace shardlab::gui;
  using shardlab::net::SpanKind;
  const auto memory = [](MemCategory c) { return MemoryView::categoryColor(c).name(); };
  const QString forward = TimelineView::kindColor(SpanKind::forward).name();
#else
  const auto memory = [](MemCategory c) { return hex(tl::palette_colour(c)); };
  const QString forward = hex(tl::palette_colour(tl::Phase::forward));
#endif
  add("memory.params", memory(MemCategory::params));
  add("memory.grads", memory(MemCategory::grads));
  add("memory.optimizer_state", memory(MemCategory::optimizer_state));
  add("memory.activations", memory(MemCategory::activations));
  add("memory.comm", memory(MemCategory::comm));
  add("span.forward", forward);
  if (plan_page) {
#ifdef SHARDLAB_TEST_WITH_APP
    add("limit.usable", PlanView::usableLineColor().name());
    add("limit.hbm", PlanView::hbmLineColor().name());
#else
    add("limit.usable", hex(tl::palette_colour(tl::Meaning::usable_limit)));
    add("limit.hbm", hex(tl::palette_colour(tl::Meaning::hbm_limit)));
#endif
    return out;
  }
#ifdef SHARDLAB_TEST_WITH_APP
  add("span.backward", TimelineView::kindColor(SpanKind::backward).name());
  add("span.optimizer", TimelineView::kindColor(SpanKind::optimizer).name());
  add("span.collective", TimelineView::kindColor(SpanKind::collective).name());
  add("span.idle", TimelineView::idleColor().name());
  add("rank.straggler", RankGrid::flagColor(RankGrid::Flag::Straggler).name());
  add("rank.failed", RankGrid::flagColor(RankGrid::Flag::Failed).name());
  add("rank.silent", RankGrid::flagColor(RankGrid::Flag::Silent).name());
  add("group.tp", RankGrid::highlightColor(shardlab::ParallelDim::Tp).name());
  add("group.dp", RankGrid::highlightColor(shardlab::ParallelDim::Dp).name());
  add("group.pp", RankGrid::highlightColor(shardlab::ParallelDim::Pp).name());
#else
  add("span.backward", hex(tl::palette_colour(tl::Phase::backward)));
  add("span.optimizer", hex(tl::palette_colour(tl::Phase::optimizer)));
  add("span.collective", hex(tl::palette_colour(tl::Meaning::collective)));
  add("span.idle", hex(tl::palette_colour(tl::Meaning::idle)));
  add("rank.straggler", hex(tl::palette_colour(tl::Meaning::straggler)));
  add("rank.failed", hex(tl::palette_colour(tl::Meaning::failed)));
  add("rank.silent", hex(tl::palette_colour(tl::Meaning::silent)));
  add("group.tp", hex(tl::palette_colour(tl::Meaning::tp_group)));
  add("group.dp", hex(tl::palette_colour(tl::Meaning::dp_group)));
  add("group.pp", hex(tl::palette_colour(tl::Meaning::pp_group)));
#endif
  return out;
}

// The app's colours of the three categories the holdings panel draws.
QStringList memory_colours() {
  QStringList out;
  const QStringList all = app_colours(false);
  for (qsizetype i = 0; i + 1 < all.size(); i += 2)
    if (all[i + 1].startsWith(QLatin1String("memory.")) &&
        !all[i + 1].startsWith(QLatin1String("memory.activations")) &&
        !all[i + 1].startsWith(QLatin1String("memory.comm")))
      out << all[i] << all[i + 1];
  return out;
}

}  // namespace

class TestBrowser : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    const QString gone = missing(
        {QStringLiteral("chromium"), QStringLiteral("chromedriver"), QStringLiteral("selenium")});
    if (!gone.isEmpty()) QSKIP(qPrintable(gone));
  }

  void liveRunInTheBrowser() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    // Long enough to outlast the checks on a busy 2-core machine; ended by the test. Rank 5's
    // forward takes 3 ms longer, for real (SHARDLAB_SLOW_RANKS): the page must name it.
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("SHARDLAB_SLOW_RANKS"), QStringLiteral("5:3000"));
    ServingChild run(
        {QStringLiteral("run"), kJob, QStringLiteral("--http"), QStringLiteral("127.0.0.1:0"),
         QStringLiteral("--no-record"), QStringLiteral("--quiet"), QStringLiteral("--set"),
         QStringLiteral("train.steps=5000"), QStringLiteral("--set"),
         QStringLiteral("train.eval_every=0")},
        dir.path(), env);
    const QString url = run.url();
    QVERIFY2(!url.isEmpty(), qPrintable("no URL printed:\n" + run.output()));
    QDir().mkpath(QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots"));
    const ProcessOutcome b = check_in_browser(
        QStringList{url, QStringLiteral("--ranks"), QStringLiteral("8"),
                    QStringLiteral("--straggler"), QStringLiteral("5"),
                    QStringLiteral("--screenshot"),
                    QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots/web-dashboard.png")} +
        app_colours(false));
    if (b.exit_code == 2) QSKIP(qPrintable("Chromium could not start here: " + b.err));
    QVERIFY2(b.exit_code == 0, qPrintable(b.out + b.err));
    qInfo("%s", qPrintable(b.out.trimmed()));
    QVERIFY2(run.running(), qPrintable("the run ended during the checks:\n" + run.output()));
  }

  void replayInTheBrowser() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString rec = dir.filePath(QStringLiteral("run.slrec"));
    ProcessOptions o;
    o.cwd = dir.path();
    o.timeout_ms = 240000;
    const ProcessOutcome made = run_process(
        shardlab_binary(),
        {QStringLiteral("run"), kJob, QStringLiteral("--record"), rec, QStringLiteral("--quiet"),
         QStringLiteral("--set"), QStringLiteral("train.steps=200")},
        o);
    QVERIFY2(made.exit_code == 0, qPrintable(made.out + made.err));
    ServingChild replay(
        {QStringLiteral("replay"), rec, QStringLiteral("--http"), QStringLiteral("127.0.0.1:0"),
         QStringLiteral("--duration"), QStringLiteral("300")},
        dir.path());
    const QString url = replay.url();
    QVERIFY2(!url.isEmpty(), qPrintable("no URL printed:\n" + replay.output()));
    const ProcessOutcome b =
        check_in_browser({url, QStringLiteral("--ranks"), QStringLiteral("8"),
                          QStringLiteral("--replay"), QStringLiteral("--screenshot"),
                          QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots/web-replay.png")});
    if (b.exit_code == 2) QSKIP(qPrintable("Chromium could not start here: " + b.err));
    QVERIFY2(b.exit_code == 0, qPrintable(b.out + b.err));
  }

  void holdingsInTheBrowser_data() {
    QTest::addColumn<QString>("strategy");
    QTest::newRow("zero2") << QStringLiteral("zero2");
    QTest::newRow("fsdp") << QStringLiteral("fsdp");
  }

  void holdingsInTheBrowser() {
    QFETCH(QString, strategy);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    // Far more steps than the checks take; ended by the test.
    ServingChild run(
        {QStringLiteral("run"), kToy, QStringLiteral("--set"),
         QStringLiteral("parallel.strategy=") + strategy, QStringLiteral("--set"),
         QStringLiteral("train.steps=1000000"), QStringLiteral("--http"),
         QStringLiteral("127.0.0.1:0"), QStringLiteral("--no-record"), QStringLiteral("--quiet")},
        dir.path());
    const QString url = run.url();
    QVERIFY2(!url.isEmpty(), qPrintable("no URL printed:\n" + run.output()));
    QDir().mkpath(QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots"));
    const QString shot =
        QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots/web-holdings-") + strategy + ".png";
    // Then the step scrubber over the strips (browser_check.py --step): the first reduce_scatter
    // of the gradients picked with ▶, each rank's own chunk of the unit lit as received where the
    // layout's units put it, the whole unit as sent; the update writes the optimizer state held.
    const QString step_shot =
        QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots/web-step-") + strategy + ".png";
    const ProcessOutcome b = check_in_browser(
        QStringList{url, QStringLiteral("--holdings"), strategy, QStringLiteral("--ranks"),
                    QStringLiteral("4"), QStringLiteral("--screenshot"), shot,
                    QStringLiteral("--step"), QStringLiteral("--step-screenshot"), step_shot} +
        memory_colours());
    if (b.exit_code == 2) QSKIP(qPrintable("Chromium could not start here: " + b.err));
    QVERIFY2(b.exit_code == 0, qPrintable(b.out + b.err));
    qInfo("%s", qPrintable(b.out.trimmed()));
    QVERIFY2(run.running(), qPrintable("the run ended during the checks:\n" + run.output()));
  }

  // The toy job as pp 2 x dp 2: the step's first frame is a stage's forward on 2 of the 4 ranks.
  // Held there, the scrubber dims the other stage's strips and not its own, by their pixels
  // (browser_check.py --step-dims).
  void stepDimsRanksNotInTheFrame() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    ServingChild run(
        {QStringLiteral("run"), kToy, QStringLiteral("--set"),
         QStringLiteral("parallel.strategy=zero1"), QStringLiteral("--set"),
         QStringLiteral("parallel.pp=2"), QStringLiteral("--set"), QStringLiteral("parallel.dp=2"),
         QStringLiteral("--set"), QStringLiteral("train.steps=1000000"), QStringLiteral("--http"),
         QStringLiteral("127.0.0.1:0"), QStringLiteral("--no-record"), QStringLiteral("--quiet")},
        dir.path());
    const QString url = run.url();
    QVERIFY2(!url.isEmpty(), qPrintable("no URL printed:\n" + run.output()));
    const ProcessOutcome b =
        check_in_browser(QStringList{url, QStringLiteral("--step-dims"), QStringLiteral("--ranks"),
                                     QStringLiteral("4")} +
                         memory_colours());
    if (b.exit_code == 2) QSKIP(qPrintable("Chromium could not start here: " + b.err));
    QVERIFY2(b.exit_code == 0, qPrintable(b.out + b.err));
    qInfo("%s", qPrintable(b.out.trimmed()));
    QVERIFY2(run.running(), qPrintable("the run ended during the checks:\n" + run.output()));
  }

  // A recording of the toy job with its LAYOUT events taken out, as a recording made before
  // protocol version 4 is: its replay's page says the layout is unknown.
  void holdingsUnknownInAReplay() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString rec = dir.filePath(QStringLiteral("toy.slrec"));
    ProcessOptions o;
    o.cwd = dir.path();
    o.timeout_ms = 120000;
    const ProcessOutcome made = run_process(
        shardlab_binary(),
        {QStringLiteral("run"), kToy, QStringLiteral("--record"), rec, QStringLiteral("--quiet"),
         QStringLiteral("--set"), QStringLiteral("train.steps=20")},
        o);
    QVERIFY2(made.exit_code == 0, qPrintable(made.out + made.err));
    const QString old = dir.filePath(QStringLiteral("no-layout.slrec"));
    int layouts = 0;
    {
      const shardlab::net::RecordingContents in = shardlab::net::read_recording(rec.toStdString());
      QVERIFY(in.complete);
      shardlab::net::RecordingWriter out(old.toStdString());
      for (const shardlab::net::Message& m : in.messages) {
        const auto* e = std::get_if<shardlab::telemetry::Event>(&m);
        if (e && std::holds_alternative<shardlab::telemetry::LayoutEvent>(e->payload)) {
          ++layouts;
          continue;
        }
        out.append(m);
      }
    }
    QCOMPARE(layouts, 4);  // one per rank, all taken out
    ServingChild replay(
        {QStringLiteral("replay"), old, QStringLiteral("--http"), QStringLiteral("127.0.0.1:0"),
         QStringLiteral("--duration"), QStringLiteral("300")},
        dir.path());
    const QString url = replay.url();
    QVERIFY2(!url.isEmpty(), qPrintable("no URL printed:\n" + replay.output()));
    QDir().mkpath(QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots"));
    const ProcessOutcome b = check_in_browser(
        {url, QStringLiteral("--holdings-unknown"), QStringLiteral("--screenshot"),
         QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots/web-holdings-unknown.png")});
    if (b.exit_code == 2) QSKIP(qPrintable("Chromium could not start here: " + b.err));
    QVERIFY2(b.exit_code == 0, qPrintable(b.out + b.err));
  }

  void planPageInTheBrowser() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    ServingChild monitor(
        {QStringLiteral("monitor"), QStringLiteral("--listen"), QStringLiteral("127.0.0.1:0"),
         QStringLiteral("--http"), QStringLiteral("127.0.0.1:0"), QStringLiteral("--token-file"),
         dir.filePath(QStringLiteral("token")), QStringLiteral("--duration"), QStringLiteral("300"),
         QStringLiteral("--interval"), QStringLiteral("60")},
        dir.path());
    const QString url = monitor.url();
    QVERIFY2(!url.isEmpty(), qPrintable("no URL printed:\n" + monitor.output()));
    QDir().mkpath(QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots"));
    const QString shot = QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots/web-plan.png");
    const ProcessOutcome b = check_in_browser(
        QStringList{url, QStringLiteral("--plan"), QStringLiteral("--screenshot"), shot} +
        app_colours(true));
    if (b.exit_code == 2) QSKIP(qPrintable("Chromium could not start here: " + b.err));
    QVERIFY2(b.exit_code == 0, qPrintable(b.out + b.err));
    qInfo("%s", qPrintable(b.out.trimmed()));
    qInfo("the plan page's screenshot: %s", qPrintable(shot));
  }
};

QTEST_GUILESS_MAIN(TestBrowser)
#include "tst_browser.moc"
