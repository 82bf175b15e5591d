// `shardlab export RUN.slrec --tensorboard DIR` as a user runs it, read back by an independent
// reader: a real two-rank run is recorded, exported as TensorBoard event files, CSV and Chrome
// trace, and tests/cli/tfevents_read.py (crcmod's CRC-32C for the TFRecord framing, the protobuf
// library with TensorBoard's field numbers, tests/cli/tb_event.proto, for the Events) decodes
// every file. Its scalars, rank by rank, tag by tag and step by step, must be the CSV's (train/*,
// time/*) and the trace's (eval/*, memory/*) figures as float32. The reader must reject a file
// with a flipped byte, and a second export into the same folder replaces the first. Skips, saying
// what is missing, without Fashion-MNIST or without python3-crcmod / python3-protobuf / protoc.
#include <QtTest>

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtEndian>

#include "tests/common/data.h"
#include "tests/common/process.h"
#include "tests/common/scratch_dir.h"

using shardlab::test::ProcessOptions;
using shardlab::test::ProcessOutcome;
using shardlab::test::run_process;

namespace {

constexpr int kSteps = 30;
constexpr int kRanks = 2;
const QString kPython = QStringLiteral("/usr/bin/python3");
const QString kReader = QStringLiteral(SHARDLAB_SOURCE_DIR "/tests/cli/tfevents_read.py");
const QString kProto = QStringLiteral(SHARDLAB_SOURCE_DIR "/tests/cli/tb_event.proto");

ProcessOutcome cli(const QStringList& args, const QString& cwd) {
  ProcessOptions o;
  o.cwd = cwd;
  o.timeout_ms = 240000;
  return run_process(QStringLiteral(SHARDLAB_CLI), args, o);
}

// One point of one tag: (step, value, wall time).
struct Point {
  qint64 step = 0;
  double value = 0;
  double wall = -1;  // -1: not compared
};
using Series = QMap<QString, QList<Point>>;  // tag -> points in file order

QByteArray read_all(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// Copies the event folder (rank<N>/events.out.tfevents.*) to `to`.
void copy_tree(const QString& from, const QString& to) {
  for (const QString& run : QDir(from).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    QDir().mkpath(to + "/" + run);
    for (const QString& f : QDir(from + "/" + run).entryList(QDir::Files))
      QFile::copy(from + "/" + run + "/" + f, to + "/" + run + "/" + f);
  }
}

QString event_file(const QString& dir, int rank) {
  const QString run = QString("%1/rank%2").arg(dir).arg(rank);
  const QStringList files = QDir(run).entryList({"events.out.tfevents.*"}, QDir::Files);
  return files.size() == 1 ? run + "/" + files[0] : QString();
}

}  // namespace

class TestExportFiles : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;
  QString skip_;  // why the suite cannot run here (empty: it can)
  QString rec_, tb_, csv_, trace_;

  ProcessOutcome read_events(const QString& dir) {
    return run_process(kPython, {kReader, kProto, dir});
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    if (!shardlab::test::have_fashion_mnist()) {
      skip_ = shardlab::test::kNoFashionMnist;
      return;
    }
    if (!QFile::exists(kPython)) {
      skip_ = "no /usr/bin/python3 for the independent reader";
      return;
    }
    rec_ = tmp_.filePath("run.slrec");
    tb_ = tmp_.filePath("tb");
    csv_ = tmp_.filePath("steps.csv");
    trace_ = tmp_.filePath("trace.json");
    const ProcessOutcome run =
        cli({"run", "resources/jobs/fashion_mlp.json", "--set",
             QString("train.steps=%1").arg(kSteps), "--set", "train.eval_every=10", "--set",
             QString("parallel.world_size=%1").arg(kRanks), "--record", rec_, "--quiet"},
            SHARDLAB_SOURCE_DIR);
    QVERIFY2(run.exit_code == 0, qPrintable(run.out + run.err));
    const ProcessOutcome ex =
        cli({"export", rec_, "--tensorboard", tb_, "--csv", csv_, "--chrome-trace", trace_},
            tmp_.path());
    QVERIFY2(ex.exit_code == 0, qPrintable(ex.out + ex.err));
    QVERIFY2(ex.out.contains(QString("export: wrote %1 scalar events for %2 ranks under %3")
                                 .arg(kRanks * (2 * kSteps + 3))
                                 .arg(kRanks)
                                 .arg(tb_)),
             qPrintable(ex.out));
    const ProcessOutcome probe = read_events(tb_);
    if (probe.exit_code == 2) skip_ = "the independent reader cannot run: " + probe.err.trimmed();
  }

  void usageNamesTheOption() {
    const ProcessOutcome none = cli({"export", tmp_.filePath("any.slrec")}, tmp_.path());
    QCOMPARE(none.exit_code, 2);
    QVERIFY2(none.err.contains("--tensorboard DIR"), qPrintable(none.err));
    if (rec_.isEmpty() || !QFile::exists(rec_)) QSKIP(qPrintable(skip_));
    // A folder that cannot be made: one clear line, exit 1.
    const ProcessOutcome blocked = cli({"export", rec_, "--tensorboard", csv_}, tmp_.path());
    QCOMPARE(blocked.exit_code, 1);
    QVERIFY2(blocked.err.contains("cannot create") && blocked.err.count('\n') == 1,
             qPrintable(blocked.err));
  }

  void scalarsMatchTheCsvAndTheTrace() {
    if (!skip_.isEmpty()) QSKIP(qPrintable(skip_));
    const ProcessOutcome read = read_events(tb_);
    QVERIFY2(read.exit_code == 0, qPrintable(read.err));
    const QJsonObject runs = QJsonDocument::fromJson(read.out.toUtf8()).object()["runs"].toObject();
    QCOMPARE(runs.keys(), (QStringList{"rank0", "rank1"}));

    // What the other exports say. The CSV: train/* and time/* per step (compute_s, wait_s, and
    // wait_s + transfer_s for all communication: every collective of this threads run has a known
    // wait, checked below, so none is in neither).
    QMap<int, Series> want;
    const QList<QByteArray> lines = read_all(csv_).split('\n');
    QVERIFY(lines.size() > kRanks * kSteps);
    for (int i = 1; i < lines.size(); ++i) {
      if (lines[i].isEmpty()) continue;
      const QList<QByteArray> c = lines[i].split(',');
      QCOMPARE(c.size(), 12);  // ..., transfer_s, host
      const int rank = c[0].toInt();
      const qint64 step = c[1].toLongLong();
      const double wall = c[7].toDouble();
      auto add = [&](const char* tag, double v) { want[rank][tag].append({step, v, wall}); };
      add("train/loss", c[2].toDouble());
      add("train/lr", c[3].toDouble());
      add("train/grad_norm", c[4].toDouble());
      add("train/throughput", c[5].toDouble());
      add("time/step_seconds", c[6].toDouble());
      add("time/compute_seconds", c[8].toDouble());
      add("time/comm_wait_seconds", c[9].toDouble());
      add("time/comm_seconds", c[9].toDouble() + c[10].toDouble());
    }
    // The trace: evaluations (their step) and memory counters (the rank's last step before).
    const QJsonArray events =
        QJsonDocument::fromJson(read_all(trace_)).object()["traceEvents"].toArray();
    QMap<int, qint64> last_step;
    int collectives = 0;
    for (const QJsonValue& v : events) {
      const QJsonObject e = v.toObject();
      const int rank = e["pid"].toInt();
      const QString name = e["name"].toString();
      const QJsonObject args = e["args"].toObject();
      if (e["ph"] == "i" && name.startsWith("step ")) last_step[rank] = name.mid(5).toLongLong();
      if (name == "eval") {
        const qint64 step = args["step"].toInteger();
        want[rank]["eval/loss"].append({step, args["loss"].toDouble()});
        want[rank]["eval/accuracy"].append({step, args["accuracy"].toDouble()});
      }
      if (name == "memory (bytes)") {
        const qint64 step = last_step.value(rank, 0);
        qint64 total = 0;
        for (const QString& cat : args.keys()) {
          const qint64 bytes = args[cat].toInteger();
          total += bytes;
          want[rank]["memory/" + cat + "_mib"].append({step, bytes / 1048576.0});
        }
        want[rank]["memory/total_mib"].append({step, total / 1048576.0});
      }
      if (e["cat"] == "collective") {
        ++collectives;
        QVERIFY2(args.contains("wait_s"),
                 "a collective with an unknown wait: comm != wait+transfer");
      }
    }
    QVERIFY(collectives > 0);

    QStringList wrong;
    int compared = 0;
    for (int rank = 0; rank < kRanks; ++rank) {
      const QJsonObject got = runs[QString("rank%1").arg(rank)].toObject();
      QVERIFY2(QRegularExpression("^events\\.out\\.tfevents\\.\\d{10}\\.[A-Za-z0-9._-]+$")
                   .match(got["file"].toString())
                   .hasMatch(),
               qPrintable(got["file"].toString()));
      // The file_version record, then one per step, one per memory report, one per evaluation.
      QCOMPARE(got["records"].toInt(), 1 + kSteps + kSteps + 3);
      const QJsonObject scalars = got["scalars"].toObject();
      const Series& w = want[rank];
      QCOMPARE(scalars.keys(), QStringList(w.keys()));
      QCOMPARE(w["eval/loss"].size(), 3);
      for (auto it = w.begin(); it != w.end(); ++it) {
        const QJsonArray points = scalars[it.key()].toArray();
        if (points.size() != it->size()) {
          wrong << QString("rank %1 %2: %3 points, expected %4")
                       .arg(rank)
                       .arg(it.key())
                       .arg(points.size())
                       .arg(it->size());
          continue;
        }
        for (int i = 0; i < points.size(); ++i) {
          const QJsonArray p = points[i].toArray();
          const Point& x = (*it)[i];
          const bool same_step = p[0].toInteger() == x.step;
          // The file holds float32: the expected figure rounded the same way.
          const bool same_value =
              static_cast<float>(p[1].toDouble()) == static_cast<float>(x.value);
          const bool same_wall = x.wall < 0 || p[2].toDouble() == x.wall;
          if (!same_step || !same_value || !same_wall)
            wrong << QString(
                         "rank %1 %2 #%3: got step %4 value %5 at %6, expected step %7 "
                         "value %8 at %9")
                         .arg(rank)
                         .arg(it.key())
                         .arg(i)
                         .arg(p[0].toInteger())
                         .arg(p[1].toDouble(), 0, 'g', 17)
                         .arg(p[2].toDouble(), 0, 'f', 6)
                         .arg(x.step)
                         .arg(static_cast<double>(static_cast<float>(x.value)), 0, 'g', 17)
                         .arg(x.wall, 0, 'f', 6);
          ++compared;
        }
      }
    }
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong.mid(0, 10).join('\n')));
    qInfo("%d scalars compared (%d tags per rank)", compared, static_cast<int>(want[0].size()));
  }

  // The reader checks both CRCs: a flipped byte in a record's data, or in its length, is named;
  // a file cut mid-record too.
  void readerRejectsAFlippedByte() {
    if (!skip_.isEmpty()) QSKIP(qPrintable(skip_));
    struct Case {
      const char* what;
      const char* expect;
    };
    const Case cases[] = {
        {"data", "data CRC mismatch"}, {"length", "length CRC mismatch"}, {"cut", "cut short"}};
    for (const Case& c : cases) {
      const QString copy = tmp_.filePath(QString("flipped-%1").arg(c.what));
      copy_tree(tb_, copy);
      const QString file = event_file(copy, 1);
      QVERIFY(!file.isEmpty());
      QByteArray bytes = read_all(file);
      // The first record (file_version) is 12 + n + 4 bytes; flip inside the second one.
      const qint64 first =
          12 + static_cast<qint64>(qFromLittleEndian<quint64>(bytes.constData())) + 4;
      QVERIFY(bytes.size() > first + 40);
      if (QByteArrayView(c.what) == "data") bytes[first + 12 + 10] = bytes[first + 12 + 10] ^ 0x01;
      if (QByteArrayView(c.what) == "length") bytes[first] = bytes[first] ^ 0x04;
      if (QByteArrayView(c.what) == "cut") bytes.truncate(bytes.size() - 3);
      shardlab::test::write_file(file, bytes);
      const ProcessOutcome r = read_events(copy);
      QVERIFY2(r.exit_code == 1,
               qPrintable(QString("%1: exit %2\n%3").arg(c.what).arg(r.exit_code).arg(r.err)));
      QVERIFY2(r.err.contains(c.expect) && r.err.contains("rank1"), qPrintable(r.err));
    }
  }

  // Exporting again into the same folder replaces the files (one per rank, so TensorBoard shows
  // no duplicates), byte for byte the same: the name and contents come from the recording alone.
  void exportingAgainReplacesTheFiles() {
    if (!skip_.isEmpty()) QSKIP(qPrintable(skip_));
    const QString again = tmp_.filePath("again");
    QVERIFY(QDir().mkpath(again + "/rank0"));
    shardlab::test::write_file(again + "/rank0/events.out.tfevents.1.old", "an earlier export");
    shardlab::test::write_file(again + "/rank0/notes.txt", "kept");
    const ProcessOutcome ex = cli({"export", rec_, "--tensorboard", again}, tmp_.path());
    QVERIFY2(ex.exit_code == 0, qPrintable(ex.out + ex.err));
    QVERIFY(!QFile::exists(again + "/rank0/events.out.tfevents.1.old"));
    QVERIFY(QFile::exists(again + "/rank0/notes.txt"));
    for (int rank = 0; rank < kRanks; ++rank) {
      const QString a = event_file(tb_, rank), b = event_file(again, rank);
      QVERIFY2(!b.isEmpty(), "not one event file per rank");
      QCOMPARE(QFileInfo(b).fileName(), QFileInfo(a).fileName());
      QVERIFY2(read_all(a) == read_all(b), qPrintable(b));
    }
    const ProcessOutcome read = read_events(again);
    QVERIFY2(read.exit_code == 0, qPrintable(read.err));
  }
};

QTEST_GUILESS_MAIN(TestExportFiles)
#include "tst_export_files.moc"
