// The app's job editor, offscreen: example jobs validate, the engine's messages appear for bad
// fields and bad JSON, and files round-trip through open and save.
#include <QtTest>

#include <QLabel>
#include <QTemporaryDir>

#include "gui/main_window.h"

using namespace shardlab::gui;

class TestJobEditor : public QObject {
  Q_OBJECT
 private slots:
  void exampleJobIsValid() {
    MainWindow w;
    QVERIFY(w.openFile(QString(SHARDLAB_SOURCE_DIR) + "/resources/jobs/fashion_mlp.json"));
    QVERIFY2(w.editor()->isValid(), qPrintable(w.editor()->problem()));
    QVERIFY(w.editor()->summary().contains("mlp"));
    auto* status = w.findChild<QLabel*>("jobStatus");
    QVERIFY(status && status->text().startsWith("Valid job"));
  }

  // Opening a job draws its topology and the planner's per-rank memory beside the editor.
  void openedJobDrivesTheGridAndTheMemoryPlan() {
    MainWindow w;
    QVERIFY(w.openFile(QString(SHARDLAB_SOURCE_DIR) + "/resources/jobs/gpt-3d.json"));
    QVERIFY2(w.editor()->isValid(), qPrintable(w.editor()->problem()));
    QCOMPARE(w.rankGrid()->world(), 8);
    QCOMPARE(w.rankGrid()->topology().pp(), 2);
    QCOMPARE(w.rankGrid()->topology().tp(), 2);
    QCOMPARE(w.memoryView()->model().ranks(), 8);
    QVERIFY(w.openFile(QString(SHARDLAB_SOURCE_DIR) + "/resources/jobs/fashion_mlp.json"));
    QCOMPARE(w.rankGrid()->world(), 4);  // ZeRO-2 on 4 ranks: one dp dimension
    QCOMPARE(w.rankGrid()->topology().dp(), 4);
    QCOMPARE(w.memoryView()->model().ranks(), 4);
  }

  void badFieldShowsTheEngineMessage() {
    JobEditor e;
    e.setText(R"({"name": "x", "optimizer": {"name": "adam", "lr": -1}})");
    QVERIFY(!e.isValid());
    QVERIFY2(e.problem().contains("optimizer.lr"), qPrintable(e.problem()));
    e.setText(R"({"name": "x", "optimizer": {"name": "adamm"}})");
    QVERIFY2(e.problem().contains("optimizer.name"), qPrintable(e.problem()));
  }

  void malformedJsonIsReportedNotFatal() {
    JobEditor e;
    QSignalSpy spy(&e, &JobEditor::validityChanged);
    e.setText("{\"name\": ");
    QVERIFY(!e.isValid());
    QVERIFY2(e.problem().startsWith("editor:1:") && e.problem().contains("invalid JSON"),
             qPrintable(e.problem()));
    QCOMPARE(spy.count(), 1);
  }

  void typingValidatesAfterAPause() {
    JobEditor e;
    e.setText(R"({"name": "x", "train": {"steps": 10}})");
    QVERIFY(e.isValid());
    auto* edit = e.findChild<QPlainTextEdit*>("jobText");
    edit->setPlainText(R"({"name": "x", "train": {"steps": 10, "batch_size": 0}})");
    QVERIFY(e.isValid());  // not yet: validation waits for the pause
    QTRY_VERIFY_WITH_TIMEOUT(!e.isValid(), 3000);
    QVERIFY(e.problem().contains("train.batch_size"));
  }

  void saveAndReopenRoundTrips() {
    QTemporaryDir dir;
    const QString path = dir.filePath("job.json");
    MainWindow w;
    w.editor()->setText(R"({"name": "round-trip", "train": {"steps": 5}})");
    QVERIFY(w.saveFile(path));
    MainWindow w2;
    QVERIFY(w2.openFile(path));
    QCOMPARE(w2.editor()->text(), w.editor()->text());
    QVERIFY(!w2.openFile(dir.filePath("missing.json")));
    QCOMPARE(w2.currentFile(), path);  // a failed open keeps the current file
    QVERIFY(!w.saveFile(dir.filePath("no/such/dir/job.json")));
  }
};

QTEST_MAIN(TestJobEditor)
#include "tst_job_editor.moc"
