// IDX reader: round trips and every malformed-input path, on files written into a temp dir.
#include <QtTest>

#include "engine/core/error.h"
#include "engine/data/idx_reader.h"
#include "tests/data/data_test_util.h"

using namespace shardlab;
using namespace shardlab::testing;

class TestIdxReader : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::string path(const char* name) { return (dir_.path() + "/" + name).toStdString(); }

  // A 3x2x4 array with values that exercise every bit of a byte.
  static std::vector<uint8_t> sample_values() {
    std::vector<uint8_t> v(24);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 37 + 1);
    v[23] = 255;
    v[0] = 0;
    return v;
  }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void roundTrip_data() {
    QTest::addColumn<bool>("gzip");
    QTest::newRow("plain") << false;
    QTest::newRow("gzip") << true;
  }
  void roundTrip() {
    QFETCH(bool, gzip);
    const std::string p = path(gzip ? "a.idx.gz" : "a.idx");
    const auto values = sample_values();
    const auto bytes = concat(idx_header({3, 2, 4}), values);
    gzip ? write_gzip(p, bytes) : write_plain(p, bytes);
    if (gzip) QVERIFY(read_bytes(p) != bytes);  // really compressed
    const IdxArray a = read_idx(p);
    QCOMPARE(a.dims, (std::vector<int64_t>{3, 2, 4}));
    QCOMPARE(a.numel(), 24);
    QCOMPARE(a.data, values);

    // One dimension, as in a label file, including a dimension beyond 2^16.
    std::vector<uint8_t> labels(70000);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i % 10);
    const std::string q = path(gzip ? "l.idx.gz" : "l.idx");
    gzip ? write_gzip(q, concat(idx_header({70000}), labels))
         : write_plain(q, concat(idx_header({70000}), labels));
    const IdxArray l = read_idx(q);
    QCOMPARE(l.dims, (std::vector<int64_t>{70000}));
    QCOMPARE(l.data, labels);
  }

  void badMagic() {
    const std::string p = path("magic.idx");
    write_plain(p, {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 1, 7});
    expect_error<FormatError>([&] { read_idx(p); },
                              {QString::fromStdString(p), "bad magic 0x12340801"});
    // Gzip that decompresses to something that is not IDX reads the same way.
    const std::string g = path("magic.gz");
    write_gzip(g, {'h', 'e', 'l', 'l', 'o', '\n'});
    expect_error<FormatError>([&] { read_idx(g); }, {QString::fromStdString(g), "bad magic"});
  }

  void wrongTypeByte() {
    const std::string p = path("type.idx");
    // 0x0D is IDX's float type: valid IDX, but not something we read.
    write_plain(p, concat(idx_header({2}, 0x0D), {0, 0, 0, 0, 0, 0, 0, 0}));
    expect_error<FormatError>([&] { read_idx(p); },
                              {QString::fromStdString(p), "bad magic 0x00000d01", "type 0x0d"});
  }

  void badDimCount() {
    const std::string zero = path("dims0.idx");
    write_plain(zero, {0, 0, 8, 0});
    expect_error<FormatError>([&] { read_idx(zero); },
                              {QString::fromStdString(zero), "0 dimensions"});
    const std::string many = path("dims9.idx");
    write_plain(many, idx_header({1, 1, 1, 1, 1, 1, 1, 1, 1}));
    expect_error<FormatError>([&] { read_idx(many); },
                              {QString::fromStdString(many), "9 dimensions"});
  }

  void hugeHeaderIsRefused() {
    // A garbage header must not turn into a multi-gigabyte allocation.
    const std::string p = path("huge.idx");
    write_plain(p, concat(idx_header({60000, 60000, 28}), {1, 2, 3}));
    expect_error<FormatError>([&] { read_idx(p); }, {QString::fromStdString(p), "refusing"});
  }

  void truncatedData_data() { roundTrip_data(); }
  void truncatedData() {
    QFETCH(bool, gzip);
    const std::string p = path(gzip ? "short.idx.gz" : "short.idx");
    const auto bytes = concat(idx_header({10, 3}), std::vector<uint8_t>(17, 5));
    gzip ? write_gzip(p, bytes) : write_plain(p, bytes);
    expect_error<FormatError>([&] { read_idx(p); },
                              {QString::fromStdString(p), "truncated data", "30 bytes", "has 17"});
  }

  void trailingBytes_data() { roundTrip_data(); }
  void trailingBytes() {
    QFETCH(bool, gzip);
    const std::string p = path(gzip ? "long.idx.gz" : "long.idx");
    const auto bytes = concat(idx_header({4}), {1, 2, 3, 4, 5, 6});
    gzip ? write_gzip(p, bytes) : write_plain(p, bytes);
    expect_error<FormatError>([&] { read_idx(p); },
                              {QString::fromStdString(p), "2 trailing bytes", "has 6"});
  }

  void truncatedHeader() {
    const std::string tiny = path("tiny.idx");
    write_plain(tiny, {0, 0});
    expect_error<FormatError>([&] { read_idx(tiny); },
                              {QString::fromStdString(tiny), "truncated header"});
    // Magic promises 3 dims, only one and a half are there.
    const std::string cut = path("cut.idx");
    write_plain(cut, {0, 0, 8, 3, 0, 0, 0, 9, 0, 0});
    expect_error<FormatError>(
        [&] { read_idx(cut); },
        {QString::fromStdString(cut), "truncated header", "expected 16 bytes", "got 10"});
    const std::string empty = path("empty.idx");
    write_plain(empty, {});
    expect_error<FormatError>([&] { read_idx(empty); }, {"truncated header", "got 0"});
  }

  void corruptGzip() {
    // Enough data that the damage lands in the compressed payload, well past the gzip header.
    std::vector<uint8_t> values(20000);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>((i * i) % 251);
    const auto bytes = concat(idx_header({100, 200}), values);
    const std::string good = path("good.gz");
    write_gzip(good, bytes);
    QCOMPARE(read_idx(good).data, values);
    const auto gz = read_bytes(good);
    QVERIFY(gz.size() > 100);

    // Flipped bits in the middle of the deflate stream.
    auto flipped = gz;
    for (size_t i = gz.size() / 2; i < gz.size() / 2 + 8; ++i) flipped[i] ^= 0x5A;
    const std::string bad = path("flipped.gz");
    write_plain(bad, flipped);
    expect_error<FormatError>([&] { read_idx(bad); },
                              {QString::fromStdString(bad), "corrupt gzip"});

    // A damaged CRC trailer: the payload inflates fine, the check must still catch it.
    auto crc = gz;
    crc[crc.size() - 6] ^= 0xFF;
    const std::string badcrc = path("crc.gz");
    write_plain(badcrc, crc);
    expect_error<FormatError>([&] { read_idx(badcrc); },
                              {QString::fromStdString(badcrc), "corrupt gzip"});

    // A gzip file cut in half (an interrupted download).
    const std::string half = path("half.gz");
    write_plain(half, std::vector<uint8_t>(gz.begin(), gz.begin() + gz.size() / 2));
    expect_error<FormatError>([&] { read_idx(half); },
                              {QString::fromStdString(half), "corrupt gzip", "unexpected end"});

    // Only the 8-byte trailer (CRC and length) missing: every IDX byte arrives, yet the stream is
    // incomplete and must not be accepted.
    const std::string notrailer = path("notrailer.gz");
    write_plain(notrailer, std::vector<uint8_t>(gz.begin(), gz.end() - 8));
    expect_error<FormatError>([&] { read_idx(notrailer); },
                              {QString::fromStdString(notrailer), "corrupt gzip"});
  }

  void missingFile() {
    const std::string p = path("no-such-file.idx.gz");
    expect_error<IoError>([&] { read_idx(p); }, {QString::fromStdString(p), "no such file"});
    expect_error<IoError>([&] { read_idx(dir_.path().toStdString()); }, {"directory"});
  }
};

QTEST_APPLESS_MAIN(TestIdxReader)
#include "tst_idx_reader.moc"
