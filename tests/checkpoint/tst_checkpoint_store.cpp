// Sharded checkpoints on disk: round trips, retention, corruption and crash recovery, manifest
// validation and atomic writes. Expected checksums come from zlib directly or known vectors.
#include <QtTest>

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/checkpoint/manifest.h"
#include "engine/core/atomic_file.h"
#include "engine/core/error.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/common/caught.h"
#include "tests/common/files.h"
#include "tests/common/text.h"

using namespace shardlab;
using namespace shardlab::test;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

// Deterministic, rank- and step-dependent shard contents of `n` bytes.
std::vector<uint8_t> shard_bytes(int rank, int64_t step, size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(i * 31 + rank * 7 + step);
  return b;
}

CheckpointManifest base_manifest(int64_t step, int world) {
  CheckpointManifest m;
  m.step = step;
  m.strategy = "zero2";
  m.world_size = world;
  m.dp = world;
  m.layout = {{"params", {{{"name", "fc1.w"}, {"shape", {4, 8}}}}}, {"total", 32}};
  return m;
}

// Every rank writes its shard, then rank 0 commits: the caller's collective order, serially.
CheckpointManifest save(const std::string& dir, int64_t step, int world, int keep_last,
                        const CheckpointWriteOptions& opts = {}) {
  CheckpointManifest m = base_manifest(step, world);
  prepare_step(dir, step);
  for (int r = 0; r < world; ++r)
    m.shards.push_back(write_shard(dir, step, r, shard_bytes(r, step, 100 + 37 * r)));
  commit(dir, m, keep_last, opts);
  return m;
}

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// Whether `msg` is one printable line: not empty, no C0 control character (what every error
// message must be whatever the file held; tests/fuzz/fuzz_common.h, check_message()).
bool one_printable_line(const std::string& msg) {
  return !msg.empty() && std::none_of(msg.begin(), msg.end(),
                                      [](char c) { return static_cast<unsigned char>(c) < 0x20; });
}

// A manifest's text with `strategy`, `checksum` and one shard whose file is `file` (JSON string
// contents, escapes allowed).
std::string manifest_text(const std::string& strategy, const std::string& checksum,
                          const std::string& file = "") {
  return "{\"format_version\": 2, \"step\": 0, \"strategy\": \"" + strategy +
         "\", \"world_size\": 1, \"pp\": 1, \"tp\": 1, \"dp\": 1, \"layout\": null, \"checksum\": "
         "\"" +
         checksum + "\", \"shards\": [" +
         (file.empty() ? ""
                       : "{\"rank\": 0, \"file\": \"" + file +
                             "\", \"bytes\": 0, \"crc32\": \"00000000\"}") +
         "]}";
}

bool has_temp_files(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

}  // namespace

class TestCheckpointStore : public QObject {
  Q_OBJECT
 private slots:
  void knownCrcVector() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    const ShardEntry e = write_shard(dir, 7, 3, bytes_of("123456789"));
    QCOMPARE(e.crc32, 0xCBF43926u);
    QCOMPARE(e.bytes, uint64_t(9));
    QCOMPARE(e.rank, 3);
    QCOMPARE(e.file, std::string("shard-00003.bin"));
    QCOMPARE(step_dir(dir, 7), dir + "/step-00000007");
    QCOMPARE(read_bytes(dir + "/step-00000007/shard-00003.bin"), bytes_of("123456789"));
  }

  void roundTripFourShards() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    const int world = 4;
    CheckpointManifest m = base_manifest(100, world);
    m.pp = 2;
    m.dp = 2;
    std::vector<std::vector<uint8_t>> data;
    for (int r = 0; r < world; ++r) {
      // Rank 3 holds nothing: an empty shard is still a shard.
      data.push_back(r == 3 ? std::vector<uint8_t>{} : shard_bytes(r, 100, 1000 + 333 * r));
      m.shards.push_back(write_shard(dir, 100, r, data.back()));
    }
    commit(dir, m, 0);

    const std::string sd = dir + "/step-00000100";
    QCOMPARE(entries(sd),
             (std::set<std::string>{"manifest.json", "shard-00000.bin", "shard-00001.bin",
                                    "shard-00002.bin", "shard-00003.bin"}));
    QCOMPARE(read_text(dir + "/latest"), std::string("step-00000100\n"));
    QVERIFY(!has_temp_files(dir));

    for (const auto& from : {dir, sd, sd + "/", dir + "/"}) {
      const CheckpointManifest back = read_manifest(from);
      QCOMPARE(back.format_version, CheckpointManifest::kFormatVersion);
      QCOMPARE(back.step, int64_t(100));
      QCOMPARE(back.strategy, std::string("zero2"));
      QCOMPARE(back.world_size, 4);
      QCOMPARE(back.pp, 2);
      QCOMPARE(back.tp, 1);
      QCOMPARE(back.dp, 2);
      QCOMPARE(back.layout, m.layout);
      QCOMPARE(back.shards.size(), size_t(4));
      for (int r = 0; r < world; ++r) {
        QCOMPARE(back.shards[r].rank, r);
        QCOMPARE(back.shards[r].file, fmt::format("shard-{:05d}.bin", r));
        QCOMPARE(back.shards[r].bytes, uint64_t(data[r].size()));
        QCOMPARE(back.shards[r].crc32, zlib_crc(data[r]));
        QCOMPARE(read_shard(sd, back, r), data[r]);
      }
    }
    QCOMPARE(find_checkpoint(dir), sd);
    verify(dir);
    verify(sd);

    // The manifest names the checksum and stores it as hex.
    const auto j = nlohmann::json::parse(read_text(sd + "/manifest.json"));
    QCOMPARE(j["checksum"].get<std::string>(), std::string("crc32"));
    QCOMPARE(j["shards"][1]["crc32"].get<std::string>(), hex8(zlib_crc(data[1])));

    const std::string text = describe(read_manifest(dir));
    VERIFY_CONTAINS(text, "step 100");
    VERIFY_CONTAINS(text, "zero2");
    VERIFY_CONTAINS(text, "pp 2 x tp 1 x dp 2 = world 4");
    VERIFY_CONTAINS(text, "shard-00002.bin");
    VERIFY_CONTAINS(text, hex8(zlib_crc(data[2])));
    VERIFY_CONTAINS(text, std::to_string(data[2].size()));
  }

  void keepLastTwoOfFive() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    for (int64_t step = 10; step <= 50; step += 10) save(dir, step, 2, 2);
    QCOMPARE(entries(dir), (std::set<std::string>{"latest", "step-00000040", "step-00000050"}));
    QCOMPARE(read_manifest(dir).step, int64_t(50));
    verify(dir + "/step-00000040");

    // keep_last <= 0 keeps everything.
    QTemporaryDir tmp2;
    const std::string all = tmp2.path().toStdString();
    for (int64_t step = 1; step <= 4; ++step) save(all, step, 1, 0);
    QCOMPARE(entries(all).size(), size_t(5));
  }

  // Pruning and loading never follow a symbolic link inside the checkpoint directory: a step-*
  // link to a checkpoint elsewhere is neither pruned through (its files stay) nor loaded, even
  // when `latest` names it, and a shard that is a link is refused.
  void symlinksAreNotFollowed() {
    QTemporaryDir tmp, outside;
    const std::string dir = tmp.path().toStdString();
    const std::string victim = outside.path().toStdString();
    save(victim, 1, 1, 0);
    const std::string victim_step = step_dir(victim, 1);
    fs::create_directory_symlink(victim_step, dir + "/step-00000001");
    for (int64_t step = 2; step <= 4; ++step) save(dir, step, 1, 1);  // keep 1: prunes older
    QVERIFY(fs::exists(victim_step + "/manifest.json"));
    QVERIFY(fs::is_symlink(fs::symlink_status(dir + "/step-00000001")));
    QCOMPARE(read_manifest(dir).step, int64_t(4));
    { std::ofstream(dir + "/latest") << "step-00000001\n"; }
    QCOMPARE(read_manifest(dir).step, int64_t(4));
    const std::string sd = step_dir(dir, 4);
    const CheckpointManifest m = read_manifest(dir);
    const std::string shard = sd + "/" + m.shards[0].file;
    fs::rename(shard, shard + ".real");
    fs::create_symlink(shard + ".real", shard);
    VERIFY_CONTAINS(error_of<IoError>([&] { read_shard(sd, m, 0); }), "symbolic link");
  }

  void resumedRunKeepsTheCommittedStep() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    for (int64_t step = 1; step <= 3; ++step) save(dir, step, 1, 3);
    // Resumed from step 1 and saved step 2 again: step 3 belongs to the abandoned run and is the
    // first to go; the re-written step 2 and step 1 stay.
    save(dir, 2, 1, 2);
    QCOMPARE(read_manifest(dir).step, int64_t(2));
    QCOMPARE(entries(dir), (std::set<std::string>{"latest", "step-00000001", "step-00000002"}));
    QCOMPARE(read_shard(step_dir(dir, 2), read_manifest(dir), 0), shard_bytes(0, 2, 100));
  }

  void flippedByteIsAChecksumMismatch() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    const CheckpointManifest m = save(dir, 100, 4, 0);
    const std::string sd = step_dir(dir, 100);
    const std::string file = sd + "/shard-00002.bin";
    auto b = read_bytes(file);
    const uint32_t before = zlib_crc(b);
    b[17] ^= 0x40;
    write_text(file, std::string(b.begin(), b.end()));
    const std::string msg = error_of<FormatError>([&] { read_shard(sd, m, 2); });
    QCOMPARE(msg, file + ": checksum mismatch (manifest crc32 " + hex8(before) + ", file " +
                      hex8(zlib_crc(b)) + "): the shard is corrupt");
    QCOMPARE(error_of<FormatError>([&] { verify(dir); }), msg);
    QCOMPARE(read_shard(sd, m, 1), shard_bytes(1, 100, 137));  // the others still read
  }

  void truncatedShard() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    const CheckpointManifest m = save(dir, 100, 4, 0);
    const std::string sd = step_dir(dir, 100);
    const std::string file = sd + "/shard-00003.bin";
    const size_t full = 100 + 37 * 3;
    fs::resize_file(file, full / 2);
    QCOMPARE(error_of<FormatError>([&] { read_shard(sd, m, 3); }),
             fmt::format("{}: truncated ({} of {} bytes)", file, full / 2, full));
    // A longer file is corrupt too.
    fs::resize_file(file, full + 1);
    VERIFY_CONTAINS(error_of<FormatError>([&] { read_shard(sd, m, 3); }),
                    file + ": " + std::to_string(full + 1) + " bytes");
  }

  void deletedShardIsMissing() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    const CheckpointManifest m = save(dir, 100, 4, 0);
    const std::string sd = step_dir(dir, 100);
    fs::remove(sd + "/shard-00002.bin");
    const std::string msg = error_of<IoError>([&] { read_shard(sd, m, 2); });
    VERIFY_CONTAINS(msg, sd + "/shard-00002.bin: missing shard for rank 2");
    VERIFY_CONTAINS(error_of<IoError>([&] { verify(sd); }), "missing shard for rank 2");
    VERIFY_CONTAINS(error_of<IoError>([&] { read_shard(sd, m, 9); }),
                    "the manifest lists no shard for rank 9");
  }

  void crashBeforeManifestKeepsThePreviousCheckpoint() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    const CheckpointManifest first = save(dir, 100, 4, 0);

    std::vector<std::string> stages;
    CheckpointWriteOptions crash;
    crash.before_stage = [&](const char* stage) {
      stages.push_back(stage);
      if (std::string(stage) == "write-manifest") throw std::runtime_error("simulated crash");
    };
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, save(dir, 200, 4, 0, crash));
    QCOMPARE(stages, std::vector<std::string>{"write-manifest"});
    // The shards of step 200 are there, its manifest is not: step 100 is what loads.
    QVERIFY(fs::exists(dir + "/step-00000200/shard-00003.bin"));
    QVERIFY(!fs::exists(dir + "/step-00000200/manifest.json"));
    const CheckpointManifest back = read_manifest(dir);
    QCOMPARE(back.step, int64_t(100));
    QCOMPARE(read_shard(step_dir(dir, back.step), back, 2), shard_bytes(2, 100, 174));
    // Without `latest` the scan finds the same one.
    fs::remove(dir + "/latest");
    QCOMPARE(read_manifest(dir).step, int64_t(100));
    // The incomplete step directory itself says what it is.
    VERIFY_CONTAINS(error_of<IoError>([&] { read_manifest(dir + "/step-00000200"); }),
                    dir + "/step-00000200: incomplete checkpoint (no manifest.json)");

    // The next commit removes the incomplete directory and keeps the complete one.
    save(dir, 300, 4, 0);
    QCOMPARE(entries(dir), (std::set<std::string>{"latest", "step-00000100", "step-00000300"}));
    QCOMPARE(read_manifest(dir).step, int64_t(300));
  }

  void crashBeforeLatestLoadsACompleteCheckpoint() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    save(dir, 100, 2, 0);
    CheckpointWriteOptions crash;
    crash.before_stage = [](const char* stage) {
      if (std::string(stage) == "write-latest") throw std::runtime_error("simulated crash");
    };
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, save(dir, 200, 2, 0, crash));
    QCOMPARE(read_text(dir + "/latest"), std::string("step-00000100\n"));
    verify(dir);
    verify(dir + "/step-00000200");  // complete: its manifest was written
    // A `latest` naming a removed directory is ignored in favour of the newest complete one.
    write_text(dir + "/latest", "step-00000999\n");
    QCOMPARE(read_manifest(dir).step, int64_t(200));
  }

  void noCheckpointAtAll() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    QCOMPARE(error_of<IoError>([&] { read_manifest(dir); }),
             dir + ": no complete checkpoint (no manifest.json in any step-* directory)");
    VERIFY_CONTAINS(error_of<IoError>([&] { read_manifest(dir + "/nope"); }),
                    dir + "/nope: no such checkpoint directory");
  }

  void commitChecksTheShards() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    CheckpointManifest m = base_manifest(5, 2);
    m.shards.push_back(write_shard(dir, 5, 0, shard_bytes(0, 5, 64)));
    m.shards.push_back({1, "shard-00001.bin", 64, 0});
    VERIFY_CONTAINS(error_of<IoError>([&] { commit(dir, m, 0); }),
                    "/step-00000005/shard-00001.bin: missing shard for rank 1");
    m.shards[1] = write_shard(dir, 5, 1, shard_bytes(1, 5, 60));
    m.shards[1].bytes = 64;
    VERIFY_CONTAINS(error_of<FormatError>([&] { commit(dir, m, 0); }),
                    "shard-00001.bin: 60 bytes on disk but the manifest lists 64");
    QVERIFY(!fs::exists(step_dir(dir, 5) + "/manifest.json"));
    QVERIFY(!fs::exists(dir + "/latest"));

    // Inconsistent manifests are the caller's mistake.
    m.shards[1].bytes = 60;
    CheckpointManifest bad = m;
    bad.shards[1].rank = 0;
    VERIFY_CONTAINS(error_of<InvalidArgument>([&] { commit(dir, bad, 0); }),
                    "shards[1].rank: rank 0 is listed twice");
    bad = m;
    bad.world_size = 3;
    VERIFY_CONTAINS(error_of<InvalidArgument>([&] { commit(dir, bad, 0); }), "world_size");
    bad = m;
    bad.shards[0].file = "../escape.bin";
    VERIFY_CONTAINS(error_of<InvalidArgument>([&] { commit(dir, bad, 0); }),
                    "shards[0].file: must be a plain file name");
    commit(dir, m, 0);
    verify(dir);
  }

  void prepareStepRemovesAStaleManifest() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    save(dir, 100, 2, 0);
    save(dir, 200, 2, 0);
    prepare_step(dir, 200);  // re-writing step 200, e.g. after resuming from 100
    QVERIFY(!fs::exists(dir + "/step-00000200/manifest.json"));
    QCOMPARE(read_manifest(dir).step, int64_t(100));
  }

  void malformedManifest() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    save(dir, 100, 2, 0);
    const std::string path = dir + "/step-00000100/manifest.json";
    const nlohmann::json good = nlohmann::json::parse(read_text(path));
    auto with = [&](auto&& edit) {
      nlohmann::json j = good;
      edit(j);
      write_text(path, j.dump(2));
      return error_of<FormatError>([&] { read_manifest(dir); });
    };

    write_text(path, "{\"format_version\": 1, \"step\": ");
    VERIFY_CONTAINS(error_of<FormatError>([&] { read_manifest(dir); }), path + ": not valid JSON");
    QCOMPARE(with([](auto& j) { j["format_version"] = 7; }),
             path + ": format_version 7 is not supported (this build reads 2)");
    QCOMPARE(with([](auto& j) { j["step"] = "100"; }),
             path + ": field 'step' must be an integer, got a string");
    QCOMPARE(with([](auto& j) { j.erase("strategy"); }), path + ": missing field 'strategy'");
    QCOMPARE(with([](auto& j) { j["shards"][1]["crc32"] = 12; }),
             path + ": field 'shards[1].crc32' must be a string, got an integer");
    QCOMPARE(with([](auto& j) { j["shards"][0]["bytes"] = -4; }),
             path + ": field 'shards[0].bytes' must be a non-negative integer, got -4");
    QCOMPARE(with([](auto& j) { j["shards"][0]["crc32"] = "xyz"; }),
             path + ": field 'shards[0].crc32' must be 8 hex digits, got \"xyz\"");
    QCOMPARE(with([](auto& j) { j["shards"] = nlohmann::json::object(); }),
             path + ": field 'shards' must be an array, got an object");
    QCOMPARE(with([](auto& j) { j["checksum"] = "sha256"; }),
             path + ": checksum \"sha256\" is not supported (this build reads \"crc32\")");
    QCOMPARE(with([](auto& j) { j["world_size"] = 3; }),
             path + ": world_size: must equal pp*tp*dp = 1*1*2, got 3");
    QCOMPARE(with([](auto& j) { j["step"] = 200; }),
             path + ": step 200 does not match its directory step-00000100");
    QCOMPARE(with([](auto& j) { j = nlohmann::json::array(); }),
             path + ": the manifest must be a JSON object, got an array");
    // Unknown keys are ignored.
    QCOMPARE(with([](auto& j) { j["note"] = "hello"; }), std::string("(no exception)"));
  }

  // Values in a manifest are checked before use: nesting deep enough to exhaust the stack of a
  // recursive copy is refused before parsing, a number beyond double's range names its field;
  // both as one FormatError line naming the file.
  void manifestNestingAndNumbersAreBounded() {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    const auto manifest = [](const std::string& step, const std::string& layout) {
      return R"({"format_version": 2, "step": )" + step +
             R"(, "strategy": "ddp", "world_size": 1, "pp": 1, "tp": 1, "dp": 1, "layout": )" +
             layout + R"(, "checksum": "crc32", "shards": []})";
    };
    QCOMPARE(
        error_of<FormatError>([&] { parse_manifest(manifest("0", deep), "ck/manifest.json"); }),
        std::string("ck/manifest.json: nested deeper than 64 levels"));
    QCOMPARE(error_of<FormatError>([&] { parse_manifest(std::string(100000, '{'), "m.json"); }),
             std::string("m.json: nested deeper than 64 levels"));
    QCOMPARE(error_of<FormatError>([&] { parse_manifest(manifest("1e400", "{}"), "m.json"); }),
             std::string("m.json: step: 1e400 is out of range (not a finite number)"));
    QCOMPARE(error_of<FormatError>(
                 [&] { parse_manifest(manifest("0", R"({"a": [0, -1e999]})"), "m.json"); }),
             std::string("m.json: layout.a[1]: -1e999 is out of range (not a finite number)"));
    // A layout nested as deep as allowed still reads (the manifest object is level 1).
    const std::string ok = std::string(63, '[') + std::string(63, ']');
    QCOMPARE(parse_manifest(manifest("0", ok), "m.json").step, int64_t(0));

    // The same through the store: read_manifest of a step directory holding such a file.
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    save(dir, 100, 2, 0);
    const std::string path = dir + "/step-00000100/manifest.json";
    write_text(path, manifest("100", deep));
    QCOMPARE(error_of<FormatError>([&] { read_manifest(dir); }),
             path + ": nested deeper than 64 levels");
  }

  // Text from a manifest shown in a message has its control characters shown as \xNN (inputs the
  // fuzzer found: tests/fuzz/crashes/fuzz_manifest-*): one line, no ESC reaching the terminal,
  // still naming the problem. fuzz_manifest-escape-in-checksum:
  void manifestChecksumWithEscape() {
    const std::string msg = error_of<FormatError>(
        [&] { parse_manifest(manifest_text("x", "crc\\u001b[2J"), "m.json"); });
    QVERIFY2(one_printable_line(msg), msg.c_str());
    QCOMPARE(msg, std::string("m.json: checksum \"crc\\x1b[2J\" is not supported (this build reads "
                              "\"crc32\")"));
  }

  // fuzz_manifest-newline-in-path: a raw newline inside a key, found on the text before parsing,
  // in the path of the field named.
  void manifestKeyWithNewline() {
    const std::string msg =
        error_of<FormatError>([&] { parse_manifest("{\"a\nb\": 1e400}\n", "m.json"); });
    QCOMPARE(msg, std::string("m.json: a\\x0ab: 1e400 is out of range (not a finite number)"));
  }

  // A shard's file and crc32.
  void manifestShardFieldsWithControlCharacters() {
    std::string msg = error_of<FormatError>(
        [&] { parse_manifest(manifest_text("ddp", "crc32", "x/\\u001b[2J"), "m.json"); });
    QCOMPARE(msg, std::string("m.json: shards[0].file: must be a plain file name, got "
                              "\"x/\\x1b[2J\""));
    std::string text = manifest_text("ddp", "crc32", "s.bin");
    text.replace(text.find("00000000"), 8, "\\u001b[2J1234");
    msg = error_of<FormatError>([&] { parse_manifest(text, "m.json"); });
    QCOMPARE(msg, std::string("m.json: field 'shards[0].crc32' must be 8 hex digits, got "
                              "\"\\x1b[2J1234\""));
  }

  // The manifest's own path, when it holds a newline.
  void manifestPathWithNewline() {
    const std::string msg =
        error_of<FormatError>([&] { parse_manifest("{", "ck\n/manifest.json"); });
    QVERIFY2(one_printable_line(msg), msg.c_str());
    VERIFY_CONTAINS(msg, "ck\\x0a/manifest.json: not valid JSON");
  }

  // fuzz_manifest-escape-in-strategy: describe() (what `checkpoint inspect` prints) shows the
  // strategy and the shard file names escaped; its only control characters are its line ends.
  void describeShowsControlCharactersEscaped() {
    const CheckpointManifest m =
        parse_manifest(manifest_text("x\\u001b[2J", "crc32", "s\\u001b]0;t\\u0007.bin"), "m.json");
    QCOMPARE(m.strategy, std::string("x\x1b[2J"));  // read as it is
    const std::string shown = describe(m);
    for (const char c : shown)
      QVERIFY2(static_cast<unsigned char>(c) >= 0x20 || c == '\n', shown.c_str());
    VERIFY_CONTAINS(shown, "strategy: x\\x1b[2J\n");
    VERIFY_CONTAINS(shown, "s\\x1b]0;t\\x07.bin");
  }

  // A shard file name from the manifest, in the store's messages (the file is missing).
  void storeMessagesShowShardNamesEscaped() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    CheckpointManifest m = save(dir, 100, 1, 0);
    const std::string sd = dir + "/step-00000100";
    m.shards[0].file = "gone\x1b[2J.bin";
    write_text(sd + "/manifest.json", to_json(m).dump(2));
    const std::string msg = error_of<IoError>([&] { verify(dir); });
    QVERIFY2(one_printable_line(msg), msg.c_str());
    VERIFY_CONTAINS(msg, sd + "/gone\\x1b[2J.bin: missing shard for rank 0");
  }

  // A checkpoint directory named with a newline.
  void storePathWithNewline() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    const std::string msg = error_of<IoError>([&] { find_checkpoint(dir + "/no\nsuch"); });
    QCOMPARE(msg, dir + "/no\\x0asuch: no such checkpoint directory");
  }

  void atomicWriteFailures() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    const auto data = bytes_of("payload");

    const std::string missing = dir + "/no/such/dir/file.bin";
    VERIFY_CONTAINS(error_of<IoError>([&] { write_file_atomic(missing, data); }), missing + ":");
    QVERIFY(entries(dir).empty());

    // The rename fails (a non-empty directory is in the way): the temp file must go.
    const std::string blocked = dir + "/blocked";
    fs::create_directories(blocked + "/inside");
    VERIFY_CONTAINS(error_of<IoError>([&] { write_file_atomic(blocked, data); }),
                    blocked + ": cannot rename");
    QCOMPARE(entries(dir), std::set<std::string>{"blocked"});

    // A read-only directory (permissions do not bind root, so only checked for other users).
    const std::string ro = dir + "/ro";
    fs::create_directories(ro);
    ::chmod(ro.c_str(), 0555);
    if (::geteuid() != 0) {
      VERIFY_CONTAINS(error_of<IoError>([&] { write_file_atomic(ro + "/f.bin", data); }),
                      ro + "/f.bin:");
      QVERIFY(entries(ro).empty());
    }
    ::chmod(ro.c_str(), 0755);

    // Success replaces the old contents whole and leaves no temp file.
    write_file_atomic(dir + "/f.bin", data);
    write_file_atomic(dir + "/f.bin", std::string_view("second"));
    QCOMPARE(read_bytes(dir + "/f.bin"), bytes_of("second"));
    QVERIFY(!has_temp_files(dir));
  }
};

QTEST_GUILESS_MAIN(TestCheckpointStore)
#include "tst_checkpoint_store.moc"
