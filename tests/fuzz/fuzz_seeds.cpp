// Writes the generated seeds: those of fuzz_shard_header and fuzz_recording with the writers
// ShardLab uses for real (encode_shard, RecordingWriter), since both formats carry CRC-32s that a
// checked-in file would have to keep in step with the format by hand (each under 2 KiB; as files
// and in the targets' sealed forms), and two requests of fuzz_http just past the server's limits
// (too big to check in).
// Usage: fuzz_seeds DIR  (writes DIR/fuzz_shard_header/*, DIR/fuzz_recording/*, DIR/fuzz_http/*;
// the directories exist)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint/shard_file.h"
#include "net/protocol.h"
#include "net/recording.h"

using namespace shardlab;
namespace tel = shardlab::telemetry;

namespace {

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz_seeds: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

// A shard file as fuzz_shard_header's sealed form: the header's text, a NUL, the data section.
std::vector<uint8_t> unsealed_shard(const std::vector<uint8_t>& file) {
  const uint32_t len = uint32_t(file[8]) | uint32_t(file[9]) << 8 | uint32_t(file[10]) << 16 |
                       uint32_t(file[11]) << 24;
  std::vector<uint8_t> out(file.begin() + 12, file.begin() + 12 + len);
  out.push_back(0);
  out.insert(out.end(), file.begin() + 16 + len, file.end());
  return out;
}

// Each shard seed as it is on disk and in the sealed form (fuzz_shard_header.cpp).
void write_shard(const std::string& path, const std::vector<uint8_t>& file) {
  write(path, file);
  write(path + ".sealed", unsealed_shard(file));
}

void shard_seeds(const std::string& dir) {
  const std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 42.0f};
  const std::vector<float> b = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f};
  const std::span<const float> sa(a), sb(b);

  ShardHeader h;
  h.rank = 3;
  h.step = 100;
  h.progress = {{"step", 100},
                {"epoch", 1},
                {"sampler", {{"seed", 7}, {"offset", 640}}},
                {"best_loss", 0.75}};
  h.runs = {{0, 2}, {10, 4}};
  write_shard(dir + "/two_runs_param_exp_avg",
              encode_shard(h, {{"param", sa}, {"exp_avg", sb}, {"exp_avg_sq", sb}}));
  write_shard(dir + "/two_runs_param", encode_shard(h, {{"param", sa}}));

  ShardHeader one;
  one.rank = 0;
  one.step = 0;
  one.progress = nlohmann::json::object();
  one.runs = {{5, 1}};
  write_shard(dir + "/one_value", encode_shard(one, {{"param", sa.first(1)}}));

  ShardHeader empty;
  empty.progress = nullptr;
  write_shard(dir + "/no_runs_no_tensors", encode_shard(empty, {}));
}

void recording_seeds(const std::string& dir) {
  auto event = [](int rank, uint64_t seq, tel::Payload p) {
    tel::Event e;
    e.rank = rank;
    e.seq = seq;
    e.time = 1.7e9 + double(seq);
    e.payload = std::move(p);
    return e;
  };
  net::Hello hello;
  hello.job_id = "gpt";
  hello.rank = 1;
  hello.world = 2;
  hello.dp = 2;
  hello.dp_i = 1;
  hello.host = "node-1";
  hello.pid = 4242;
  tel::StepEvent step;
  step.step = 7;
  step.loss = 2.5;
  tel::MemoryEvent memory;
  memory.current[0] = 1 << 20;
  memory.peak[0] = 2 << 20;
  tel::CollectiveEvent collective;
  collective.op = "all_reduce";
  collective.group = "dp";
  collective.bytes = 4096;
  tel::PhaseEvent phase;
  phase.phase = tel::Phase::backward;
  const std::vector<net::Message> messages = {
      hello,
      event(1, 1, step),
      event(1, 2, memory),
      event(1, 3, collective),
      event(1, 4, phase),
      event(1, 5, tel::HeartbeatEvent{}),
      event(1, 6, tel::LogLineEvent{"loss 2.5"}),
      event(1, 7, tel::EvalEvent{100, 2.68, 0.263, 512}),
      event(1, 8, tel::JobStateEvent{tel::JobState::finished, ""}),
  };
  auto record = [&](const std::string& name, size_t count, size_t block_messages) {
    const std::string path = dir + "/" + name;
    {
      net::RecordingWriter w(path, block_messages);
      for (size_t i = 0; i < count; ++i) w.append(messages[i]);
    }  // flushed on destruction
  };
  record("header_only", 0, 4);
  record("hello_only", 1, 4);
  record("three_blocks", messages.size(), 4);  // blocks of 4, 4, 1 messages
  record("one_block", messages.size(), 256);
  // The blocks alone, as fuzz_recording's sealed form (it puts the file header before them and
  // sets each block's CRC).
  for (const char* name : {"hello_only", "three_blocks"}) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    write(dir + "/" + name + ".blocks", std::vector<uint8_t>(bytes.begin() + 12, bytes.end()));
  }
}

// Requests just past the web server's limits (8 KiB of headers, 4 KiB of body), which would make
// checked-in seeds of 8 KiB and more.
void http_seeds(const std::string& dir) {
  auto text = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  write(dir + "/header_over_limit",
        text("GET /api/run HTTP/1.1\r\nHost: h\r\nX-Pad: " + std::string(8200, 'a') + "\r\n\r\n"));
  write(dir + "/body_over_limit",
        text("POST /login HTTP/1.1\r\nHost: h\r\nContent-Length: 4100\r\n\r\ntoken=" +
             std::string(4094, 'b')));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  shard_seeds(dir + "/fuzz_shard_header");
  recording_seeds(dir + "/fuzz_recording");
  http_seeds(dir + "/fuzz_http");
  return 0;
}
