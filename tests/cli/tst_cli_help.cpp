// The `shardlab` command for people and for scripts:
//   - help for every command: COMMAND --help, COMMAND -h and `help COMMAND` exit 0 and list the
//     command's options on stdout;
//   - the help lists every option the code reads: the options each command's code reads are found
//     here by scanning engine/cli/*.cpp (independently of the command table), and each must be in
//     that command's help (the table is also what the parser accepts, so an option missing from
//     the help cannot be used at all);
//   - --json: stdout is exactly one JSON document, whose figures agree with the text output;
//   - job-schema: every example job validates against it, and wrong jobs are rejected, checked by
//     an independent validator (Python's jsonschema).
#include <QtTest>

#include <QDir>
#include <QDirIterator>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QStandardPaths>
#include <QTemporaryDir>

#include "tests/cli/shardlab_cli.h"
#include "tests/common/scratch_dir.h"

namespace {

using Outcome = shardlab::test::CliOutcome;

Outcome run_cli(const QStringList& args, int timeout_ms = 240000) {
  return shardlab::test::run_shardlab(args, timeout_ms);
}

// Every command of `shardlab help`'s list, written out here (not read from the table).
const QStringList kCommands = {"run",
                               "worker",
                               "checkpoint inspect",
                               "checkpoint consolidate",
                               "monitor",
                               "replay",
                               "export",
                               "bench optimizer",
                               "bench mlp",
                               "bench model",
                               "bench comm",
                               "bench sharded",
                               "bench hybrid",
                               "bench telemetry",
                               "bench web",
                               "info",
                               "job-schema"};

// The options a help text lists: its lines "  --name ...".
QSet<QString> help_options(const QString& help) {
  QSet<QString> out;
  static const QRegularExpression line(R"(^  (?:-h, )?(--[a-z0-9-]+))",
                                       QRegularExpression::MultilineOption);
  for (auto it = line.globalMatch(help); it.hasNext();) out.insert(it.next().captured(1));
  return out;
}

// stdout as exactly one JSON object (a parse error or anything else fails the caller's check).
QJsonObject one_document(const Outcome& o, QString* why) {
  QJsonParseError e{};
  const QJsonDocument doc = QJsonDocument::fromJson(o.out.toUtf8(), &e);
  if (e.error != QJsonParseError::NoError || !doc.isObject()) {
    *why = "stdout is not one JSON object (" + e.errorString() + "):\n" + o.out + "\n" + o.err;
    return {};
  }
  return doc.object();
}

// --- Reading the source: which options a command's code reads --------------------------------

// `text` with string literals and comments blanked (same length), so braces inside them do not
// count.
QString code_only(const QString& text) {
  QString out = text;
  enum { code, str, chr, line_comment, block_comment } state = code;
  for (int i = 0; i < out.size(); ++i) {
    const QChar c = out[i], next = i + 1 < out.size() ? out[i + 1] : QChar();
    switch (state) {
      case code:
        if (c == '"')
          state = str;
        else if (c == '\'')
          state = chr;
        else if (c == '/' && next == '/')
          state = line_comment;
        else if (c == '/' && next == '*')
          state = block_comment;
        continue;
      case str:
      case chr:
        if (c == '\\') {
          out[i] = ' ';
          if (i + 1 < out.size()) out[++i] = ' ';
          continue;
        }
        if ((state == str && c == '"') || (state == chr && c == '\'')) {
          state = code;
          continue;
        }
        break;
      case line_comment:
        if (c == '\n') {
          state = code;
          continue;
        }
        break;
      case block_comment:
        if (c == '*' && next == '/') {
          out[i] = ' ';
          out[++i] = ' ';
          state = code;
          continue;
        }
        break;
    }
    if (c != '\n') out[i] = ' ';
  }
  return out;
}

struct Definition {
  QString file;  // "run_command.cpp"
  QString body;  // from the signature to the closing brace (or the ';' of a constant)
};

// The functions and constants defined at column 0 of every engine/cli/*.cpp, by name (overloads
// and same-named functions of different files all kept).
QMultiMap<QString, Definition> index_definitions(const QString& cli_dir) {
  QMultiMap<QString, Definition> defs;
  // A member function ("Class::name(") is filed under its class: code that names the class
  // reaches all its members.
  static const QRegularExpression function_head(R"(^[A-Za-z_][^;{}()]*?\b((?:\w+::)*)(\w+)\s*\()");
  static const QRegularExpression constant_head(
      R"(^(?:static\s+)?(?:const|constexpr|inline const)\b[^;(]*?\b(k[A-Z]\w*)\s*[={])");
  for (const QString& name : QDir(cli_dir).entryList({"*.cpp"})) {
    QFile f(cli_dir + "/" + name);
    if (!f.open(QIODevice::ReadOnly)) continue;
    const QString text = QString::fromUtf8(f.readAll());
    const QString code = code_only(text);
    int pos = 0;
    while (pos < code.size()) {
      const int end_of_line = code.indexOf('\n', pos);
      const int line_end = end_of_line < 0 ? code.size() : end_of_line;
      const QString line = code.mid(pos, line_end - pos);
      const bool top_level = !line.isEmpty() && !line[0].isSpace() &&
                             !line.startsWith("namespace") && !line.startsWith("}") &&
                             !line.startsWith("#") && !line.startsWith("using");
      QRegularExpressionMatch m;
      if (top_level && (m = constant_head.match(line)).hasMatch()) {
        const int semi = code.indexOf(';', pos);
        defs.insert(m.captured(1), Definition{name, text.mid(pos, semi - pos)});
        pos = semi + 1;
        continue;
      }
      if (top_level && (m = function_head.match(line)).hasMatch()) {
        // The body: from the first '{' after the head (before any ';': a declaration has none)
        // to its matching '}'.
        const int open = code.indexOf('{', pos), semi = code.indexOf(';', pos);
        if (open >= 0 && (semi < 0 || open < semi)) {
          int depth = 0, i = open;
          for (; i < code.size(); ++i) {
            if (code[i] == '{') ++depth;
            if (code[i] == '}' && --depth == 0) break;
          }
          const QStringList scope = m.captured(1).split("::", Qt::SkipEmptyParts);
          defs.insert(scope.isEmpty() ? m.captured(2) : scope.last(),
                      Definition{name, text.mid(pos, i + 1 - pos)});
          pos = i + 1;
          continue;
        }
      }
      pos = line_end + 1;
    }
  }
  return defs;
}

// The files that hold no command of their own: what they define is shared by several commands.
const QStringList kSharedFiles = {
    "telemetry_setup.cpp", "web_setup.cpp", "sharded_report.cpp", "verify.cpp", "restart.cpp",
    "json_output.cpp",     "args.cpp"};

// The option literals ("--name") in `entry`'s body and, transitively, in the bodies of the
// functions and constants it names that are defined in its own file or a shared file, except other
// commands' entry functions.
QSet<QString> options_read(const QMultiMap<QString, Definition>& defs, const QString& file,
                           const QString& entry, const QSet<QString>& entries) {
  static const QRegularExpression literal(R"re("(--[a-z][a-z0-9-]*)")re");
  static const QRegularExpression word(R"(\b([A-Za-z_]\w*)\b)");
  QSet<QString> out, seen{entry};
  QStringList todo{entry};
  while (!todo.isEmpty()) {
    const QString name = todo.takeFirst();
    for (const Definition& d : defs.values(name)) {
      if (d.file != file && !kSharedFiles.contains(d.file)) continue;
      for (auto it = literal.globalMatch(d.body); it.hasNext();) out.insert(it.next().captured(1));
      for (auto it = word.globalMatch(code_only(d.body)); it.hasNext();) {
        const QString w = it.next().captured(1);
        if (seen.contains(w) || entries.contains(w) || !defs.contains(w)) continue;
        seen.insert(w);
        todo << w;
      }
    }
  }
  return out;
}

}  // namespace

class TestCliHelp : public QObject {
  Q_OBJECT
 private:
  shardlab::test::ScratchDir tmp_;

 private slots:
  void helpForEveryCommand_data() {
    QTest::addColumn<QString>("command");
    QTest::addColumn<QStringList>("args");
    for (const QString& c : kCommands) {
      const QStringList words = c.split(' ');
      QTest::newRow(qPrintable(c + " --help")) << c << words + QStringList{"--help"};
      QTest::newRow(qPrintable(c + " -h")) << c << words + QStringList{"-h"};
      QTest::newRow(qPrintable("help " + c)) << c << QStringList{"help"} + words;
      // -h after other arguments, even a positional one: still the help, nothing runs.
      QTest::newRow(qPrintable(c + " X -h")) << c << words + QStringList{"X.json", "-h"};
    }
  }

  void helpForEveryCommand() {
    QFETCH(QString, command);
    QFETCH(QStringList, args);
    const Outcome o = run_cli(args, 30000);
    QCOMPARE(o.status, QProcess::NormalExit);
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QVERIFY2(o.err.isEmpty(), qPrintable(o.err));
    QVERIFY2(o.out.startsWith("usage: shardlab " + command), qPrintable(o.out));
    QVERIFY2(o.out.contains("options:\n"), qPrintable(o.out));
    QVERIFY2(help_options(o.out).contains("--help"), qPrintable(o.out));
  }

  // `shardlab help` names every command; a group word lists its members; an unknown one is a
  // usage error; an option that takes a value takes "-h" as that value, not as a help request.
  void helpOverviewAndMistakes() {
    Outcome o = run_cli({"help"});
    QCOMPARE(o.exit_code, 0);
    for (const QString& c : kCommands)
      QVERIFY2(o.out.contains("\n  " + c + " ") || o.out.contains("\n  " + c + "\n"),
               qPrintable(c + " missing from\n" + o.out));
    for (const QStringList& args : {QStringList{"--help"}, QStringList{"-h"}}) {
      o = run_cli(args);
      QCOMPARE(o.exit_code, 0);
      QVERIFY(o.out.startsWith("usage: shardlab <command>"));
    }
    o = run_cli({"help", "bench"});
    QCOMPARE(o.exit_code, 0);
    QVERIFY2(o.out.contains("bench comm") && o.out.contains("bench web"), qPrintable(o.out));
    o = run_cli({"bench", "--help"});
    QCOMPARE(o.exit_code, 0);
    QVERIFY2(o.out.contains("bench sharded"), qPrintable(o.out));
    o = run_cli({"help", "bench", "frobnicate"});
    QCOMPARE(o.exit_code, 2);
    QVERIFY2(o.err.startsWith("shardlab: help: unknown command 'bench frobnicate'\n"
                              "run 'shardlab help' for usage"),
             qPrintable(o.err));
    o = run_cli({"run", "resources/jobs/fashion_mlp.json", "--set", "-h", "--no-record"});
    QCOMPARE(o.exit_code, 1);  // "-h" is --set's value: a malformed override, not the help
    QVERIFY2(o.err.contains("expected key=value"), qPrintable(o.err));
    QVERIFY(o.out.isEmpty());
    o = run_cli({"bench", "comm", "--bogus"});
    QCOMPARE(o.exit_code, 2);
    QVERIFY2(o.err.startsWith("shardlab: unknown option '--bogus'"), qPrintable(o.err));
  }

  // Every option a command's code reads is in its help. Found by reading engine/cli/*.cpp: the
  // option literals in the command's entry function and in what it calls (its file's functions
  // and constants, and the shared helpers), not from the command table. Deleting an option from
  // the table makes this fail (and makes the option unusable: the table is the parser's list).
  void helpListsEveryOptionTheCodeReads_data() {
    QTest::addColumn<QString>("command");
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("entry");  // the function that parses the command's arguments
    QTest::addColumn<QStringList>("not_options");
    // Read by a shared helper but never set for this command: worker runs RunTelemetry with
    // recording off by default and no dashboard, so its --no-record and --http reads see "absent".
    const QStringList worker_helper_reads{"--no-record", "--http"};
    const QList<std::tuple<QString, QString, QString, QStringList>> rows = {
        {"run", "run_command.cpp", "run_command", {}},
        {"worker", "worker_command.cpp", "worker_command", worker_helper_reads},
        {"checkpoint inspect", "checkpoint_command.cpp", "checkpoint_inspect_command", {}},
        {"checkpoint consolidate", "checkpoint_command.cpp", "checkpoint_consolidate_command", {}},
        {"monitor", "monitor_command.cpp", "monitor_command", {}},
        {"replay", "replay_command.cpp", "replay_command", {}},
        {"export", "replay_command.cpp", "export_command", {}},
        {"bench optimizer", "bench_command.cpp", "bench_optimizer", {}},
        {"bench mlp", "bench_command.cpp", "bench_mlp", {}},
        {"bench model", "bench_command.cpp", "bench_model", {}},
        {"bench comm", "bench_comm.cpp", "bench_comm_command", {}},
        {"bench sharded", "bench_sharded.cpp", "bench_sharded_command", {}},
        {"bench hybrid", "bench_hybrid.cpp", "bench_hybrid_command", {}},
        {"bench telemetry", "bench_telemetry.cpp", "bench_telemetry_command", {}},
        {"bench web", "bench_web.cpp", "bench_web_command", {}},
        {"info", "info_command.cpp", "info_command", {}},
        {"job-schema", "job_schema_command.cpp", "job_schema_command", {}},
    };
    for (const auto& [command, file, entry, not_options] : rows)
      QTest::newRow(qPrintable(command)) << command << file << entry << not_options;
  }

  void helpListsEveryOptionTheCodeReads() {
    QFETCH(QString, command);
    QFETCH(QString, file);
    QFETCH(QString, entry);
    QFETCH(QStringList, not_options);
    static const QMultiMap<QString, Definition> defs =
        index_definitions(QString(SHARDLAB_SOURCE_DIR) + "/engine/cli");
    const QSet<QString> entries{"run_command",
                                "worker_command",
                                "checkpoint_command",
                                "checkpoint_inspect_command",
                                "checkpoint_consolidate_command",
                                "monitor_command",
                                "replay_command",
                                "export_command",
                                "bench_command",
                                "bench_optimizer",
                                "bench_mlp",
                                "bench_model",
                                "bench_comm_command",
                                "bench_sharded_command",
                                "bench_hybrid_command",
                                "bench_telemetry_command",
                                "bench_web_command",
                                "info_command",
                                "job_schema_command"};
    QVERIFY2(defs.contains(entry), qPrintable(entry + " not found in engine/cli/" + file));
    QSet<QString> read = options_read(defs, file, entry, entries);
    for (const QString& o : not_options) read.remove(o);
    const Outcome o = run_cli(QStringList{"help"} + command.split(' '), 30000);
    QCOMPARE(o.exit_code, 0);
    const QSet<QString> listed = help_options(o.out);
    QStringList missing;
    for (const QString& opt : read)
      if (!listed.contains(opt)) missing << opt;
    missing.sort();
    QVERIFY2(missing.isEmpty(),
             qPrintable("shardlab help " + command + " does not list " + missing.join(", ") +
                        " (read by engine/cli/" + file + " " + entry + ")"));
    // And the parser rejects what no help lists (it reads the same table).
    const Outcome p = run_cli(command.split(' ') + QStringList{"--no-such-option"}, 30000);
    QCOMPARE(p.exit_code, 2);
    QVERIFY2(p.err.startsWith("shardlab: unknown option '--no-such-option'\n"), qPrintable(p.err));
  }

  // --- --json --------------------------------------------------------------------------------

  void jsonBenchOptimizer() {
    const Outcome o = run_cli({"bench", "optimizer", "--params", "4096", "--reps", "2",
                               "--optimizers", "adam,sgd", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QString why;
    const QJsonObject j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    QCOMPARE(j["bench"].toString(), QString("optimizer"));
    QCOMPARE(j["parameters"].toInt(), 4096);
    const QJsonArray rows = j["rows"].toArray();
    QCOMPARE(rows.size(), 2);
    QCOMPARE(rows[0].toObject()["optimizer"].toString(), QString("adam"));
    QCOMPARE(rows[1].toObject()["optimizer"].toString(), QString("sgd"));
    for (const QJsonValue& v : rows) {
      const QJsonObject r = v.toObject();
      QVERIFY(r["gb_per_second"].toDouble() > 0);
      // gb_per_second = bytes_per_param x parameters / best_seconds / 1e9
      const double gb = r["bytes_per_param"].toDouble() * 4096 / r["best_seconds"].toDouble() / 1e9;
      QVERIFY2(std::abs(gb / r["gb_per_second"].toDouble() - 1) < 1e-6, qPrintable(o.out));
      // The text table (on stderr) names the same optimizers.
      QVERIFY2(o.err.contains(r["optimizer"].toString()), qPrintable(o.err));
    }
  }

  void jsonBenchMlpAndModel() {
    const Outcome text = run_cli({"bench", "mlp", "--steps", "10", "--batch", "16"});
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    Outcome o = run_cli({"bench", "mlp", "--steps", "10", "--batch", "16", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QString why;
    QJsonObject j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    QCOMPARE(j["steps"].toInt(), 10);
    QCOMPARE(j["batch_size"].toInt(), 16);
    // The text's "mlp 784-...-10, N parameters, adam, batch 16, 10 steps".
    QVERIFY2(
        text.out.contains(
            QString(", %1 parameters, adam, batch 16, 10 steps").arg(j["parameters"].toInteger())),
        qPrintable(text.out + o.out));
    QVERIFY(j["samples_per_second"].toDouble() > 0);

    o = run_cli({"bench", "model", "--device", "cpu", "--steps", "1", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    const QJsonArray rows = j["rows"].toArray();
    QCOMPARE(rows.size(), 2);
    QCOMPARE(rows[0].toObject()["job"].toString(), QString("fashion_mlp"));
    QCOMPARE(rows[0].toObject()["unit"].toString(), QString("samples"));
    QCOMPARE(rows[1].toObject()["unit"].toString(), QString("tokens"));
    for (const QJsonValue& v : rows) QVERIFY(v.toObject()["units_per_second"].toDouble() > 0);
  }

  void jsonBenchComm() {
    const Outcome o =
        run_cli({"bench", "comm", "--backend", "threads", "--ranks", "2", "--max-bytes", "4096",
                 "--ops", "all_reduce", "--rounds", "1", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QString why;
    const QJsonObject j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    QCOMPARE(j["ranks"].toInt(), 2);
    const QJsonArray rows = j["rows"].toArray();
    QCOMPARE(rows.size(), 3);  // 1, 2, 4 KiB, as in the text table
    QCOMPARE(o.err.count("all_reduce"), 3);
    QList<qint64> sizes;
    for (const QJsonValue& v : rows) {
      const QJsonObject r = v.toObject();
      QCOMPARE(r["op"].toString(), QString("all_reduce"));
      sizes << r["bytes"].toInteger();
      // all-reduce busbw = algbw x 2(n-1)/n = algbw at n = 2
      QVERIFY(std::abs(r["busbw_gb_per_second"].toDouble() - r["algbw_gb_per_second"].toDouble()) <=
              1e-9 * r["algbw_gb_per_second"].toDouble());
    }
    QCOMPARE(sizes, (QList<qint64>{1024, 2048, 4096}));
    QVERIFY(j["memcpy_gb_per_second"].toDouble() > 0);
  }

  void jsonBenchSharded() {
    const Outcome o = run_cli({"bench", "sharded", "--backend", "threads", "--ranks", "2",
                               "--steps", "2", "--warmup", "1", "--batch", "16", "--train-limit",
                               "256", "--overlap", "on", "--strategies", "ddp,zero2", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QString why;
    const QJsonObject j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    QCOMPARE(j["parameters"].toInt(), 235146);
    QVERIFY2(o.err.contains("235146 parameters"), qPrintable(o.err));
    const QJsonArray rows = j["rows"].toArray();
    QCOMPARE(rows.size(), 2);
    for (const QJsonValue& v : rows) {
      const QJsonObject r = v.toObject();
      QCOMPARE(r["steady_bytes_max"].toInteger(), r["planned_steady_bytes"].toInteger());
      QVERIFY(r["median_step_ms"].toDouble() > 0);
      QCOMPARE(r["overlap"].toBool(), true);
    }
    QVERIFY(rows[0].toObject()["steady_bytes_max"].toInteger() >
            rows[1].toObject()["steady_bytes_max"].toInteger());  // ddp holds more than zero2
  }

  void jsonBenchHybrid() {
    const Outcome o =
        run_cli({"bench", "hybrid", "--quick", "--steps", "1", "--warmup", "0", "--json"}, 300000);
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QString why;
    const QJsonObject j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    const QJsonArray layouts = j["throughput"].toArray();
    QCOMPARE(layouts.size(), 4);
    QCOMPARE(layouts[3].toObject()["layout"].toString(), QString("2x2x2"));
    int interleaved = 0;
    for (const QJsonValue& v : j["bubble"].toArray()) {
      const QJsonObject r = v.toObject();
      const double p = r["pp"].toDouble(), m = r["micro_batches"].toDouble();
      const double chunks = r["chunks"].toDouble();
      QCOMPARE(chunks, r["schedule"].toString() == "interleaved" ? 2.0 : 1.0);
      interleaved += chunks > 1 ? 1 : 0;
      QVERIFY(std::abs(r["formula_bubble"].toDouble() - (p - 1) / (chunks * m + p - 1)) < 1e-12);
      QCOMPARE(r["stage_bubble"].toArray().size(), static_cast<int>(p));
    }
    QCOMPARE(interleaved, 2);  // --quick: m 1 and 4, of which 4 is a multiple of p = 2 and 4
  }

  void jsonBenchTelemetryAndWeb() {
    Outcome o = run_cli(
        {"bench", "telemetry", "--events", "1000", "--steps", "10", "--pairs", "1", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QString why;
    QJsonObject j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    QCOMPARE(j["ingest"].toObject()["rows"].toArray().size(), 3);
    QVERIFY(j["publish_ns"].toObject()["publisher"].toDouble() > 0);
    QCOMPARE(j["overhead"].toObject()["pairs"].toInt(), 1);
    QVERIFY(o.err.contains("median train seconds"));

    o = run_cli({"bench", "web", "--events", "1000", "--viewers", "1", "--ranks", "4", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    QCOMPARE(j["ranks"].toInt(), 4);
    const QJsonArray rows = j["ingest"].toObject()["rows"].toArray();
    QCOMPARE(rows.size(), 2);
    QCOMPARE(rows[1].toObject()["viewers"].toInt(), 1);
    QVERIFY(j["frames"].toObject()["full_bytes"].toInteger() > 0);
  }

  void jsonInfo() {
    const Outcome text = run_cli({"info"});
    const Outcome o = run_cli({"info", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QString why;
    const QJsonObject j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    QVERIFY(text.out.startsWith("shardlab " + j["version"].toString() + "\n"));
    QVERIFY(text.out.contains("resources: " + j["resources"].toString() + "\n"));
    const QJsonObject mpi = j["mpi"].toObject();
    QCOMPARE(text.out.contains("mpi: built with MPI " + mpi["version"].toString()),
             mpi["built"].toBool());
    QVERIFY(text.out.contains(j["blas"].toObject()["config"].toString()));
  }

  // A tiny sharded run with --json, checked against its own summary line (on stderr), then its
  // checkpoint inspected with --json, checked against the text of `checkpoint inspect`.
  void jsonRunAndCheckpointInspect() {
    const QString dir = tmp_.filePath("ck");
    const Outcome o =
        run_cli({"run", "resources/jobs/fashion_mlp.json", "--set", "parallel.world_size=2",
                 "--set", "train.steps=4", "--set", "train.eval_every=0", "--set",
                 "train.eval_batches=1", "--set", "train.checkpoint_dir=" + dir, "--set",
                 "train.checkpoint_every=2", "--no-record", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QString why;
    const QJsonObject j = one_document(o, &why);
    QVERIFY2(!j.isEmpty(), qPrintable(why));
    QCOMPARE(j["steps"].toInt(), 4);
    QCOMPARE(j["world_size"].toInt(), 2);
    QCOMPARE(j["strategy"].toString(), QString("zero2"));
    QCOMPARE(j["exit_status"].toInt(), 0);
    QCOMPARE(j["ranks"].toArray().size(), 2);
    // The summary line on stderr: "summary: completed 4 steps | eval accuracy A%  eval loss L |
    // ..."
    static const QRegularExpression summary(
        R"(summary: (.*?) \| eval accuracy ([0-9.]+)%  eval loss ([0-9.]+) \| (\d+) steps)");
    const QRegularExpressionMatch m = summary.match(o.err);
    QVERIFY2(m.hasMatch(), qPrintable(o.err));
    QCOMPARE(m.captured(1), j["stop_reason"].toString());
    QCOMPARE(m.captured(4).toInt(), j["steps"].toInt());
    const QJsonObject eval = j["eval"].toObject();
    QCOMPARE(m.captured(2), QString::number(100.0 * eval["accuracy"].toDouble(), 'f', 2));
    QCOMPARE(m.captured(3), QString::number(eval["loss"].toDouble(), 'f', 4));
    for (const QJsonValue& v : j["ranks"].toArray()) {
      const QJsonObject r = v.toObject();
      QCOMPARE(r["params_bytes"].toInteger(), r["planned_params_bytes"].toInteger());
    }

    const Outcome text = run_cli({"checkpoint", "inspect", dir});
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    const Outcome ci = run_cli({"checkpoint", "inspect", dir, "--json"});
    QVERIFY2(ci.exit_code == 0, qPrintable(ci.err));
    const QJsonObject c = one_document(ci, &why);
    QVERIFY2(!c.isEmpty(), qPrintable(why));
    QCOMPARE(c["step"].toInt(), 4);
    QVERIFY(text.out.contains(QString("checkpoint step %1").arg(c["step"].toInt())));
    QVERIFY(text.out.contains("strategy: " + c["strategy"].toString()));
    QVERIFY(text.out.startsWith(c["step_dir"].toString() + "\n"));
    QCOMPARE(c["shards"].toArray().size(), 2);
    QVERIFY(text.out.contains(QString("verified: %1 shards").arg(c["shards"].toArray().size())));
    qint64 sum = 0;
    for (const QJsonValue& v : c["shards"].toArray()) {
      QVERIFY(text.out.contains(v.toObject()["file"].toString()));
      sum += v.toObject()["bytes"].toInteger();
    }
    QCOMPARE(c["shards_bytes"].toInteger(), sum);
    QCOMPARE(c["verified"].toBool(), true);
  }

  // --- job-schema ----------------------------------------------------------------------------

  void jobSchemaValidatesJobs() {
    const QString python = QStandardPaths::findExecutable("python3");
    if (python.isEmpty()) QSKIP("python3 not found (apt-get install python3-jsonschema)");
    {
      QProcess probe;
      probe.start(python, {"-c", "import jsonschema"});
      if (!probe.waitForFinished(30000) || probe.exitCode() != 0)
        QSKIP("python3 has no jsonschema module (apt-get install python3-jsonschema)");
    }
    const Outcome o = run_cli({"job-schema"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    const QString schema = tmp_.write("job.schema.json", o.out.toUtf8());
    // Wrong jobs, each with the one mistake the schema must catch.
    QMap<QString, QString> wrong;  // file -> what is wrong
    wrong[tmp_.write("wrong_type.json", R"({"train": {"steps": "many"}})")] = "a wrong type";
    wrong[tmp_.write("wrong_choice.json", R"({"optimizer": {"name": "adamm"}})")] =
        "an unknown choice";
    wrong[tmp_.write("wrong_field.json", R"({"optimizer": {"lrr": 0.1}})")] = "an unknown field";
    wrong[tmp_.write("wrong_section.json", R"({"trainer": {}})")] = "an unknown section";
    wrong[tmp_.write("wrong_range.json", R"({"parallel": {"world_size": 0}})")] = "out of range";
    // The checker: every file given, one line each, "ok" or "invalid: <first error>".
    const QString checker = tmp_.write("check.py", R"(
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
for path in sys.argv[2:]:
    errors = sorted(validator.iter_errors(json.load(open(path))), key=lambda e: e.path)
    print(path, "ok" if not errors else "invalid: " + errors[0].message)
)");
    QStringList jobs;
    for (QDirIterator it(QString(SHARDLAB_SOURCE_DIR) + "/resources/jobs", {"*.json"});
         it.hasNext();)
      jobs << it.next();
    QVERIFY(jobs.size() >= 5);
    QProcess p;
    p.start(python, QStringList{checker, schema} + jobs + wrong.keys());
    QVERIFY(p.waitForFinished(60000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(p.exitCode() == 0, qPrintable(out + p.readAllStandardError()));
    for (const QString& job : jobs)
      QVERIFY2(out.contains(job + " ok\n"), qPrintable(job + " should validate:\n" + out));
    for (auto it = wrong.begin(); it != wrong.end(); ++it)
      QVERIFY2(out.contains(it.key() + " invalid: "),
               qPrintable(it.key() + " (" + it.value() + ") should be rejected:\n" + out));
    // The engine agrees with the schema on each wrong job: `shardlab run` refuses it too.
    for (auto it = wrong.begin(); it != wrong.end(); ++it) {
      const Outcome r = run_cli({"run", it.key(), "--no-record"}, 60000);
      QVERIFY2(r.exit_code == 1, qPrintable(it.key() + ": " + r.err));
    }
  }
};

QTEST_GUILESS_MAIN(TestCliHelp)
#include "tst_cli_help.moc"
