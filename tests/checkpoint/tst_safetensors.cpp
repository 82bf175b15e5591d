// Safetensors model files (engine/model/safetensors.h). In process: the bytes the writer lays out
// (checked with Qt's own JSON parser), and every damaged or foreign header the reader must refuse.
// End to end: a real sharded job's checkpoint consolidated by `shardlab checkpoint consolidate`
// to OUT.safetensors and to the native model file, the safetensors file read back by an
// independent reader (read_safetensors.py: the standard library and NumPy only) and compared
// with the native file as the engine reads it, bit for bit, and with the model's own parameter
// names and shapes; a bad OUT gives one clear line; the independent reader itself fails on a
// truncated file and a wrong tensor count (so its passes mean something).
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>

#include "engine/core/error.h"
#include "engine/core/param_layout.h"
#include "engine/job/job_spec.h"
#include "engine/model/model_file.h"
#include "engine/model/safetensors.h"
#include "engine/plan/memory/planner.h"
#include "tests/common/caught.h"
#include "tests/common/data.h"
#include "tests/common/process.h"

using namespace shardlab;
using shardlab::test::ProcessOptions;
using shardlab::test::ProcessOutcome;
using shardlab::test::run_process;

namespace {

const QString kReader = QStringLiteral(SHARDLAB_SOURCE_DIR "/tests/checkpoint/read_safetensors.py");

// A python3 that can import numpy: /usr/bin/python3 (where python3-numpy installs it) or the one
// on PATH. `why_not` says what is missing when there is none.
struct Python {
  QString exe;
  QString why_not;
};

const Python& python() {
  static const Python p = [] {
    QStringList candidates{QStringLiteral("/usr/bin/python3")};
    const QString on_path = QStandardPaths::findExecutable(QStringLiteral("python3"));
    if (!on_path.isEmpty() && !candidates.contains(on_path)) candidates << on_path;
    bool any = false;
    for (const QString& c : candidates) {
      if (!QFile::exists(c)) continue;
      any = true;
      ProcessOptions o;
      o.timeout_ms = 60000;
      if (run_process(c, {"-c", "import numpy"}, o).exit_code == 0) return Python{c, {}};
    }
    return Python{{},
                  any ? "NumPy is missing for python3 (apt-get install python3-numpy)"
                      : "python3 is not installed (apt-get install python3 python3-numpy)"};
  }();
  return p;
}

ProcessOutcome reader(const QStringList& args) {
  ProcessOptions o;
  o.timeout_ms = 60000;
  return run_process(python().exe, QStringList{kReader} + args, o);
}

ProcessOutcome cli(const QStringList& args, const QString& runs_dir) {
  ProcessOptions o;
  o.cwd = SHARDLAB_SOURCE_DIR;
  o.env.insert("SHARDLAB_RUNS_DIR", runs_dir);
  o.timeout_ms = 180000;
  return run_process(SHARDLAB_CLI, args, o);
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A file of `header` text (unpadded) and `buffer` bytes, the length field as given or the text's.
std::vector<uint8_t> craft(const std::string& header, size_t buffer, int64_t length = -1) {
  const uint64_t n = length < 0 ? header.size() : uint64_t(length);
  std::vector<uint8_t> f(8 + header.size() + buffer, 0);
  std::memcpy(f.data(), &n, 8);
  std::memcpy(f.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < buffer; ++i) f[8 + header.size() + i] = uint8_t(i * 7 + 1);
  return f;
}

ParamLayout small_layout() {
  ParamLayout l;
  l.add("embed.weight", {3, 4}, 0);
  l.add("blocks.0.fc.weight", {2, 4}, 1);
  l.add("blocks.0.fc.bias", {2}, 1);
  return l;
}

std::vector<float> values(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.37f - 1.5f;
  v[3] = -0.0f;  // a sign bit that a value comparison would miss
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

const QStringList kTrain{"--set", "train.eval_every=0", "--set",      "train.eval_batches=1",
                         "--set", "train.log_every=1",  "--no-record"};

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;
  QString ckpt_;  // a small checkpoint for the error cases (initTestCase)

  QString path(const QString& name) const { return tmp_.filePath(name); }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    if (!shardlab::test::have_fashion_mnist()) return;
    ckpt_ = path("ck-small");
    const ProcessOutcome o =
        cli(QStringList{"run", "resources/jobs/fashion_mlp.json", "--set", "train.steps=2", "--set",
                        "parallel.world_size=2", "--set", "train.checkpoint_dir=" + ckpt_} +
                kTrain,
            path("runs"));
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
  }

  // The writer's bytes, read with Qt's JSON parser: u64 length, a header padded with spaces to a
  // multiple of 8, one F32 entry per parameter with the layout's name and shape, offsets back to
  // back in layout order, __metadata__ strings, and a buffer that is the flat parameters.
  void writerLaysOutTheFormat() {
    const ParamLayout l = small_layout();
    const std::vector<float> p = values(l.size());
    const std::vector<uint8_t> f = encode_safetensors(l, p, {{"shardlab.step", "7"}});
    uint64_t n = 0;
    std::memcpy(&n, f.data(), 8);
    QCOMPARE(n % 8, uint64_t(0));
    QCOMPARE(uint64_t(f.size()), 8 + n + p.size() * 4);
    const QByteArray text(reinterpret_cast<const char*>(f.data()) + 8, qsizetype(n));
    QVERIFY(text.startsWith('{'));
    QVERIFY(text.trimmed().endsWith('}'));
    QJsonParseError err;
    const QJsonObject h = QJsonDocument::fromJson(text, &err).object();
    QVERIFY2(err.error == QJsonParseError::NoError, qPrintable(err.errorString()));
    QCOMPARE(int(h.size()), 4);
    QCOMPARE(h["__metadata__"].toObject()["shardlab.step"].toString(), QString("7"));
    for (const ParamInfo& pi : l.params()) {
      const QJsonObject t = h[QString::fromStdString(pi.name)].toObject();
      QCOMPARE(t["dtype"].toString(), QString("F32"));
      QJsonArray shape;
      for (int64_t d : pi.shape) shape.append(qint64(d));
      QCOMPARE(t["shape"].toArray(), shape);
      QCOMPARE(t["data_offsets"].toArray(),
               (QJsonArray{qint64(pi.offset * 4), qint64((pi.offset + pi.numel) * 4)}));
    }
    QVERIFY(std::memcmp(f.data() + 8 + n, p.data(), p.size() * 4) == 0);
    // The header keeps layout order (names are not sorted).
    QVERIFY(text.indexOf("embed.weight") < text.indexOf("blocks.0.fc.weight"));
    // No metadata, no __metadata__ key; the engine's reader gives the values back, bit for bit.
    const std::vector<uint8_t> bare = encode_safetensors(l, p);
    QVERIFY(std::string(bare.begin(), bare.end()).find("__metadata__") == std::string::npos);
    QVERIFY(same_bits(decode_safetensors(f, l, "f"), p));
    QVERIFY(same_bits(decode_safetensors(bare, l, "f"), p));
    QCOMPARE(parse_safetensors(f, "f").metadata.at("shardlab.step"), std::string("7"));
    // Through the model-file entry points: the path's suffix picks the format.
    const std::string st = path("small.safetensors").toStdString();
    const std::string slm = path("small.slm").toStdString();
    save_model_file(st, l, p);
    save_model_file(slm, l, p);
    QVERIFY(file_bytes(st) == bare);
    QVERIFY(file_bytes(slm).size() > 8 && std::memcmp(file_bytes(slm).data(), "SLMODEL", 7) == 0);
    QVERIFY(same_bits(read_model_file(st, l), p));
    QVERIFY(same_bits(read_model_file(slm, l), p));
    QCOMPARE(test::caught([&] { encode_safetensors(l, std::vector<float>(3)); }).first,
             std::string("InvalidArgument"));
  }

  // Tensors in another order than the layout's (as other writers lay them out) read back by name.
  void readerTakesTensorsByName() {
    ParamLayout l;
    l.add("a", {2}, 0);
    l.add("b", {1, 2}, 0);
    const std::vector<uint8_t> f =
        craft(R"({"b":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},)"
              R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
              16);
    const std::vector<float> got = decode_safetensors(f, l, "x");
    const size_t at = f.size() - 16;
    std::vector<float> want(4);
    std::memcpy(want.data(), f.data() + at + 8, 8);  // a
    std::memcpy(want.data() + 2, f.data() + at, 8);  // b
    QVERIFY(same_bits(got, want));
  }

  void readerRefusesBadFiles_data() {
    QTest::addColumn<QByteArray>("header");
    QTest::addColumn<int>("buffer");
    QTest::addColumn<qint64>("length");  // -1: the header's
    QTest::addColumn<QString>("message");
    const QByteArray a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
    const QByteArray b1 = R"("b":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]})";
    QTest::newRow("gap") << "{" + a +
                                R"(,"b":{"dtype":"F32","shape":[1,2],"data_offsets":[12,20]}})"
                         << 20 << -1LL
                         << "x: tensor 'b' starts at byte 12 of the buffer, expected 8";
    QTest::newRow("overlap") << "{" + a +
                                    R"(,"b":{"dtype":"F32","shape":[1,2],"data_offsets":[4,12]}})"
                             << 12 << -1LL << "expected 8 (gap or overlap)";
    QTest::newRow("bytes after") << "{" + a + "," + b1 + "}" << 20 << -1LL
                                 << "x: 4 bytes after the last tensor";
    QTest::newRow("short buffer") << "{" + a + "," + b1 + "}" << 12 << -1LL
                                  << "x: truncated (its tensors need 16 bytes of data, the file "
                                     "holds 12)";
    QTest::newRow("size vs shape")
        << QByteArray(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})") << 8 << -1LL
        << "x: tensor 'a' holds 8 bytes, its dtype F32 and shape [3] need 12";
    QTest::newRow("duplicate") << "{" + a + "," + a + "}" << 8 << -1LL
                               << "x: the header names tensor 'a' twice";
    QTest::newRow("dtype") << QByteArray(
                                  R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})")
                           << 8 << -1LL << "x: tensor 'a' has unknown dtype 'F33'";
    QTest::newRow("negative dim")
        << QByteArray(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})") << 8 << -1LL
        << "holds a value that is not a size";
    QTest::newRow("offsets") << QByteArray(
                                    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})")
                             << 8 << -1LL << "has no data_offsets [begin, end] with begin <= end";
    QTest::newRow("metadata") << QByteArray(R"({"__metadata__":{"k":1}})") << 0 << -1LL
                              << "x: __metadata__ 'k' is not a string";
    QTest::newRow("not an object")
        << QByteArray("[1]") << 0 << -1LL << "the header does not start with '{'";
    QTest::newRow("not json") << QByteArray("{\"a\":") << 0 << -1LL
                              << "x: the header is not valid JSON";
    QTest::newRow("deep") << QByteArray("{\"a\":") + QByteArray(100, '[') << 0 << -1LL
                          << "nested deeper than 64 levels";
    QTest::newRow("length past end")
        << "{" + a + "}" << 8 << 4096LL << "x: truncated (header length 4096, but only";
    QTest::newRow("length over limit")
        << "{" + a + "}" << 8 << 200000000LL << "over the limit of 100000000 bytes";
  }

  void readerRefusesBadFiles() {
    QFETCH(QByteArray, header);
    QFETCH(int, buffer);
    QFETCH(qint64, length);
    QFETCH(QString, message);
    const std::vector<uint8_t> f = craft(header.toStdString(), size_t(buffer), length);
    const auto [type, what] = test::caught([&] { parse_safetensors(f, "x"); });
    QCOMPARE(type, std::string("FormatError"));
    QVERIFY2(QString::fromStdString(what).contains(message), what.c_str());
    // A file shorter than the length field.
    QVERIFY(test::error_of<FormatError>([] {
              parse_safetensors(std::vector<uint8_t>(5), "x");
            }).find("x: truncated (5 bytes") == 0);
  }

  // A well-formed file for another model: named by what differs.
  void readerRefusesAnotherModel() {
    const ParamLayout l = small_layout();
    const std::vector<float> p = values(l.size());
    ParamLayout other_shape;
    other_shape.add("embed.weight", {4, 3}, 0);
    other_shape.add("blocks.0.fc.weight", {2, 4}, 1);
    other_shape.add("blocks.0.fc.bias", {2}, 1);
    ParamLayout fewer;
    fewer.add("embed.weight", {3, 4}, 0);
    fewer.add("blocks.0.fc.weight", {2, 4}, 1);
    ParamLayout renamed;
    renamed.add("embed.weight", {3, 4}, 0);
    renamed.add("blocks.0.fc.weight", {2, 4}, 1);
    renamed.add("blocks.0.fc.b", {2}, 1);
    const std::vector<uint8_t> f = encode_safetensors(l, p);
    QCOMPARE(
        test::error_of<FormatError>([&] { decode_safetensors(f, other_shape, "m"); }),
        std::string("m: tensor 'embed.weight' has shape [3, 4], this model's has shape [4, 3]"));
    QCOMPARE(test::error_of<FormatError>([&] { decode_safetensors(f, fewer, "m"); }),
             std::string("m: tensor 'blocks.0.fc.bias' is not a parameter of this model (3 tensors "
                         "in the file, 2 parameters in the model)"));
    QCOMPARE(test::error_of<FormatError>([&] { decode_safetensors(f, renamed, "m"); }),
             std::string("m: no tensor 'blocks.0.fc.b' (a parameter of this model, shape [2])"));
    const std::vector<uint8_t> f16 =
        craft(R"({"embed.weight":{"dtype":"F16","shape":[3,4],"data_offsets":[0,24]}})", 24);
    ParamLayout one;
    one.add("embed.weight", {3, 4}, 0);
    QCOMPARE(test::error_of<FormatError>([&] { decode_safetensors(f16, one, "m"); }),
             std::string("m: tensor 'embed.weight' is F16, this model needs F32"));
    QVERIFY(test::error_of<IoError>([&] {
              read_model_file(path("none.safetensors").toStdString(), l);
            }).find("no such file") != std::string::npos);
  }

  // The round trip the issue asks for, for two strategies and layouts.
  void consolidateRoundTrip_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("ranks");
    QTest::newRow("zero2 on 4") << "zero2" << 4;
    QTest::newRow("fsdp on 2") << "fsdp" << 2;
  }

  void consolidateRoundTrip() {
    QFETCH(QString, strategy);
    QFETCH(int, ranks);
    if (!shardlab::test::have_fashion_mnist()) QSKIP(shardlab::test::kNoFashionMnist);
    if (python().exe.isEmpty()) QSKIP(qPrintable(python().why_not));
    const QString tag = strategy + QString::number(ranks);
    const QString dir = path("ck-" + tag), st = path(tag + ".safetensors"),
                  slm = path(tag + ".slm"), saved = path(tag + "-saved.safetensors");
    const QString runs = path("runs");
    ProcessOutcome o =
        cli(QStringList{"run", "resources/jobs/fashion_mlp.json", "--set", "train.steps=20",
                        "--set", "parallel.strategy=" + strategy, "--set",
                        "parallel.world_size=" + QString::number(ranks), "--set",
                        "train.checkpoint_dir=" + dir, "--save-model", saved} +
                kTrain,
            runs);
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    o = cli({"checkpoint", "consolidate", dir, st}, runs);
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY2(o.out.contains("consolidated step 20 of " + dir + "/step-00000020 (" + strategy +
                            " on " + QString::number(ranks) + " ranks") &&
                 o.out.contains("-> " + st),
             qPrintable(o.out));
    o = cli({"checkpoint", "consolidate", dir, slm}, runs);
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));

    // The model's own names and shapes, and the native file as the engine reads it.
    const JobSpec job = load_job(shardlab::test::example_job("fashion_mlp.json"));
    const ParamLayout layout = model_layout(job.model);
    const std::vector<float> native = read_model_file(slm.toStdString(), layout);

    // The independent reader: names, shapes, offsets and values.
    const QString dump = path(tag + ".f32");
    o = reader({st, "--dump", dump, "--expect-tensors", QString::number(layout.params().size())});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    const QJsonObject doc = QJsonDocument::fromJson(o.out.toUtf8()).object();
    const QJsonObject meta = doc["metadata"].toObject();
    QCOMPARE(meta["shardlab.step"].toString(), QString("20"));
    QCOMPARE(meta["shardlab.strategy"].toString(), strategy);
    QCOMPARE(meta["shardlab.topology"].toString(), "1x1x" + QString::number(ranks));
    QCOMPARE(meta["shardlab.model"].toString(), QString("mlp"));
    QCOMPARE(doc["header_bytes"].toInt() % 8, 0);
    const QJsonArray tensors = doc["tensors"].toArray();
    QCOMPARE(tensors.size(), qsizetype(layout.params().size()));
    const std::vector<uint8_t> values = file_bytes(dump.toStdString());
    QCOMPARE(values.size(), native.size() * 4);
    int64_t at = 0;  // elements of the dump so far (the reader dumps in buffer order)
    for (qsizetype i = 0; i < tensors.size(); ++i) {
      const QJsonObject t = tensors[i].toObject();
      const ParamInfo& p = layout[int(i)];
      QCOMPARE(t["name"].toString().toStdString(), p.name);
      QCOMPARE(t["dtype"].toString(), QString("F32"));
      QJsonArray shape;
      for (int64_t d : p.shape) shape.append(qint64(d));
      QCOMPARE(t["shape"].toArray(), shape);
      QVERIFY2(
          std::memcmp(values.data() + at * 4, native.data() + p.offset, size_t(p.numel) * 4) == 0,
          p.name.c_str());
      at += p.numel;
    }
    QCOMPARE(at, layout.size());
    QCOMPARE(layout.params().size(), size_t(6));  // 784-256-128-10: three weights, three biases
    QCOMPARE(tensors[0].toObject()["name"].toString(), QString("blocks.0.fc.weight"));
    QCOMPARE(tensors[0].toObject()["shape"].toArray(), (QJsonArray{256, 784}));

    // The engine reads its safetensors back to the same bits; the run's own --save-model
    // (gathered through the optimizer) holds the same model.
    QVERIFY(same_bits(read_model_file(st.toStdString(), layout), native));
    QVERIFY(same_bits(read_model_file(saved.toStdString(), layout), native));
    o = reader({saved, "--dump", dump + ".saved"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY(file_bytes((dump + ".saved").toStdString()) == values);

    // A job starts from either file alike (train.init_model).
    const QRegularExpression loss("step +1/1 +epoch +0 +loss ([0-9.]+)");
    QString first[2];
    for (int k = 0; k < 2; ++k) {
      o = cli(QStringList{"run", "resources/jobs/fashion_mlp.json", "--set",
                          "parallel.strategy=none", "--set", "parallel.world_size=1", "--set",
                          "train.steps=1", "--set", "train.init_model=" + (k ? slm : st)} +
                  kTrain,
              runs);
      QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
      first[k] = loss.match(o.out).captured(1);
    }
    QVERIFY2(!first[0].isEmpty() && first[0] == first[1], qPrintable(first[0] + " vs " + first[1]));
  }

  // A bad OUT: one clear line, exit status 1, nothing replaced.
  void badOutputGivesOneClearLine() {
    if (!shardlab::test::have_fashion_mnist()) QSKIP(shardlab::test::kNoFashionMnist);
    const QString runs = path("runs");
    const QString as_dir = path("adir.safetensors");
    QVERIFY(QDir().mkpath(as_dir));
    ProcessOutcome o = cli({"checkpoint", "consolidate", ckpt_, as_dir}, runs);
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.startsWith("shardlab: error: consolidate: " + as_dir + " is a directory"),
             qPrintable(o.err));
    QCOMPARE(o.err.count('\n'), 1);

    const QString out = path("exists.safetensors");
    {
      QFile f(out);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("keep me");
    }
    o = cli({"checkpoint", "consolidate", ckpt_, out}, runs);
    QCOMPARE(o.exit_code, 1);
    QCOMPARE(o.err,
             "shardlab: error: consolidate: " + out + " exists; pass --force to replace it\n");
    QVERIFY(file_bytes(out.toStdString()) ==
            std::vector<uint8_t>({'k', 'e', 'e', 'p', ' ', 'm', 'e'}));
    o = cli({"checkpoint", "consolidate", ckpt_, out, "--force"}, runs);
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY(parse_safetensors(file_bytes(out.toStdString()), "out").tensors.size() == 6);

    const QString nowhere = path("no-such-dir/m.safetensors");
    o = cli({"checkpoint", "consolidate", ckpt_, nowhere}, runs);
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.startsWith("shardlab: error: ") && o.err.contains(nowhere), qPrintable(o.err));
    QCOMPARE(o.err.count('\n'), 1);

    // A checkpoint whose manifest does not list names and shapes (as before they were recorded):
    // no safetensors, said in one line; the native model file still works.
    const QString old = path("ck-old");
    QVERIFY(QDir().mkpath(old));
    std::filesystem::copy(ckpt_.toStdString(), old.toStdString(),
                          std::filesystem::copy_options::recursive);
    const QString manifest = old + "/step-00000002/manifest.json";
    QFile mf(manifest);
    QVERIFY(mf.open(QIODevice::ReadOnly));
    QJsonObject m = QJsonDocument::fromJson(mf.readAll()).object();
    mf.close();
    QJsonObject layout = m["layout"].toObject();
    QVERIFY(layout.contains("tensors"));
    layout.remove("tensors");
    m["layout"] = layout;
    QVERIFY(mf.open(QIODevice::WriteOnly | QIODevice::Truncate));
    mf.write(QJsonDocument(m).toJson());
    mf.close();
    o = cli({"checkpoint", "consolidate", old, path("old.safetensors")}, runs);
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.contains("does not list the parameters' names and shapes"), qPrintable(o.err));
    QCOMPARE(o.err.count('\n'), 1);
    QVERIFY(!QFile::exists(path("old.safetensors")));
    o = cli({"checkpoint", "consolidate", old, path("old.slm")}, runs);
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
  }

  // The independent reader can fail: a truncated file, a gap, a wrong tensor count. (The engine's
  // reader refuses the same files.)
  void independentReaderFailsOnDamage() {
    if (!shardlab::test::have_fashion_mnist()) QSKIP(shardlab::test::kNoFashionMnist);
    if (python().exe.isEmpty()) QSKIP(qPrintable(python().why_not));
    const QString good = path("good.safetensors");
    ProcessOutcome o = cli({"checkpoint", "consolidate", ckpt_, good}, path("runs"));
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    o = reader({good, "--expect-tensors", "6"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    const std::vector<uint8_t> bytes = file_bytes(good.toStdString());
    const ParamLayout layout =
        model_layout(load_job(shardlab::test::example_job("fashion_mlp.json")).model);

    const QString cut = path("cut.safetensors");
    put_file(cut.toStdString(), std::vector<uint8_t>(bytes.begin(), bytes.end() - 100));
    o = reader({cut});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.startsWith("read_safetensors: " + cut + ": truncated: tensors need"),
             qPrintable(o.err));
    QVERIFY(test::error_of<FormatError>([&] {
              read_model_file(cut.toStdString(), layout);
            }).find("truncated (its tensors need") != std::string::npos);

    const QString head = path("head.safetensors");
    put_file(head.toStdString(), std::vector<uint8_t>(bytes.begin(), bytes.begin() + 100));
    o = reader({head});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.contains("truncated: header length"), qPrintable(o.err));

    o = reader({good, "--expect-tensors", "5"});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.contains("6 tensors, expected 5"), qPrintable(o.err));

    const QString gap = path("gap.safetensors");
    put_file(gap.toStdString(), craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                                      16));
    o = reader({gap});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.contains("b: starts at 12, expected 8"), qPrintable(o.err));
  }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "tst_safetensors.moc"
