// Run recordings: write/read round trips across blocks, a file cut at every byte of its last block,
// corrupt blocks (checksum, block magic, frames), bad files, and reading while the writer appends.
#include <QtTest>

#include <QTemporaryDir>

#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/core/bytes.h"
#include "engine/core/error.h"
#include "net/recording.h"
#include "tests/common/files.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::net;
using shardlab::test::read_bytes;
using shardlab::test::write_bytes;
namespace tl = shardlab::telemetry;

namespace {

// HELLOs for 4 ranks, then events of every kind in turn, each with distinct values.
std::vector<Message> make_messages(int n) {
  std::vector<Message> out;
  for (int r = 0; r < 4 && static_cast<int>(out.size()) < n; ++r) {
    Hello h = test::grid_hello("job-rec", r, 4, 2, 1, 2);
    h.host = "host" + std::to_string(r);
    h.pid = 1000 + r;
    out.emplace_back(h);
  }
  for (int i = 0; static_cast<int>(out.size()) < n; ++i) {
    tl::Event e;
    e.rank = i % 4;
    e.seq = static_cast<uint64_t>(i);
    e.time = 1.7e9 + i * 0.125;
    switch (i % 7) {
      case 0:
        e.payload = tl::StepEvent{i + 1, 2.5 / (i + 1), 1e-3, 0.75, 1234.5, i % 2 == 0, 0.031 * i};
        break;
      case 1: {
        tl::MemoryEvent m;
        for (int c = 0; c < kMemCategories; ++c) {
          m.current[static_cast<size_t>(c)] = (c + 1) * 4096 + i;
          m.peak[static_cast<size_t>(c)] = (c + 2) * 4096 + i;
        }
        e.payload = m;
        break;
      }
      case 2:
        e.payload =
            tl::CollectiveEvent{"all_reduce", "dp[0]", 1 << 20, e.time - 0.01,
                                0.004,        200.5,   350.25,  7u + static_cast<uint64_t>(i),
                                i % 3 != 0};
        break;
      case 3:
        e.payload = tl::PhaseEvent{1, i % 5, i % 2 == 1 ? tl::Phase::backward : tl::Phase::forward,
                                   e.time - 0.02, e.time};
        break;
      case 4:
        e.payload = tl::HeartbeatEvent{};
        break;
      case 5:
        e.payload = tl::LogLineEvent{"log line " + std::to_string(i)};
        break;
      default:
        e.payload =
            tl::JobStateEvent{tl::JobState::running, i % 2 ? "" : "why " + std::to_string(i)};
        break;
    }
    out.emplace_back(e);
  }
  return out;
}

// Messages have no operator==; equal frames mean equal messages field by field.
void compare(const std::vector<Message>& got, const std::vector<Message>& want, size_t n) {
  QCOMPARE(got.size(), n);
  for (size_t i = 0; i < n; ++i)
    QVERIFY2(encode(got[i]) == encode(want[i]), qPrintable(QString("message %1 differs").arg(i)));
}

void put_u32(std::vector<uint8_t>& v, uint32_t x) {
  v.resize(v.size() + 4);
  std::memcpy(v.data() + v.size() - 4, &x, 4);
}

// The file header of a recording: "SLREC\0\0\0" and version 1.
std::vector<uint8_t> file_header(uint32_t version = 1) {
  std::vector<uint8_t> v = {'S', 'L', 'R', 'E', 'C', 0, 0, 0};
  put_u32(v, version);
  return v;
}

// A block around `payload` with a correct checksum and the given message count.
void append_block(std::vector<uint8_t>& file, const std::vector<uint8_t>& payload, uint32_t count) {
  put_u32(file, 0x314B4C42);
  put_u32(file, static_cast<uint32_t>(payload.size()));
  put_u32(file, count);
  put_u32(file, crc32_of(payload.data(), payload.size()));
  file.insert(file.end(), payload.begin(), payload.end());
}

// Records `msgs` to `path` in blocks of 10 messages; returns the file's size after the first
// `split` of them, which for a multiple of 10 is the byte where the block after them starts.
uintmax_t record_in_blocks_of_10(const std::string& path, const std::vector<Message>& msgs,
                                 size_t split) {
  RecordingWriter w(path, 10);
  for (size_t i = 0; i < split; ++i) w.append(msgs[i]);
  const uintmax_t size = std::filesystem::file_size(path);
  for (size_t i = split; i < msgs.size(); ++i) w.append(msgs[i]);
  return size;
}

}  // namespace

class TestRecording : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::string path(const char* name) const { return dir_.filePath(name).toStdString(); }

 private slots:
  // A write that fails part-way (here: the file-size limit, RLIMIT_FSIZE, hit in the middle of a
  // block) costs that block only: the blocks written before and after it read back whole, and
  // the recording is complete (before, the unwritten rest of the block stayed in stdio's buffer
  // and went out later, after the cut, corrupting every block that followed).
  void failedWriteLeavesLaterBlocksReadable() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("fsize.slrec").toStdString();
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG instead
    rlimit saved{};
    QVERIFY(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    auto log_event = [](int i, size_t len) {
      tl::Event e;
      e.rank = 0;
      e.seq = static_cast<uint64_t>(i);
      e.time = 1.0 + i;
      e.payload = tl::LogLineEvent{std::string(len, static_cast<char>('a' + i % 26))};
      return Message(e);
    };
    bool threw = false;
    {
      RecordingWriter w(path, 1);  // one message per block
      for (int i = 0; i < 5; ++i) w.append(log_event(i, 100));
      const auto size = std::filesystem::file_size(path);
      rlimit small = saved;
      small.rlim_cur = size + 200;
      QVERIFY(setrlimit(RLIMIT_FSIZE, &small) == 0);
      try {
        w.append(log_event(5, 3000));  // its block cannot fit: written in part, then fails
      } catch (const IoError&) {
        threw = true;
      }
      QVERIFY(setrlimit(RLIMIT_FSIZE, &saved) == 0);
      for (int i = 6; i < 11; ++i) w.append(log_event(i, 100));
    }
    std::signal(SIGXFSZ, SIG_DFL);
    QVERIFY2(threw, "the failed write was not reported");
    const RecordingContents rec = read_recording(path);
    QVERIFY2(rec.complete, rec.note.c_str());
    QCOMPARE(rec.messages.size(), size_t{10});
    std::vector<uint64_t> seqs;
    for (const Message& m : rec.messages) seqs.push_back(std::get<tl::Event>(m).seq);
    QCOMPARE(seqs, (std::vector<uint64_t>{0, 1, 2, 3, 4, 6, 7, 8, 9, 10}));
  }

  void roundTripAcrossBlocks() {
    const auto msgs = make_messages(75);
    const std::string p = path("round.slrec");
    {
      RecordingWriter w(p, 8);
      QCOMPARE(w.path(), p);
      for (const auto& m : msgs) w.append(m);
      QCOMPARE(w.messages(), uint64_t{75});
    }
    const RecordingContents c = read_recording(p);
    QVERIFY2(c.complete, c.note.c_str());
    QVERIFY(c.note.empty());
    compare(c.messages, msgs, msgs.size());
    // And a few fields directly, in case encode() were lossy in the same way both times.
    const auto& h = std::get<Hello>(c.messages[2]);
    QCOMPARE(h.job_id, std::string("job-rec"));
    QCOMPARE(h.rank, 2);
    QCOMPARE(h.pp_i, 1);
    QCOMPARE(h.pid, int64_t{1002});
    const auto& e = std::get<tl::Event>(c.messages[4]);
    const auto& s = std::get<tl::StepEvent>(e.payload);
    QCOMPARE(s.step, int64_t{1});
    QCOMPARE(s.loss, 2.5);
    QCOMPARE(e.time, 1.7e9);
    const auto& col = std::get<tl::CollectiveEvent>(std::get<tl::Event>(c.messages[6]).payload);
    QCOMPARE(col.op, std::string("all_reduce"));
    QCOMPARE(col.busbw, 350.25);
  }

  // Recordings made by builds of protocol versions 1 and 2 still read: a version-2 HELLO (no
  // nonce), a version-1 COLLECTIVE (no wait, no last rank) and a version-2 STEP, written here byte
  // by byte from the version-3 frames (the encoder writes only version 3).
  void olderProtocolVersionsStillRead() {
    auto set_version = [](std::vector<uint8_t>& f, uint16_t v) {
      f[4] = static_cast<uint8_t>(v);
      f[5] = static_cast<uint8_t>(v >> 8);
    };
    auto cut = [](std::vector<uint8_t>& f, size_t bytes) {
      f.resize(f.size() - bytes);
      const auto length = static_cast<uint32_t>(f.size() - 12);
      std::memcpy(f.data() + 8, &length, 4);
    };
    Hello h = test::grid_hello("old-job", 1, 2, 1, 1, 2);
    h.version = 2;
    auto hello = encode(Message(h));
    cut(hello, 2 + 32);  // the lowest version and the nonce came with version 3
    set_version(hello, 2);
    tl::CollectiveEvent col;
    col.op = "all_reduce";
    col.group = "dp";
    col.bytes = 4096;
    col.busbw = 12.5;
    col.ok = true;
    tl::Event ce{1, 0, 1.7e9, col};
    auto collective = encode(Message(ce), 4);  // array and unit came with version 5
    cut(collective, 8 + 4);                    // wait and last rank with version 2
    set_version(collective, 1);
    tl::StepEvent st;
    st.step = 7;
    st.loss = 0.75;
    tl::Event se{1, 1, 1.7e9 + 1, st};
    auto step = encode(Message(se));
    set_version(step, 2);

    std::vector<uint8_t> payload = hello;
    payload.insert(payload.end(), collective.begin(), collective.end());
    payload.insert(payload.end(), step.begin(), step.end());
    std::vector<uint8_t> file = file_header();
    append_block(file, payload, 3);
    const std::string p = path("old-versions.slrec");
    {
      std::ofstream out(p, std::ios::binary);
      out.write(reinterpret_cast<const char*>(file.data()),
                static_cast<std::streamsize>(file.size()));
    }
    const RecordingContents c = read_recording(p);
    QVERIFY2(c.complete, c.note.c_str());
    QCOMPARE(c.messages.size(), size_t{3});
    const auto& rh = std::get<Hello>(c.messages[0]);
    QCOMPARE(rh.job_id, std::string("old-job"));
    QCOMPARE(rh.rank, 1);
    QCOMPARE(rh.version, uint16_t{2});
    QCOMPARE(rh.min_version, uint16_t{2});
    const auto& rc = std::get<tl::CollectiveEvent>(std::get<tl::Event>(c.messages[1]).payload);
    QCOMPARE(rc.op, std::string("all_reduce"));
    QCOMPARE(rc.busbw, 12.5);
    QCOMPARE(rc.wait, -1.0);  // unknown in version 1
    QCOMPARE(rc.last_rank, -1);
    const auto& rs = std::get<tl::StepEvent>(std::get<tl::Event>(c.messages[2]).payload);
    QCOMPARE(rs.step, int64_t{7});
    QCOMPARE(rs.loss, 0.75);
  }

  void emptyRecording() {
    const std::string p = path("empty.slrec");
    { RecordingWriter w(p); }
    const RecordingContents c = read_recording(p);
    QVERIFY(c.complete);
    QVERIFY(c.messages.empty());
    QCOMPARE(std::filesystem::file_size(p), uintmax_t{12});
  }

  void blockLayout() {
    // One block of three frames: header fields as documented.
    const auto msgs = make_messages(7);
    const std::string p = path("layout.slrec");
    {
      RecordingWriter w(p);
      for (int i = 4; i < 7; ++i) w.append(msgs[static_cast<size_t>(i)]);
    }
    const auto bytes = read_bytes(p);
    QCOMPARE(std::memcmp(bytes.data(), "SLREC\0\0\0", 8), 0);
    QCOMPARE(std::memcmp(bytes.data() + 12, "BLK1", 4), 0);
    uint32_t payload = 0, count = 0, crc = 0;
    std::memcpy(&payload, bytes.data() + 16, 4);
    std::memcpy(&count, bytes.data() + 20, 4);
    std::memcpy(&crc, bytes.data() + 24, 4);
    QCOMPARE(count, 3u);
    QCOMPARE(size_t{payload}, bytes.size() - 28);
    QCOMPARE(crc, crc32_of(bytes.data() + 28, payload));
    std::vector<uint8_t> frames;
    for (int i = 4; i < 7; ++i) encode_into(msgs[static_cast<size_t>(i)], frames);
    QVERIFY(std::equal(frames.begin(), frames.end(), bytes.begin() + 28, bytes.end()));
  }

  void truncatedAtEveryOffsetOfLastBlock() {
    const auto msgs = make_messages(40);
    const std::string p = path("trunc.slrec");
    const uintmax_t last_start = record_in_blocks_of_10(p, msgs, 30);
    const auto bytes = read_bytes(p);
    QVERIFY(bytes.size() > last_start + 16);
    const std::string cut = path("cut.slrec");
    for (size_t n = last_start + 1; n < bytes.size(); ++n) {
      write_bytes(cut, bytes, n);
      const RecordingContents c = read_recording(cut);
      QVERIFY2(!c.complete, qPrintable(QString("cut at %1").arg(n)));
      QVERIFY2(c.note.find("incomplete") != std::string::npos, c.note.c_str());
      QVERIFY2(c.note.find(std::to_string(last_start)) != std::string::npos, c.note.c_str());
      compare(c.messages, msgs, 30);
    }
    // Cut exactly at a block boundary: a shorter, but whole, recording.
    write_bytes(cut, bytes, last_start);
    const RecordingContents c = read_recording(cut);
    QVERIFY(c.complete);
    compare(c.messages, msgs, 30);
  }

  void corruptPayloadStopsBeforeBlock() {
    const auto msgs = make_messages(30);
    const std::string p = path("corrupt.slrec");
    const uintmax_t second = record_in_blocks_of_10(p, msgs, 10);
    auto bytes = read_bytes(p);
    bytes[second + 16 + 20] ^= 0x40;
    write_bytes(p, bytes, bytes.size());
    const RecordingContents c = read_recording(p);
    QVERIFY(!c.complete);
    QVERIFY2(c.note.find("corrupt") != std::string::npos, c.note.c_str());
    QVERIFY2(c.note.find("checksum") != std::string::npos, c.note.c_str());
    QVERIFY2(c.note.find(std::to_string(second)) != std::string::npos, c.note.c_str());
    compare(c.messages, msgs, 10);
  }

  // A block whose message count is absurd but whose checksum is right (anyone can compute a
  // CRC) is refused from its header: the count never sizes an allocation (before, 4 billion
  // messages were reserved).
  void absurdMessageCountIsRefused() {
    const auto msgs = make_messages(3);
    std::vector<uint8_t> payload;
    for (const auto& m : msgs) encode_into(m, payload);
    std::vector<uint8_t> file = file_header();
    append_block(file, payload, 3);
    append_block(file, payload, 0xFFFFFFFFu);
    const std::string p = path("count.slrec");
    write_bytes(p, file, file.size());
    RecordingContents c;
    try {
      c = read_recording(p);
    } catch (const std::exception& e) {
      QFAIL(qPrintable(QString("read_recording threw: ") + e.what()));
    }
    QVERIFY(!c.complete);
    QCOMPARE(c.messages.size(), size_t{3});
    QVERIFY2(c.note.find("implausible header") != std::string::npos, c.note.c_str());
  }

  void corruptBlockMagic() {
    const auto msgs = make_messages(20);
    const std::string p = path("blockmagic.slrec");
    {
      RecordingWriter w(p, 10);
      for (const auto& m : msgs) w.append(m);
    }
    auto bytes = read_bytes(p);
    bytes[12] = 'X';
    write_bytes(p, bytes, bytes.size());
    const RecordingContents c = read_recording(p);
    QVERIFY(!c.complete);
    QVERIFY(c.messages.empty());
    QVERIFY2(c.note.find("corrupt block at byte 12") != std::string::npos, c.note.c_str());
    QVERIFY2(c.note.find("magic") != std::string::npos, c.note.c_str());
  }

  void framesThatDoNotDecode() {
    const auto msgs = make_messages(6);
    std::vector<uint8_t> good;
    for (const auto& m : msgs) encode_into(m, good);

    // Garbage with a valid checksum.
    std::vector<uint8_t> file = file_header();
    append_block(file, good, 6);
    const size_t bad_at = file.size();
    append_block(file, std::vector<uint8_t>(40, 0xAB), 1);
    const std::string p = path("frames.slrec");
    write_bytes(p, file, file.size());
    RecordingContents c = read_recording(p);
    QVERIFY(!c.complete);
    QVERIFY2(c.note.find("corrupt block at byte " + std::to_string(bad_at)) != std::string::npos,
             c.note.c_str());
    compare(c.messages, msgs, 6);

    // Valid frames, but the count says one more.
    file = file_header();
    append_block(file, good, 7);
    write_bytes(p, file, file.size());
    c = read_recording(p);
    QVERIFY(!c.complete);
    QVERIFY(c.messages.empty());
    QVERIFY2(c.note.find("corrupt block at byte 12") != std::string::npos, c.note.c_str());

    // Valid frames, but the count says one fewer: bytes left over.
    file = file_header();
    append_block(file, good, 5);
    write_bytes(p, file, file.size());
    c = read_recording(p);
    QVERIFY(!c.complete);
    QVERIFY(c.messages.empty());
    QVERIFY2(c.note.find("corrupt") != std::string::npos, c.note.c_str());
  }

  void badFileMagicOrVersion() {
    const std::string p = path("notrec.slrec");
    std::vector<uint8_t> bytes = file_header();
    bytes[0] = 'X';
    write_bytes(p, bytes, bytes.size());
    QVERIFY_THROWS_EXCEPTION(FormatError, read_recording(p));

    bytes = file_header(2);
    write_bytes(p, bytes, bytes.size());
    try {
      read_recording(p);
      QFAIL("version 2 accepted");
    } catch (const FormatError& e) {
      QVERIFY2(std::string(e.what()).find("version 2") != std::string::npos, e.what());
    }

    bytes = {'S', 'L', 'R'};
    write_bytes(p, bytes, bytes.size());
    QVERIFY_THROWS_EXCEPTION(FormatError, read_recording(p));
  }

  void missingFileNamesPath() {
    const std::string p = path("no/such/dir/run.slrec");
    try {
      read_recording(p);
      QFAIL("missing file read");
    } catch (const IoError& e) {
      QVERIFY2(std::string(e.what()).find(p) != std::string::npos, e.what());
    }
    try {
      RecordingWriter w(p);
      QFAIL("writer created a file in a missing directory");
    } catch (const IoError& e) {
      QVERIFY2(std::string(e.what()).find(p) != std::string::npos, e.what());
    }
  }

  void readWhileWriting() {
    const auto msgs = make_messages(23);
    const std::string p = path("live.slrec");
    RecordingWriter w(p, 5);
    QVERIFY(read_recording(p).messages.empty());
    for (size_t i = 0; i < 12; ++i) w.append(msgs[i]);
    // Two full blocks went out on their own; two messages wait in the buffer.
    RecordingContents c = read_recording(p);
    QVERIFY(c.complete);
    compare(c.messages, msgs, 10);
    w.flush();
    c = read_recording(p);
    QVERIFY(c.complete);
    compare(c.messages, msgs, 12);
    w.flush();  // nothing pending: no empty block
    QCOMPARE(read_recording(p).messages.size(), size_t{12});
    for (size_t i = 12; i < 23; ++i) w.append(msgs[i]);
    w.flush();
    c = read_recording(p);
    QVERIFY(c.complete);
    compare(c.messages, msgs, 23);
    QCOMPARE(w.messages(), uint64_t{23});
  }

  void destructorFlushes() {
    const auto msgs = make_messages(3);
    const std::string p = path("dtor.slrec");
    {
      RecordingWriter w(p);
      for (const auto& m : msgs) w.append(m);
      QVERIFY(read_recording(p).messages.empty());
    }
    const RecordingContents c = read_recording(p);
    QVERIFY(c.complete);
    compare(c.messages, msgs, 3);
  }

  void createTruncatesExisting() {
    const auto msgs = make_messages(5);
    const std::string p = path("again.slrec");
    {
      RecordingWriter w(p);
      for (const auto& m : msgs) w.append(m);
    }
    { RecordingWriter w(p); }
    QVERIFY(read_recording(p).messages.empty());
  }
};

QTEST_GUILESS_MAIN(TestRecording)
#include "tst_recording.moc"
