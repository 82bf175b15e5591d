// The pieces of the TensorBoard export (net/tensorboard.h) against published vectors: CRC-32C
// (the CRC catalogue's check value and RFC 3720 appendix B.4's), the protobuf varint examples of
// protobuf.dev's encoding guide, the TFRecord framing, an Event's bytes field by field, and the
// folder layout. tests/cli/tst_export_files reads real exports with an independent reader.
#include <QtTest>

#include <filesystem>
#include <string>

#include "engine/core/error.h"
#include "net/tensorboard.h"
#include "tests/common/files.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tf = shardlab::net::tfevents;

namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

std::string varint(uint64_t v) {
  std::string s;
  tf::append_varint(s, v);
  return s;
}

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + static_cast<size_t>(i)]);
  return v;
}

}  // namespace

class TestTensorBoard : public QObject {
  Q_OBJECT
 private slots:
  void crc32cKnownValues() {
    QCOMPARE(tf::crc32c("123456789"), 0xE3069283u);              // catalogue "check"
    QCOMPARE(tf::crc32c(std::string(32, '\0')), 0x8A9136AAu);    // RFC 3720 B.4
    QCOMPARE(tf::crc32c(std::string(32, '\xff')), 0x62A8AB43u);  // RFC 3720 B.4
    QCOMPARE(tf::crc32c(""), 0u);
    const uint32_t c = tf::crc32c("123456789");
    QCOMPARE(tf::masked_crc32c("123456789"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  }

  void varints() {
    QCOMPARE(varint(1), bytes({0x01}));
    QCOMPARE(varint(150), bytes({0x96, 0x01}));  // protobuf.dev's example
    QCOMPARE(varint(300), bytes({0xAC, 0x02}));
    // -1 as int64: ten bytes.
    QCOMPARE(varint(static_cast<uint64_t>(int64_t{-1})),
             bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  }

  void recordFraming() {
    const std::string data = "hello";
    const std::string r = tf::record(data);
    QCOMPARE(r.size(), size_t{8 + 4 + 5 + 4});
    QCOMPARE(r.substr(0, 8), bytes({5, 0, 0, 0, 0, 0, 0, 0}));
    QCOMPARE(le32(r, 8), tf::masked_crc32c(r.substr(0, 8)));
    QCOMPARE(r.substr(12, 5), data);
    QCOMPARE(le32(r, 17), tf::masked_crc32c(data));
  }

  void eventBytes() {
    // wall_time 1.0 (field 1, fixed64), step 3 (field 2, varint), summary (field 5) holding one
    // Value (field 1) {tag "a" (field 1), simple_value 0.5f (field 2, fixed32)}.
    const std::string e = tf::scalars_event(1.0, 3, {{"a", 0.5f}});
    const std::string want = bytes({0x09, 0,    0,   0, 0,   0, 0, 0xF0, 0x3F,  // 1.0 LE
                                    0x10, 0x03,                                 // step
                                    0x2A, 0x0A,                                 // summary, 10 bytes
                                    0x0A, 0x08,                                 // value, 8 bytes
                                    0x0A, 0x01, 'a',                            // tag
                                    0x15, 0,    0,   0, 0x3F});                 // 0.5f LE
    QCOMPARE(e, want);
    const std::string v = tf::file_version_event(0.0);
    QCOMPARE(v.substr(9), bytes({0x1A, 13}) + "brain.Event:2");
    QCOMPARE(tf::file_name(1700000000.9, "node 7/a"),
             std::string("events.out.tfevents.1700000000.node_7_a"));
  }

  void oneRunPerRank() {
    QTemporaryDir tmp;
    const std::string dir = (tmp.path() + "/tb").toStdString();
    telemetry::EvalEvent eval;
    eval.step = 1;
    eval.loss = 1.5;
    std::vector<Message> m(2);
    m[0] = test::make_event(0, 100.0, telemetry::StepEvent{1, 2.0, 0.1, 1.0, 10, false, 0.5});
    m[1] = test::make_event(3, 101.0, eval);
    const TensorBoardExport ex = write_tensorboard(m, dir);
    QCOMPARE(ex.files.size(), size_t{2});
    QCOMPARE(ex.events, uint64_t{2});
    QVERIFY(contains_path(ex.files[0], "/tb/rank0/events.out.tfevents.100."));
    QVERIFY(contains_path(ex.files[1], "/tb/rank3/events.out.tfevents.101."));
    // The file: the file_version record, then the step's.
    const std::vector<uint8_t> f = test::read_bytes(ex.files[0]);
    const std::string s(f.begin(), f.end());
    const std::string first = tf::record(tf::file_version_event(100.0));
    QCOMPARE(s.substr(0, first.size()), first);
    QVERIFY(s.size() > first.size() + 16);
    // A path under a file cannot be a folder.
    QVERIFY_THROWS_EXCEPTION(shardlab::IoError, write_tensorboard(m, ex.files[0] + "/sub"));
  }

 private:
  static bool contains_path(const std::string& path, const std::string& part) {
    return path.find(part) != std::string::npos;
  }
};

QTEST_GUILESS_MAIN(TestTensorBoard)
#include "tst_tensorboard.moc"
