// The app's job editor, offscreen: example jobs validate, the engine's messages appear for bad
// fields and bad JSON, and files round-trip through open and save. The form tab: every example job
// round-trips through it, the engine's messages appear beside the fields they name, the parallel
// layouts set pp x tp x dp, and the JSON text and the form stay in step.
#include <QtTest>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSpinBox>
#include <QStatusBar>
#include <QTemporaryDir>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/job/job_fields.h"
#include "engine/job/job_spec.h"
#include "gui/job_form.h"
#include "gui/main_window.h"

using namespace shardlab::gui;
using shardlab::check_job_json;
using shardlab::FieldError;
using shardlab::job_from_json;
using shardlab::JobSpec;
using shardlab::parse_job_json;

namespace {

QString jobPath(const QString& name) {
  return QString(SHARDLAB_SOURCE_DIR) + "/resources/jobs/" + name;
}

QString readJob(const QString& name) {
  QFile f(jobPath(name));
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll());
}

template <class W>
W* widget(JobForm* form, const char* path) {
  return qobject_cast<W*>(form->fieldWidget(path));
}

// The engine's own message for `path` in `doc` (what the form must show beside that field).
QString engineMessage(const nlohmann::json& doc, const std::string& path) {
  for (const FieldError& e : check_job_json(doc))
    if (e.field == path) return QString::fromStdString(e.message);
  return {};
}

bool errorShown(JobForm* form, const QString& path) {
  auto* label = form->findChild<QLabel*>("error:" + path);
  return label && label->isVisibleTo(form);
}

// The job a document reads as, with its problems (when the build cannot run it, e.g. no MPI).
std::pair<JobSpec, std::vector<std::string>> readAs(const nlohmann::json& doc) {
  JobSpec job;
  std::vector<std::string> problems;
  for (const FieldError& e : check_job_json(doc, &job)) problems.push_back(e.to_string());
  return {job, problems};
}

}  // namespace

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

  // A file that is not a job is refused before it is read: a FIFO (whose open would wait for a
  // writer, and whose reads need not end), /dev/zero, and a file over the engine's job-file limit
  // (a sparse one: nothing is written to disk). Each shows one message and keeps the editor as it
  // was, at once.
  void openRefusesSpecialAndHugeFiles() {
    QTemporaryDir dir;
    MainWindow w;
    const QString before = R"({"name": "kept", "train": {"steps": 5}})";
    w.editor()->setText(before);

    const QString fifo = dir.filePath("job.fifo");
    QVERIFY(::mkfifo(QFile::encodeName(fifo).constData(), 0600) == 0);
    // Should the app open the FIFO anyway (it would block there), a writer comes after 10 s and
    // ends it, so that the test fails instead of hanging.
    std::atomic<bool> done{false};
    std::thread unblock([&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!done && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (done) return;
      const int fd = ::open(QFile::encodeName(fifo).constData(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    });
    QElapsedTimer timer;
    timer.start();
    const bool opened = w.openFile(fifo);
    const qint64 took = timer.elapsed();
    done = true;
    unblock.join();
    QVERIFY2(!opened, "a FIFO was opened as a job");
    QVERIFY2(took < 5000, qPrintable(QString("opening a FIFO took %1 ms").arg(took)));
    QVERIFY2(w.lastProblem().contains("not a regular file"), qPrintable(w.lastProblem()));
    QCOMPARE(w.statusBar()->currentMessage(), w.lastProblem());

    const QString huge = dir.filePath("huge.json");
    {
      QFile f(huge);
      QVERIFY(f.open(QIODevice::WriteOnly));
      QVERIFY(f.resize(static_cast<qint64>(shardlab::kMaxJobFileBytes) + 1));  // sparse
    }
    timer.restart();
    QVERIFY2(!w.openFile(huge), "a file over the job-file limit was opened");
    QVERIFY2(timer.elapsed() < 5000, qPrintable(QString("took %1 ms").arg(timer.elapsed())));
    QVERIFY2(w.lastProblem().contains("larger than 16 MiB"), qPrintable(w.lastProblem()));
    QCOMPARE(w.statusBar()->currentMessage(), w.lastProblem());

    // A device that never ends (read whole, it would take all memory).
    QVERIFY(!w.openFile("/dev/zero"));
    QVERIFY2(w.lastProblem().contains("not a regular file"), qPrintable(w.lastProblem()));

    QCOMPARE(w.editor()->text(), before);  // a refused file leaves the editor alone
    QVERIFY(w.currentFile().isEmpty());
  }

  // ---------------------------------------------------------------------------------------------
  // The form.

  // Every example job reads into the form and back to the same job, also after the model kind
  // and the optimizer are switched away and back (the fields they hide come back).
  void formRoundTripsEveryExampleJob() {
    const QStringList files = QDir(QString(SHARDLAB_SOURCE_DIR) + "/resources/jobs")
                                  .entryList({"*.json"}, QDir::Files, QDir::Name);
    QVERIFY(files.size() >= 5);
    for (const QString& name : files) {
      const QString text = readJob(name);
      const nlohmann::json file = parse_job_json(text.toStdString(), name.toStdString());
      JobEditor e;
      e.setText(text);
      JobForm* form = e.form();
      const auto expected = readAs(file);
      const auto check = [&](const char* when) {
        const nlohmann::json doc = form->document();
        if (expected.second.empty()) {
          QVERIFY2(job_from_json(doc) == job_from_json(file), qPrintable(name + " " + when));
        } else {
          const auto got = readAs(doc);
          QVERIFY2(got.first == expected.first && got.second == expected.second,
                   qPrintable(name + " " + when));
        }
      };
      check("as loaded");
      QVERIFY(form->fieldError("").isEmpty() || !expected.second.empty());

      auto* kind = widget<QComboBox>(form, "model.kind");
      auto* optimizer = widget<QComboBox>(form, "optimizer.name");
      const QString kind0 = kind->currentText(), optimizer0 = optimizer->currentText();
      kind->setCurrentText(kind0 == "mlp" ? "gpt" : "mlp");
      optimizer->setCurrentText(optimizer0 == "sgd" ? "adagrad" : "sgd");
      kind->setCurrentText(kind0);
      optimizer->setCurrentText(optimizer0);
      check("after switching kinds");
      // The JSON tab holds the form's document.
      QCOMPARE(parse_job_json(e.text().toStdString()), form->document());
      QCOMPARE(e.isValid(), expected.second.empty());
    }
  }

  void layoutIsReadFromTheJob() {
    const std::pair<const char*, ParallelLayout> cases[] = {
        {"fashion_mlp.json", ParallelLayout::zero2},
        {"fashion_mlp_fsdp_mpi.json", ParallelLayout::fsdp},
        {"chars_gpt.json", ParallelLayout::single},
        {"gpt-3d.json", ParallelLayout::hybrid}};
    for (const auto& [name, layout] : cases) {
      JobEditor e;
      e.setText(readJob(name));
      QVERIFY2(e.form()->parallelLayout() == layout, name);
    }
    JobEditor e;
    e.setText(R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars"}, "train": {"steps": 5},
                  "parallel": {"strategy": "ddp", "world_size": 4, "tp": 4}})");
    QVERIFY(e.form()->parallelLayout() == ParallelLayout::tensor);
    e.setText(R"({"parallel": {"strategy": "ddp", "world_size": 4, "pp": 2}})");
    QVERIFY(e.form()->parallelLayout() == ParallelLayout::hybrid);  // dp = 4 / 2
  }

  // Setting tp to 3 on gpt-3d (4 heads): the engine's message beside tp; back to 2: gone.
  void spinBoxErrorAppearsBesideItsField() {
    JobEditor e;
    e.setText(readJob("gpt-3d.json"));
    QVERIFY2(e.isValid(), qPrintable(e.problem()));
    JobForm* form = e.form();
    QSignalSpy changed(form, &JobForm::documentChanged);
    auto* tp = widget<QSpinBox>(form, "parallel.tp");
    QVERIFY(tp && tp->isEnabled());
    QVERIFY(!errorShown(form, "parallel.tp"));
    tp->setValue(3);
    QCOMPARE(changed.count(), 1);
    const nlohmann::json doc = form->document();
    QCOMPARE(doc["parallel"]["tp"], 3);
    QCOMPARE(doc["parallel"]["world_size"], 12);  // pp x tp x dp
    const QString engine = engineMessage(doc, "parallel.tp");
    QVERIFY(!engine.isEmpty());
    QVERIFY2(form->fieldError("parallel.tp").contains(engine),
             qPrintable(form->fieldError("parallel.tp")));
    QVERIFY(errorShown(form, "parallel.tp"));
    QVERIFY(!e.isValid());  // the JSON text follows the form
    QVERIFY(e.text().contains("\"tp\": 3"));
    QVERIFY(e.problem().contains("parallel.tp"));

    tp->setValue(2);
    QVERIFY(form->fieldError("parallel.tp").isEmpty());
    QVERIFY(!errorShown(form, "parallel.tp"));
    QVERIFY2(e.isValid(), qPrintable(e.problem()));
    QCOMPARE(e.job().parallel.world_size, 8);
  }

  void negativeLearningRateShowsBesideLr() {
    JobEditor e;
    e.setText(readJob("fashion_mlp.json"));
    JobForm* form = e.form();
    auto* lr = widget<QLineEdit>(form, "optimizer.lr");
    QCOMPARE(lr->text(), "0.001");
    lr->setText("-1");
    const QString engine = engineMessage(form->document(), "optimizer.lr");
    QVERIFY(!engine.isEmpty());
    QVERIFY2(form->fieldError("optimizer.lr").contains(engine),
             qPrintable(form->fieldError("optimizer.lr")));
    QVERIFY(errorShown(form, "optimizer.lr"));
    QVERIFY(e.problem().startsWith("optimizer.lr"));
    lr->setText("abc");  // not a number: the engine says so, beside the field
    QVERIFY(
        form->fieldError("optimizer.lr").contains(engineMessage(form->document(), "optimizer.lr")));
    lr->setText("0.01");
    QVERIFY(!errorShown(form, "optimizer.lr"));
    QVERIFY(e.isValid());
    QCOMPARE(e.job().optimizer.lr, 0.01);
  }

  // The checkpoint fields: how often and how many only once there is a directory; the engine's
  // refusal of checkpoints for strategy none shows beside the directory.
  void checkpointFieldsFollowTheDirectory() {
    JobEditor e;
    e.setText(readJob("fashion_mlp.json"));
    JobForm* form = e.form();
    QVERIFY(!form->fieldWidget("train.checkpoint_every")->isVisibleTo(form));
    widget<QLineEdit>(form, "train.checkpoint_dir")->setText("runs/ckpt");
    QVERIFY(form->fieldWidget("train.checkpoint_every")->isVisibleTo(form));
    widget<QSpinBox>(form, "train.checkpoint_every")->setValue(50);
    widget<QSpinBox>(form, "train.keep_checkpoints")->setValue(2);
    QVERIFY2(e.isValid(), qPrintable(e.problem()));
    QCOMPARE(e.job().train.checkpoint_dir, std::string("runs/ckpt"));
    QCOMPARE(e.job().train.checkpoint_every, int64_t{50});
    QCOMPARE(e.job().train.keep_checkpoints, int64_t{2});
    widget<QLineEdit>(form, "train.init_model")->setText("model.slm");
    QCOMPARE(e.job().train.init_model, std::string("model.slm"));
    widget<QLineEdit>(form, "train.checkpoint_dir")->setText("");
    QVERIFY(!form->fieldWidget("train.checkpoint_every")->isVisibleTo(form));
    QVERIFY(!form->document()["train"].contains("checkpoint_every"));
    QVERIFY2(e.isValid(), qPrintable(e.problem()));
    e.setText(readJob("fashion_mlp.json"));
    widget<QLineEdit>(form, "train.checkpoint_dir")->setText("runs/ckpt");
    widget<QComboBox>(form, "parallel")->setCurrentIndex(0);  // single process
    QVERIFY(!e.isValid());
    QVERIFY2(form->fieldError("train.checkpoint_dir").contains("strategy"),
             qPrintable(form->fieldError("train.checkpoint_dir")));
  }

  // Hybrid 3D with pp = tp = dp = 2: world 8, a valid job.
  void hybridLayoutMultipliesTheWorld() {
    JobEditor e;
    e.setText(readJob("chars_gpt.json"));
    JobForm* form = e.form();
    QVERIFY(form->parallelLayout() == ParallelLayout::single);
    QVERIFY(!widget<QSpinBox>(form, "parallel.pp")->isEnabled());
    widget<QComboBox>(form, "parallel")->setCurrentIndex(int(ParallelLayout::hybrid));
    QVERIFY(form->parallelLayout() == ParallelLayout::hybrid);
    for (const char* path : {"parallel.pp", "parallel.tp", "parallel.dp"}) {
      auto* spin = widget<QSpinBox>(form, path);
      QVERIFY2(spin->isEnabled(), path);
      spin->setValue(2);
    }
    QCOMPARE(widget<QSpinBox>(form, "parallel.world_size")->value(), 8);
    QVERIFY(!widget<QSpinBox>(form, "parallel.world_size")->isEnabled());
    QVERIFY(widget<QComboBox>(form, "parallel.strategy")->isEnabled());
    QVERIFY2(e.isValid(), qPrintable(e.problem()));
    const auto& p = e.job().parallel;
    QCOMPARE(p.world_size, 8);
    QCOMPARE(p.pp, 2);
    QCOMPARE(p.tp, 2);
    QCOMPARE(p.dp, 2);
    QVERIFY(p.strategy == "ddp" || p.strategy == "zero1" || p.strategy == "zero2");
    QVERIFY(widget<QSpinBox>(form, "parallel.micro_batches")->isEnabled());
  }

  // The teaching comparison: one choice switches the toy job (ZeRO-2 on 4 ranks) between ddp,
  // zero1, zero2, fsdp and tp 2 x dp 2, every one a valid job of 4 ranks, and back.
  void toyJobSwitchesBetweenTheStrategiesAndTpByDp() {
    JobEditor e;
    e.setText(readJob("toy.json"));
    JobForm* form = e.form();
    QVERIFY(form->parallelLayout() == ParallelLayout::zero2);
    auto* combo = widget<QComboBox>(form, "parallel");
    QCOMPARE(combo->itemText(int(ParallelLayout::tensor_data)), QString("Tensor × data parallel"));
    combo->setCurrentIndex(int(ParallelLayout::tensor_data));
    QVERIFY(form->parallelLayout() == ParallelLayout::tensor_data);
    QVERIFY2(e.isValid(), qPrintable(e.problem()));
    auto p = e.job().parallel;
    QCOMPARE(p.world_size, 4);
    QCOMPARE(p.pp, 1);
    QCOMPARE(p.tp, 2);
    QCOMPARE(p.dp, 2);
    QCOMPARE(p.strategy, "zero2");  // the data-parallel dimension keeps the job's strategy
    QVERIFY(!widget<QSpinBox>(form, "parallel.pp")->isEnabled());
    QVERIFY(widget<QSpinBox>(form, "parallel.dp")->isEnabled());
    // A text with that layout is recognised as it.
    JobEditor again;
    again.setText(QString::fromStdString(form->document().dump()));
    QVERIFY(again.form()->parallelLayout() == ParallelLayout::tensor_data);
    for (ParallelLayout l : {ParallelLayout::ddp, ParallelLayout::zero1, ParallelLayout::zero2,
                             ParallelLayout::fsdp}) {
      combo->setCurrentIndex(int(l));
      QVERIFY2(e.isValid(), qPrintable(e.problem()));
      p = e.job().parallel;
      QCOMPARE(p.world_size, 4);
      QCOMPARE(p.tp, 1);
      QCOMPARE(p.pp, 1);
    }
    QCOMPARE(e.job().parallel.strategy, "fsdp");
  }

  void pipelineLayoutSetsTpToOne() {
    JobEditor e;
    e.setText(readJob("gpt-3d.json"));
    JobForm* form = e.form();
    widget<QComboBox>(form, "parallel")->setCurrentIndex(int(ParallelLayout::pipeline));
    auto* tp = widget<QSpinBox>(form, "parallel.tp");
    QCOMPARE(tp->value(), 1);
    QVERIFY(!tp->isEnabled());
    QCOMPARE(form->document()["parallel"]["tp"], 1);
    QCOMPARE(form->document()["parallel"]["dp"], 1);
    const int pp = widget<QSpinBox>(form, "parallel.pp")->value();
    QVERIFY(pp > 1);
    QCOMPARE(widget<QSpinBox>(form, "parallel.world_size")->value(), pp);
    QVERIFY2(e.isValid(), qPrintable(e.problem()));

    // DDP: pp = tp = 1 and the pipeline fields leave the document (they would be refused).
    widget<QComboBox>(form, "parallel")->setCurrentIndex(int(ParallelLayout::ddp));
    QCOMPARE(e.job().parallel.strategy, "ddp");
    QVERIFY(!form->document()["parallel"].contains("micro_batches"));
    QVERIFY(!widget<QSpinBox>(form, "parallel.micro_batches")->isEnabled());
    QVERIFY(!widget<QComboBox>(form, "parallel.schedule")->isEnabled());
  }

  // Switching the optimizer hides (and takes out) what it does not use, and brings it back.
  void optimizerFieldsFollowTheOptimizer() {
    JobEditor e;
    e.setText(readJob("fashion_mlp_sgd.json"));
    JobForm* form = e.form();
    auto* momentum = form->fieldWidget("optimizer.momentum");
    QVERIFY(momentum->isVisibleTo(form));
    QVERIFY(!form->fieldWidget("optimizer.beta1")->isVisibleTo(form));
    widget<QComboBox>(form, "optimizer.name")->setCurrentText("adam");
    QVERIFY(!momentum->isVisibleTo(form));
    QVERIFY(form->fieldWidget("optimizer.beta1")->isVisibleTo(form));
    QVERIFY(!form->document()["optimizer"].contains("momentum"));
    QVERIFY2(e.isValid(), qPrintable(e.problem()));
    widget<QComboBox>(form, "optimizer.name")->setCurrentText("sgd");
    QCOMPARE(form->document()["optimizer"]["momentum"], 0.9);
    QVERIFY(widget<QCheckBox>(form, "optimizer.nesterov")->isChecked());
    QVERIFY(e.isValid());
  }

  // Keys the form has no field for stay in the document through form edits; their errors land in
  // the section (or at the top).
  void unknownKeysSurviveFormEdits() {
    JobEditor e;
    e.setText(R"({"name": "x", "extra": {"keep": [1, 2]},
                  "optimizer": {"name": "adam", "lrr": 0.1}, "train": {"steps": 10}})");
    QVERIFY(!e.isValid());
    JobForm* form = e.form();
    QVERIFY2(form->fieldError("").contains("extra"), qPrintable(form->fieldError("")));
    QVERIFY2(form->fieldError("optimizer").contains("lrr"),
             qPrintable(form->fieldError("optimizer")));
    widget<QSpinBox>(form, "train.steps")->setValue(20);
    const nlohmann::json doc = parse_job_json(e.text().toStdString());
    QCOMPARE(doc["train"]["steps"], 20);
    QCOMPARE(doc["extra"], nlohmann::json::parse(R"({"keep": [1, 2]})"));
    QCOMPARE(doc["optimizer"]["lrr"], 0.1);
    QVERIFY(e.problem().contains("lrr") || e.problem().contains("extra"));
    // The text keeps its key order: "name" first, "extra" second.
    QVERIFY(e.text().indexOf("\"name\"") < e.text().indexOf("\"extra\""));
    QVERIFY(e.text().indexOf("\"extra\"") < e.text().indexOf("\"optimizer\""));
  }

  void jsonEditsUpdateTheForm() {
    JobEditor e;
    e.setText(readJob("fashion_mlp.json"));
    JobForm* form = e.form();
    QSignalSpy changed(form, &JobForm::documentChanged);
    auto* edit = e.findChild<QPlainTextEdit*>("jobText");
    edit->setPlainText(QString(e.text()).replace("\"lr\": 0.001", "\"lr\": 0.25"));
    QTRY_COMPARE_WITH_TIMEOUT(widget<QLineEdit>(form, "optimizer.lr")->text(), "0.25", 3000);
    QCOMPARE(changed.count(), 0);  // filling from the text is no user edit
  }

  // Text that is not JSON: the form shows the parse error and keeps its fields (locked).
  void invalidJsonLeavesTheFormAlone() {
    JobEditor e;
    e.setText(readJob("gpt-3d.json"));
    JobForm* form = e.form();
    const nlohmann::json before = form->document();
    auto* lr = widget<QLineEdit>(form, "optimizer.lr");
    const QString lr_text = lr->text();
    e.setText("{\"name\": ");
    QVERIFY(!e.isValid());
    QVERIFY2(form->fieldError("").contains("invalid JSON"), qPrintable(form->fieldError("")));
    QCOMPARE(form->fieldError(""), e.problem());
    QCOMPARE(form->document(), before);
    QCOMPARE(lr->text(), lr_text);
    QCOMPARE(widget<QSpinBox>(form, "parallel.tp")->value(), 2);
    QVERIFY(!lr->isEnabled());
    e.setText(readJob("fashion_mlp.json"));
    QVERIFY(form->fieldError("").isEmpty());
    QVERIFY(lr->isEnabled());
    QVERIFY(form->parallelLayout() == ParallelLayout::zero2);
  }

  // A narrow pane gets one column of sections, a wide one two.
  void sectionsFitThePane() {
    JobForm form;
    form.fitWidth(300);
    QCOMPARE(form.columns(), 1);
    form.fitWidth(4000);
    QCOMPARE(form.columns(), 2);
  }

  void formIsBuiltFromTheEngineTable();

  // Values the engine refuses before use are shown as the job's problem, whether the user opens a
  // file holding them or types them: a number beyond double's range, nesting deep enough to
  // exhaust the stack, model sizes that cannot be allocated.
  void hostileValuesAreShownNotFatal_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("problem");
    const QString job = readJob("fashion_mlp.json");
    QTest::newRow("lr 1e400") << QString(job).replace("\"lr\": 0.001", "\"lr\": 1e400")
                              << "optimizer.lr: 1e400 is out of range (not a finite number)";
    QTest::newRow("deep nesting") << QString(job).replace(
                                         "\"relu\"", QString(100000, '[') + QString(100000, ']'))
                                  << "nested deeper than 64 levels";
    QTest::newRow("absurd hidden width")
        << QString(job).replace("[256, 128]", "[4611686018427387904]")
        << "model.mlp.hidden[0]: must be at most 16777216 (2^24)";
    QTest::newRow("absurd pp x tp")
        << QString(job).replace("\"world_size\": 4",
                                "\"world_size\": 4, \"pp\": 4294967296, \"tp\": 4294967296")
        << "parallel.";
  }

  void hostileValuesAreShownNotFatal() {
    QFETCH(QString, text);
    QFETCH(QString, problem);
    QTemporaryDir dir;
    const QString path = dir.filePath("hostile.json");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text.toUtf8());
    f.close();
    // Opening the file, as `shardlab-gui hostile.json` or File > Open does.
    MainWindow w;
    QVERIFY(w.openFile(path));
    QVERIFY(!w.editor()->isValid());
    QVERIFY2(w.editor()->problem().contains(problem), qPrintable(w.editor()->problem()));
    auto* status = w.findChild<QLabel*>("jobStatus");
    QVERIFY(status && status->text().contains(problem));
    // Typing it into the JSON tab.
    JobEditor e;
    e.setText(readJob("fashion_mlp.json"));
    QVERIFY(e.isValid());
    e.findChild<QPlainTextEdit*>("jobText")->setPlainText(text);
    QTRY_VERIFY_WITH_TIMEOUT(!e.isValid(), 3000);
    QVERIFY2(e.problem().contains(problem), qPrintable(e.problem()));
  }

  void randomAndMutatedJsonNeverAborts();

  void remoteWorkersRunMpiRanks() {
    JobEditor e;
    e.setText(readJob("fashion_mlp.json"));
    JobForm* form = e.form();
    QVERIFY(e.launchChoice() == LaunchChoice::threads);
    auto* listen = form->findChild<QLineEdit*>("listenAddress");
    QVERIFY(!listen->isEnabled());
    widget<QComboBox>(form, "parallel.backend")->setCurrentIndex(int(LaunchChoice::remote));
    QCOMPARE(form->document()["parallel"]["backend"], "mpi");
    QVERIFY(e.launchChoice() == LaunchChoice::remote);
    QCOMPARE(e.listenAddress(), "0.0.0.0:0");
    QVERIFY(listen->isEnabled());
    QVERIFY(e.text().contains("\"backend\": \"mpi\""));
    // Re-reading the text keeps "remote" (the document only says mpi).
    e.setText(e.text());
    QVERIFY(e.launchChoice() == LaunchChoice::remote);
    widget<QComboBox>(form, "parallel.backend")->setCurrentIndex(int(LaunchChoice::mpirun));
    QVERIFY(e.launchChoice() == LaunchChoice::mpirun);
    widget<QComboBox>(form, "parallel.backend")->setCurrentIndex(int(LaunchChoice::threads));
    QCOMPARE(form->document()["parallel"]["backend"], "threads");
    QVERIFY(e.launchChoice() == LaunchChoice::threads);
  }
};

// Every field of the engine's job table either has an editor of the kind its type asks for,
// offering the table's choices, or is one the form leaves to the JSON tab; an edit in each editor
// writes a value of the field's type to the document, which reads back through the engine.
void TestJobEditor::formIsBuiltFromTheEngineTable() {
  using shardlab::FieldType;
  const std::set<std::string> json_only = {"model.mlp.input_dim",
                                           "model.mlp.num_classes",
                                           "model.gpt.vocab_size",
                                           "telemetry.address",
                                           "telemetry.token_file"};
  for (const shardlab::JobField& f : shardlab::job_fields()) {
    JobForm form;
    QWidget* w = form.fieldWidget(QString::fromStdString(f.path));
    QVERIFY2(bool(w) != bool(json_only.count(f.path)), f.path.c_str());
    if (!w) continue;
    nlohmann::json value;
    if (auto* cb = qobject_cast<QComboBox*>(w)) {
      QStringList items;
      for (int i = 0; i < cb->count(); ++i) items << cb->itemText(i);
      if (f.path == "parallel.backend") {  // the launch choices: threads, mpirun, remote
        cb->setCurrentIndex(int(LaunchChoice::mpirun));
        value = "mpi";
      } else {
        // The DP strategy combo offers the strategies a pp x tp x dp job can use.
        const auto& expected =
            f.path == "parallel.strategy" ? shardlab::data_parallel_strategies() : f.choices;
        // Past the listed items the combo shows a document value it does not list ("none").
        if (items.size() > static_cast<qsizetype>(expected.size())) {
          QCOMPARE(items.size(), static_cast<qsizetype>(expected.size()) + 1);
          QCOMPARE(items.back(), cb->currentText());
          items.removeLast();
        }
        std::set<std::string> listed;
        for (const QString& item : items) listed.insert(item.toStdString());
        QCOMPARE(listed, std::set<std::string>(expected.begin(), expected.end()));
        for (const auto& c : expected)
          if (c != f.default_value) value = c;  // a value the document does not have yet
        cb->setCurrentText(QString::fromStdString(value.get<std::string>()));
      }
    } else if (auto* sb = qobject_cast<QSpinBox*>(w)) {
      QCOMPARE(f.type, FieldType::integer);
      value = f.default_value.get<int64_t>() + 1;
      sb->setValue(value.get<int>());
    } else if (auto* ch = qobject_cast<QCheckBox*>(w)) {
      QCOMPARE(f.type, FieldType::boolean);
      value = !f.default_value.get<bool>();
      ch->setChecked(value.get<bool>());
    } else if (auto* le = qobject_cast<QLineEdit*>(w)) {
      switch (f.type) {
        case FieldType::number:
          value = f.default_value.get<double>() + 0.5;
          break;
        case FieldType::unsigned_integer:
          value = f.default_value.get<uint64_t>() + 1;
          break;
        case FieldType::integer_list:
          value = nlohmann::json::array({3, 5});
          break;
        case FieldType::string_list:
          value = nlohmann::json::array({"a.txt", "b.txt"});
          break;
        case FieldType::string:
          value = f.default_value.get<std::string>() + "x";
          break;
        default:
          QFAIL(f.path.c_str());
      }
      QString text;
      if (value.is_array()) {
        QStringList items;
        for (const auto& item : value)
          items << QString::fromStdString(item.is_string() ? item.get<std::string>() : item.dump());
        text = items.join(", ");
      } else {
        text = QString::fromStdString(value.is_string() ? value.get<std::string>() : value.dump());
      }
      le->setText(text);
    } else {
      QFAIL(f.path.c_str());
    }
    const nlohmann::json doc = form.document();
    std::string pointer = "/";
    pointer += QString::fromStdString(f.path).replace('.', '/').toStdString();
    const nlohmann::json::json_pointer at(pointer);
    QVERIFY2(doc.contains(at), f.path.c_str());
    QCOMPARE(doc.at(at), value);
    JobSpec job;
    check_job_json(doc, &job);
    QCOMPARE(shardlab::job_to_json(job).at(at), value);
  }
}

// The editor fed a few thousand deterministic variants of the example jobs (bytes flipped, numbers
// replaced with 1e400, -1, 1e18 and other extremes, values of the wrong type, huge strings, deep
// nesting, truncations, random bytes), through the paths a user's text takes: opening a file
// (MainWindow::openFile, which also draws the grid and the memory plan of a valid job) and typing
// in the JSON tab. It must stay alive and either accept the job or show a problem.
void TestJobEditor::randomAndMutatedJsonNeverAborts() {
  std::vector<std::string> seeds;
  for (const QString& name : QDir(jobPath("")).entryList({"*.json"}, QDir::Files, QDir::Name))
    seeds.push_back(readJob(name).toStdString());
  QVERIFY(seeds.size() >= 3);

  std::mt19937_64 rng(21);  // fixed: every run feeds the same variants
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const std::vector<std::string> numbers = {"1e400",
                                            "-1e400",
                                            "-1",
                                            "1e18",
                                            "-1e18",
                                            "0",
                                            "1e308",
                                            "-1e308",
                                            "4294967296",
                                            "4611686018427387904",
                                            "3.5",
                                            "2147483648",
                                            "1e-400",
                                            "18446744073709551616",
                                            "9223372036854775807",
                                            "-9223372036854775808",
                                            "16777217",
                                            "1" + std::string(400, '0')};
  const std::vector<std::string> values = {"[]",      "{}",         "\"x\"",      "true", "null",
                                           "[1, -1]", "{\"a\": 1}", "[\"a\", 2]", "\"\"", "[[[]]]"};
  // Spans of number tokens and string tokens in `t`.
  auto tokens = [](const std::string& t, bool strings) {
    std::vector<std::pair<size_t, size_t>> spans;
    for (size_t i = 0; i < t.size();) {
      if (t[i] == '"') {
        size_t j = i + 1;
        while (j < t.size() && t[j] != '"') j += t[j] == '\\' ? 2 : 1;
        if (strings && j < t.size()) spans.push_back({i, j + 1 - i});
        i = j + 1;
      } else if (!strings && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '-')) {
        size_t j = i;
        while (j < t.size() && t[j] != '\0' && std::strchr("0123456789+-.eE", t[j])) ++j;
        spans.push_back({i, j - i});
        i = j;
      } else {
        ++i;
      }
    }
    return spans;
  };
  auto replace_token = [&](std::string& t, bool strings, const std::string& with) {
    const auto spans = tokens(t, strings);
    if (spans.empty()) return;
    const auto [at, n] = spans[pick(spans.size())];
    t.replace(at, n, with);
  };
  auto mutate = [&](std::string t) {
    const int rounds = 1 + static_cast<int>(pick(3));
    for (int r = 0; r < rounds; ++r) {
      switch (pick(9)) {
        case 0:  // flip bytes
          for (size_t k = 1 + pick(4); k > 0 && !t.empty(); --k)
            t[pick(t.size())] = static_cast<char>(rng() & 0xff);
          break;
        case 1:
        case 2:  // a number replaced by an extreme one
          replace_token(t, false, numbers[pick(numbers.size())]);
          break;
        case 3:  // a value of the wrong type
          replace_token(t, pick(2) == 0, values[pick(values.size())]);
          break;
        case 4: {  // a huge string
          std::string huge(20002 + pick(20000), 'x');
          huge.front() = huge.back() = '"';
          replace_token(t, true, huge);
          break;
        }
        case 5: {  // deep nesting in place of a value, within or far beyond the limit
          const size_t depth = pick(2) == 0 ? 60 + pick(10) : 100000;
          replace_token(t, pick(2) == 0,
                        std::string(depth, pick(2) == 0 ? '[' : '{') +
                            (pick(2) == 0 ? std::string(depth, ']') : std::string()));
          break;
        }
        case 6:  // truncated
          t.resize(pick(t.size() + 1));
          break;
        case 7: {  // a chunk duplicated elsewhere
          if (t.empty()) break;
          const size_t from = pick(t.size()), n = pick(std::min<size_t>(64, t.size() - from) + 1);
          t.insert(pick(t.size() + 1), t.substr(from, n));
          break;
        }
        default:  // a key or number replaced by a structural character
          if (!t.empty()) t[pick(t.size())] = "{}[]\",:"[pick(7)];
          break;
      }
    }
    return t;
  };

  QTemporaryDir dir;
  const QString path = dir.filePath("fuzz.json");
  MainWindow w;
  JobEditor typed;
  auto* edit = typed.findChild<QPlainTextEdit*>("jobText");
  QElapsedTimer clock;
  clock.start();
  constexpr int kVariants = 4000;
  int valid = 0, invalid = 0;
  for (int i = 0; i < kVariants; ++i) {
    std::string text;
    if (i % 10 == 9) {  // random bytes
      text.resize(pick(200));
      for (char& c : text) c = static_cast<char>(rng() & 0xff);
    } else {
      text = mutate(seeds[pick(seeds.size())]);
    }
    const QString qtext = QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
    JobEditor* e = nullptr;
    if (i % 4 == 0) {  // opened as a file
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
      f.write(text.data(), static_cast<qint64>(text.size()));
      f.close();
      QVERIFY(w.openFile(path));
      e = w.editor();
    } else {  // typed into the JSON tab
      edit->setPlainText(qtext);
      typed.validateNow();
      e = &typed;
    }
    if (e->isValid()) {
      ++valid;
    } else {
      ++invalid;
      QVERIFY2(!e->problem().isEmpty(), text.substr(0, 200).c_str());
    }
  }
  qInfo("%d variants: %d valid, %d with a problem shown, in %lld ms", kVariants, valid, invalid,
        static_cast<long long>(clock.elapsed()));
  QVERIFY(invalid > kVariants / 2);
  QVERIFY2(clock.elapsed() < 20000, "the fuzz pass must stay under 20 s");
}

QTEST_MAIN(TestJobEditor)
#include "tst_job_editor.moc"
