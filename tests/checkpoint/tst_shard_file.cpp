// One rank's shard file (engine/checkpoint/shard_file.h): encode_shard -> file -> read_shard_header
// + read_shard_tensor round trips bit for bit; encode refuses bad runs and tensors; crafted files
// (headers built here byte by byte, checksums from zlib directly) are refused with a FormatError
// that names the file.
#include <QtTest>

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>

#include "engine/checkpoint/shard_file.h"
#include "engine/core/error.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/common/caught.h"
#include "tests/common/files.h"
#include "tests/common/text.h"

using namespace shardlab;
using namespace shardlab::test;

namespace {

void append_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));  // little-endian
}

void append_floats(std::vector<uint8_t>& b, const std::vector<float>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  b.insert(b.end(), p, p + v.size() * sizeof(float));
}

// A shard file crafted by hand: magic | u32 length | header | u32 crc (zlib's, unless given) |
// data.
std::vector<uint8_t> craft(const std::string& header, const std::vector<uint8_t>& data = {},
                           const char* magic = "SLSHRD2", std::optional<uint32_t> crc = {},
                           std::optional<uint32_t> length = {}) {
  std::vector<uint8_t> b(magic, magic + 7);
  b.push_back(0);
  append_u32(b, length ? *length : uint32_t(header.size()));
  b.insert(b.end(), header.begin(), header.end());
  append_u32(b, crc ? *crc : zlib_crc(header.data(), header.size()));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// A header JSON with `runs` (JSON text) and tensors (JSON text).
std::string header_json(const std::string& runs, const std::string& tensors) {
  std::string s = R"({"rank": 1, "step": 5, "progress": {}, "runs": )";
  s += runs;
  s += R"(, "tensors": )";
  s += tensors;
  s += "}";
  return s;
}

std::string tensor_json(const std::string& name, uint64_t offset, int64_t count,
                        const std::string& crc) {
  std::string s = R"({"name": ")";
  s += name;
  s += R"(", "offset": )";
  s += std::to_string(offset);
  s += R"(, "count": )";
  s += std::to_string(count);
  s += R"(, "crc32": ")";
  s += crc;
  s += R"("})";
  return s;
}

// "[a, b, ...]"
std::string list(std::initializer_list<std::string> items) {
  std::string s = "[";
  for (const std::string& i : items) {
    if (s.size() > 1) s += ", ";
    s += i;
  }
  s += "]";
  return s;
}

std::string crc_of_floats(const std::vector<float>& v) {
  return hex8(zlib_crc(v.data(), v.size() * sizeof(float)));
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

using TensorList = std::vector<std::pair<std::string, std::span<const float>>>;

// Whether `msg` is one printable line: not empty, no C0 control character (what every error
// message must be whatever the file held; tests/fuzz/fuzz_common.h, check_message()).
bool one_printable_line(const std::string& msg) {
  return !msg.empty() && std::none_of(msg.begin(), msg.end(),
                                      [](char c) { return static_cast<unsigned char>(c) < 0x20; });
}

}  // namespace

class TestShardFile : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  int counter_ = 0;

  // A fresh path in the temporary directory, holding `b`.
  std::string write(const std::vector<uint8_t>& b) {
    const std::string path =
        tmp_.path().toStdString() + "/shard-" + std::to_string(counter_++) + ".bin";
    write_bytes(path, b);
    return path;
  }

  // read_shard_header of a file holding `b`, which must fail with a FormatError naming the file
  // and containing `part`.
  void expect_header_error(const std::vector<uint8_t>& b, const std::string& part) {
    const std::string path = write(b);
    const std::string msg =
        error_of<FormatError>([&] { (void)read_shard_header(path, uint64_t(b.size())); });
    VERIFY_CONTAINS(msg, part);
    VERIFY_CONTAINS(msg, path);
  }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  void roundTripTwoTensors() {
    ShardHeader h;
    h.rank = 3;
    h.step = 100;
    h.progress = {{"epoch", 2}, {"data", {{"cursor", 17}, {"order", {3, 1, 2}}}}, {"lr", 0.5}};
    h.runs = {{2, 3}, {10, 1}, {20, 4}};  // 8 elements
    const std::vector<float> param = {1.5f,
                                      -0.0f,
                                      std::numeric_limits<float>::infinity(),
                                      from_bits(0x7fc00123u),  // a NaN with a payload
                                      from_bits(0x00000001u),  // the smallest subnormal
                                      -3.25e-7f,
                                      std::numeric_limits<float>::max(),
                                      42.0f};
    std::vector<float> exp_avg(8);
    for (size_t i = 0; i < 8; ++i) exp_avg[i] = from_bits(0x3f800000u + uint32_t(i) * 0x01010101u);
    const std::vector<uint8_t> bytes =
        encode_shard(h, TensorList{{"param", param}, {"exp_avg", exp_avg}});

    // The layout on disk, checked by hand: magic, header length, header CRC, the data back to back.
    QCOMPARE(std::memcmp(bytes.data(), "SLSHRD2\0", 8), 0);
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + 8, 4);
    QCOMPARE(bytes.size(), size_t(16) + len + 2 * 8 * sizeof(float));
    uint32_t stored_crc = 0;
    std::memcpy(&stored_crc, bytes.data() + 12 + len, 4);
    QCOMPARE(stored_crc, zlib_crc(bytes.data() + 12, len));
    QCOMPARE(std::memcmp(bytes.data() + 16 + len, param.data(), 32), 0);
    QCOMPARE(std::memcmp(bytes.data() + 16 + len + 32, exp_avg.data(), 32), 0);

    const std::string path = write(bytes);
    const ShardHeader r = read_shard_header(path, uint64_t(bytes.size()));
    QCOMPARE(r.rank, 3);
    QCOMPARE(r.step, int64_t(100));
    QCOMPARE(r.progress, h.progress);
    QCOMPARE(r.progress["data"]["order"], nlohmann::json({3, 1, 2}));
    QCOMPARE(r.runs.size(), size_t(3));
    QCOMPARE(r.runs[0], (GlobalRun{2, 3}));
    QCOMPARE(r.runs[1], (GlobalRun{10, 1}));
    QCOMPARE(r.runs[2], (GlobalRun{20, 4}));
    QCOMPARE(r.elements(), int64_t(8));
    QCOMPARE(r.data_start, uint64_t(16) + len);
    QCOMPARE(r.tensors.size(), size_t(2));
    QCOMPARE(r.tensors[0].name, std::string("param"));
    QCOMPARE(r.tensors[0].offset, uint64_t(0));
    QCOMPARE(r.tensors[0].count, int64_t(8));
    QCOMPARE(r.tensors[0].crc32, zlib_crc(param.data(), 32));
    QCOMPARE(r.tensors[1].name, std::string("exp_avg"));
    QCOMPARE(r.tensors[1].offset, uint64_t(32));
    QCOMPARE(r.tensors[1].count, int64_t(8));
    QCOMPARE(r.tensors[1].crc32, zlib_crc(exp_avg.data(), 32));
    QVERIFY(r.find("exp_avg") == &r.tensors[1]);
    QVERIFY(r.find("exp_avg_sq") == nullptr);

    // Read in the other order: each tensor stands alone.
    const std::vector<float> a = read_shard_tensor(path, r, "exp_avg");
    const std::vector<float> p = read_shard_tensor(path, r, "param");
    QVERIFY(bit_equal(p, param));
    QVERIFY(bit_equal(a, exp_avg));

    const std::string msg =
        error_of<FormatError>([&] { (void)read_shard_tensor(path, r, "exp_avg_sq"); });
    VERIFY_CONTAINS(msg, "holds no tensor exp_avg_sq");
    VERIFY_CONTAINS(msg, path);
  }

  void roundTripEmptyShard() {
    ShardHeader h;
    h.rank = 7;
    h.step = 0;
    h.progress = nlohmann::json::object();
    const std::vector<float> none;
    const std::vector<uint8_t> bytes = encode_shard(h, TensorList{{"param", none}, {"m", none}});
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + 8, 4);
    QCOMPARE(bytes.size(), size_t(16) + len);  // no data at all
    const std::string path = write(bytes);
    const ShardHeader r = read_shard_header(path, uint64_t(bytes.size()));
    QCOMPARE(r.rank, 7);
    QCOMPARE(r.step, int64_t(0));
    QVERIFY(r.runs.empty());
    QCOMPARE(r.elements(), int64_t(0));
    QCOMPARE(r.tensors.size(), size_t(2));
    QCOMPARE(r.tensors[0].count, int64_t(0));
    QCOMPARE(r.tensors[1].offset, uint64_t(0));
    QCOMPARE(r.tensors[0].crc32, 0u);  // CRC-32 of nothing
    QVERIFY(read_shard_tensor(path, r, "param").empty());
    QVERIFY(read_shard_tensor(path, r, "m").empty());

    // And with no tensors at all.
    const std::vector<uint8_t> bare = encode_shard(h, {});
    const std::string path2 = write(bare);
    const ShardHeader r2 = read_shard_header(path2, uint64_t(bare.size()));
    QVERIFY(r2.runs.empty());
    QVERIFY(r2.tensors.empty());
  }

  void encodeRefusesBadRunsAndTensors() {
    const std::vector<float> four(4, 1.0f);
    const auto refuse = [&](std::vector<GlobalRun> runs, std::span<const float> values,
                            const std::string& part) {
      ShardHeader h;
      h.runs = std::move(runs);
      const std::string msg = error_of<InvalidArgument>([&] {
        (void)encode_shard(h, TensorList{{"param", values}});
      });
      VERIFY_CONTAINS(msg, part);
    };
    refuse({{10, 2}, {0, 2}}, four, "run 1 starts at 0");                          // unsorted
    refuse({{0, 3}, {2, 1}}, four, "run 1 starts at 2");                           // overlapping
    refuse({{0, 4}, {5, 0}}, four, "run 1 is [5, +0)");                            // empty run
    refuse({{-1, 4}}, four, "run 0 is [-1, +4)");                                  // negative start
    refuse({{0, 2}, {5, 3}}, four, "tensor param has 4 values, the runs hold 5");  // wrong length
    refuse({}, four, "tensor param has 4 values, the runs hold 0");
    refuse({{0, std::numeric_limits<int64_t>::max()}}, four, "run 0");  // overflowing

    // Touching runs are fine; so is the second tensor being checked too.
    ShardHeader ok;
    ok.runs = {{0, 2}, {2, 2}};
    QCOMPARE(encode_shard(ok, TensorList{{"param", four}}).size() > 16 + 4 * 4, true);
    const std::vector<float> three(3, 0.0f);
    const std::string msg = error_of<InvalidArgument>([&] {
      (void)encode_shard(ok, TensorList{{"param", four}, {"exp_avg", three}});
    });
    VERIFY_CONTAINS(msg, "tensor exp_avg has 3 values");
  }

  void craftedFileReadsBack() {
    // The crafting helpers themselves agree with the reader on a well-formed file.
    const std::vector<float> v = {1.0f, 2.0f, 3.0f};
    std::vector<uint8_t> data;
    append_floats(data, v);
    const auto b =
        craft(header_json("[[4, 3]]", list({tensor_json("param", 0, 3, crc_of_floats(v))})), data);
    const std::string path = write(b);
    const ShardHeader h = read_shard_header(path, b.size());
    QCOMPARE(h.runs.size(), size_t(1));
    QCOMPARE(h.runs[0], (GlobalRun{4, 3}));
    QVERIFY(bit_equal(read_shard_tensor(path, h, "param"), v));
  }

  void badMagicAndFormat() {
    const std::string ok = header_json("[]", "[]");
    expect_header_error(craft(ok, {}, "XLSHRD2"), "bad magic");
    expect_header_error(craft(ok, {}, "SLSHRDX"), "shard format ? is not supported");
    std::vector<uint8_t> no_nul = craft(ok);
    no_nul[7] = '2';
    expect_header_error(no_nul, "bad magic");
    expect_header_error(craft(ok, {}, "SLSHRD3"), "shard format 3 is not supported");
    expect_header_error(craft(ok, {}, "SLSHRD1"), "shard format 1 is not supported");
    expect_header_error({'S', 'L', 'S'}, "truncated");  // shorter than the magic
    expect_header_error({}, "truncated");
  }

  void headerLengthAndChecksum() {
    const std::string ok = header_json("[]", "[]");
    // Length past the end of the file.
    expect_header_error(craft(ok, {}, "SLSHRD2", {}, uint32_t(ok.size() + 1)), "does not fit the");
    expect_header_error(craft(ok, {}, "SLSHRD2", {}, 0xffffffffu), "header length 4294967295");
    // A file cut right after the header, before its CRC.
    std::vector<uint8_t> cut = craft(ok);
    cut.resize(cut.size() - 4);
    expect_header_error(cut, "does not fit the");
    // A wrong header CRC, and a flipped header byte under the right CRC.
    const uint32_t good = zlib_crc(ok.data(), ok.size());
    expect_header_error(craft(ok, {}, "SLSHRD2", good ^ 1u), "checksum mismatch in the header");
    std::vector<uint8_t> flipped = craft(ok);
    flipped[12 + 3] ^= 0x20;
    expect_header_error(flipped, "checksum mismatch in the header");
  }

  void malformedJson() {
    expect_header_error(craft("{\"rank\": 1, "), "malformed header");
    expect_header_error(craft(""), "malformed header");
    expect_header_error(craft("[1, 2]"), "malformed header");
    expect_header_error(craft(R"({"rank": 1, "step": 5, "progress": {}, "runs": []})"),
                        "malformed header");  // no tensors
    expect_header_error(craft(R"({"rank": "one", "step": 5, "progress": {}, "runs": [],
                                  "tensors": []})"),
                        "malformed header");
    expect_header_error(craft(header_json("[[0, 1, 2]]", "[]")), "a run is not [begin, count]");
    expect_header_error(craft(header_json("[5]", "[]")), "malformed header");
    expect_header_error(craft(header_json("[[\"a\", 1]]", "[]")), "malformed header");
    expect_header_error(craft(header_json("[]", R"([{"name": "param", "offset": 0}])")),
                        "malformed header");
    // No silent conversions: null or an object for a list, fractions, narrowing.
    expect_header_error(craft(header_json("null", "[]")), "runs and tensors must be arrays");
    expect_header_error(craft(header_json(R"({"x": [0, 2]})", "[]")),
                        "runs and tensors must be arrays");
    expect_header_error(craft(header_json("[]", "null")), "runs and tensors must be arrays");
    expect_header_error(craft(header_json("[[0.9, 2.7]]", "[]")), "is not an integer");
    expect_header_error(craft(R"({"rank": 4294967297, "step": 5, "progress": {}, "runs": [],
                                  "tensors": []})"),
                        "rank 4294967297 is too large");
  }

  // Values in the header are checked before use: "progress" nested deep enough to exhaust the
  // stack of a recursive copy is refused before parsing; a number beyond double's range names its
  // field.
  void headerNestingAndNumbersAreBounded() {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    const std::string header =
        R"({"rank": 1, "step": 5, "progress": )" + deep + R"(, "runs": [], "tensors": []})";
    expect_header_error(craft(header), "malformed header: nested deeper than 64 levels");
    expect_header_error(craft(R"({"rank": 1, "step": 5, "progress": {"loss": 1e400}, "runs": [],
                                  "tensors": []})"),
                        "malformed header: progress.loss: 1e400 is out of range (not a finite "
                        "number)");
    // Progress nested as deep as allowed still reads.
    const std::string ok = std::string(63, '[') + std::string(63, ']');
    const auto b =
        craft(R"({"rank": 1, "step": 5, "progress": )" + ok + R"(, "runs": [], "tensors": []})");
    const std::string path = write(b);
    QCOMPARE(read_shard_header(path, uint64_t(b.size())).step, int64_t(5));
  }

  // Bytes after the last tensor are under no CRC: refused.
  void trailingBytesAreRefused() {
    const std::vector<float> v{1.0f, 2.0f};
    std::vector<uint8_t> data;
    append_floats(data, v);
    data.push_back(0);
    expect_header_error(craft(header_json("[[0, 2]]", "[]"), data), "bytes after the header");
  }

  void malformedRuns() {
    // Overflowing int64, whatever a reader would add up.
    expect_header_error(craft(header_json("[[0, 9223372036854775807]]", "[]")),
                        "malformed header: run 0");
    expect_header_error(craft(header_json("[[9223372036854775807, 1]]", "[]")),
                        "malformed header: run 0");
    expect_header_error(craft(header_json("[[0, 4611686018427387904], [4611686018427387904, "
                                          "4611686018427387904]]",
                                          "[]")),
                        "malformed header: run 0");
    expect_header_error(craft(header_json("[[-5, 2]]", "[]")), "malformed header: run 0");
    expect_header_error(craft(header_json("[[0, 0]]", "[]")), "malformed header: run 0");
    expect_header_error(craft(header_json("[[4, 2], [0, 2]]", "[]")),
                        "malformed header: run 1 starts at 0");
    expect_header_error(craft(header_json("[[0, 3], [2, 2]]", "[]")),
                        "malformed header: run 1 starts at 2");
  }

  void tensorsMustFit() {
    const std::vector<float> v(10, 0.25f);
    std::vector<uint8_t> data;
    append_floats(data, v);  // 40 bytes
    // A tensor of 100 elements in 40 data bytes.
    expect_header_error(
        craft(header_json("[[0, 100]]", list({tensor_json("param", 0, 100, "00000000")})), data),
        "truncated");
    // The first tensor fits, the second runs past the end.
    expect_header_error(craft(header_json("[[0, 6]]", list({tensor_json("param", 0, 6, "00000000"),
                                                            tensor_json("m", 24, 6, "00000000")})),
                              data),
                        "truncated: tensor m ends past");
    // A count that disagrees with the runs.
    expect_header_error(
        craft(header_json("[[0, 10]]", list({tensor_json("param", 0, 9, "00000000")})), data),
        "tensor param holds 9 values but the runs cover 10 elements");
    // Not back to back: a gap, and an overlap.
    expect_header_error(craft(header_json("[[0, 2]]", list({tensor_json("param", 0, 2, "00000000"),
                                                            tensor_json("m", 16, 2, "00000000")})),
                              data),
                        "tensor m starts at data offset 16, expected 8");
    expect_header_error(
        craft(header_json("[[0, 2]]", list({tensor_json("param", 4, 2, "00000000")})), data),
        "tensor param starts at data offset 4, expected 0");
    expect_header_error(craft(header_json("[[0, 2]]", list({tensor_json("param", 0, 2, "00000000"),
                                                            tensor_json("m", 0, 2, "00000000")})),
                              data),
                        "tensor m starts at data offset 0, expected 8");
    // A duplicate name.
    expect_header_error(
        craft(header_json("[[0, 2]]", list({tensor_json("param", 0, 2, "00000000"),
                                            tensor_json("param", 8, 2, "00000000")})),
              data),
        "tensor param is listed twice");
  }

  void crcMustBeEightHexDigits() {
    std::vector<uint8_t> data(8, 0);
    for (const std::string bad :
         {"1234567", "123456789", "xyz12345", "", "+1234567", " 1234567", "0x123456", "1234567g"})
      expect_header_error(
          craft(header_json("[[0, 2]]", list({tensor_json("param", 0, 2, bad)})), data),
          std::string("crc32 '").append(bad).append("' is not 8 hex digits"));
    // A crc32 that is a number, not a string.
    expect_header_error(
        craft(header_json("[[0, 2]]",
                          R"([{"name": "param", "offset": 0, "count": 2, "crc32": 12345678}])"),
              data),
        "malformed header");
    // Upper case is 8 hex digits too.
    const std::vector<float> v = {-1.0f, 7.0f};
    std::vector<uint8_t> vd;
    append_floats(vd, v);
    std::string upper = crc_of_floats(v);
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    const auto b = craft(header_json("[[0, 2]]", list({tensor_json("param", 0, 2, upper)})), vd);
    const std::string path = write(b);
    const ShardHeader h = read_shard_header(path, b.size());
    QVERIFY(bit_equal(read_shard_tensor(path, h, "param"), v));
  }

  void flippedDataByte() {
    ShardHeader h;
    h.runs = {{0, 3}, {8, 2}};
    const std::vector<float> param = {1, 2, 3, 4, 5};
    const std::vector<float> m = {-1, -2, -3, -4, -5};
    std::vector<uint8_t> bytes = encode_shard(h, TensorList{{"param", param}, {"exp_avg", m}});
    bytes[bytes.size() - 7] ^= 0x01;  // inside exp_avg's fourth value
    const std::string path = write(bytes);
    const ShardHeader r = read_shard_header(path, bytes.size());  // the header is intact
    QVERIFY(bit_equal(read_shard_tensor(path, r, "param"), param));
    const std::string msg =
        error_of<FormatError>([&] { (void)read_shard_tensor(path, r, "exp_avg"); });
    VERIFY_CONTAINS(msg, "checksum mismatch in tensor exp_avg");
    VERIFY_CONTAINS(msg, path);
    VERIFY_CONTAINS(msg, hex8(zlib_crc(m.data(), m.size() * 4)));  // the stored CRC

    // A file cut after the header was read: the tensor read reports truncation.
    std::vector<uint8_t> cut = encode_shard(h, TensorList{{"param", param}, {"exp_avg", m}});
    const std::string path2 = write(cut);
    const ShardHeader r2 = read_shard_header(path2, cut.size());
    cut.resize(cut.size() - 4);
    write_bytes(path2, cut);
    const std::string msg2 =
        error_of<FormatError>([&] { (void)read_shard_tensor(path2, r2, "exp_avg"); });
    VERIFY_CONTAINS(msg2, "truncated");
    VERIFY_CONTAINS(msg2, path2);
  }

  // Text from the header shown in a message has its control characters shown as \xNN (inputs the
  // fuzzer found: tests/fuzz/crashes/fuzz_shard_header-*): one line, still naming the problem.
  // fuzz_shard_header-escape-in-tensor-name: a name listed twice.
  void tensorNameWithEscape() {
    const std::string name = "x\\u001b[2J";
    const std::vector<uint8_t> b = craft(
        "{\"rank\":0,\"step\":0,\"progress\":null,\"runs\":[],\"tensors\":[" +
        tensor_json(name, 0, 0, "00000000") + "," + tensor_json(name, 0, 0, "00000000") + "]}");
    const std::string path = write(b);
    const std::string msg = error_of<FormatError>([&] { (void)read_shard_header(path, b.size()); });
    QVERIFY2(one_printable_line(msg), msg.c_str());
    QCOMPARE(msg, path + ": malformed header: tensor x\\x1b[2J is listed twice");
  }

  // A tensor's name in the checks after parsing and in read_shard_tensor; its crc32.
  void tensorFieldsWithControlCharacters() {
    const std::string name = "x\\u001b[2J";
    std::vector<uint8_t> data(8, 0);
    expect_header_error(
        craft(header_json("[[0, 2]]", list({tensor_json(name, 4, 2, "00000000")})), data),
        "tensor x\\x1b[2J starts at data offset 4, expected 0");
    expect_header_error(
        craft(header_json("[[0, 2]]", list({tensor_json("p", 0, 2, "\\u001b[2J0000")})), data),
        "crc32 '\\x1b[2J0000' is not 8 hex digits");
    const auto b =
        craft(header_json("[[0, 2]]", list({tensor_json(name, 0, 2, "00000000")})), data);
    const std::string path = write(b);
    const ShardHeader h = read_shard_header(path, b.size());
    std::string msg = error_of<FormatError>([&] { (void)read_shard_tensor(path, h, "x\x1b[2J"); });
    QVERIFY2(one_printable_line(msg), msg.c_str());
    VERIFY_CONTAINS(msg, "checksum mismatch in tensor x\\x1b[2J");
    msg = error_of<FormatError>([&] { (void)read_shard_tensor(path, h, "y\n"); });
    QCOMPARE(msg, path + ": holds no tensor y\\x0a");
  }

  // fuzz_shard_header-newline-in-path: a raw newline inside a key, found on the text before
  // parsing, in the path of the field named.
  void headerKeyWithNewline() {
    const auto b = craft("{\"a\nb\": 1e400}");
    const std::string path = write(b);
    const std::string msg = error_of<FormatError>([&] { (void)read_shard_header(path, b.size()); });
    QCOMPARE(msg,
             path + ": malformed header: a\\x0ab: 1e400 is out of range (not a finite number)");
  }

  // The shard's own path, when it holds a newline.
  void pathWithNewline() {
    const std::string dir = tmp_.path().toStdString();
    const std::string msg =
        error_of<IoError>([&] { (void)read_shard_header(dir + "/no\nsuch.bin", 100); });
    QCOMPARE(msg, dir + "/no\\x0asuch.bin: cannot open the shard");
  }

  void missingFileIsIoError() {
    const std::string path = tmp_.path().toStdString() + "/no-such-shard.bin";
    const std::string msg = error_of<IoError>([&] { (void)read_shard_header(path, 100); });
    VERIFY_CONTAINS(msg, path);
    VERIFY_CONTAINS(msg, "cannot open");
  }
};

QTEST_GUILESS_MAIN(TestShardFile)
#include "tst_shard_file.moc"
