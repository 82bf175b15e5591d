// Writes the seed corpus for fuzz_decoder: one valid frame of every message kind, one file per
// frame, plus one file holding all of them back to back (a stream). Usage: fuzz_seed_corpus DIR
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "net/protocol.h"

using namespace shardlab::net;
namespace tel = shardlab::telemetry;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seed_corpus DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto event = [](tel::Payload p) {
    tel::Event e;
    e.rank = 3;
    e.seq = 42;
    e.time = 1.7e9;
    e.payload = std::move(p);
    return e;
  };
  Hello hello;
  hello.job_id = "gpt";
  hello.host = "node-1";
  hello.pid = 4242;
  tel::StepEvent step;
  step.step = 7;
  step.loss = 2.5;
  step.tokens = true;
  tel::MemoryEvent memory;
  memory.current[0] = 1 << 20;
  memory.peak[0] = 2 << 20;
  tel::CollectiveEvent collective;
  collective.op = "all_reduce";
  collective.group = "world";
  collective.bytes = 4096;
  collective.array = tel::CollectiveArray::grads;  // version 5: what it moved
  collective.unit = 1;
  tel::PhaseEvent phase;
  phase.phase = tel::Phase::backward;
  // Who holds what on rank 1 of 4 (zero2) over two tensors: every list of the LAYOUT non-empty.
  tel::LayoutEvent layout;
  layout.strategy = "zero2";
  layout.tensors = {{"fc.weight", 0, 12}, {"fc.bias", 12, 4}};
  layout.params = {{0, 16}};
  layout.grads = {{4, 8}};
  layout.optimizer_state = {{4, 8}};
  layout.state_arrays = {"exp_avg", "exp_avg_sq"};
  layout.params_padding = 0;
  layout.planned = {64, 16, 32};
  layout.formula = "zero2: 4*Psi' + 4*Psi'/N + 8*Psi'/N";
  layout.units = {{{0, 8}}, {{8, 16}}};  // version 5: two buckets
  const std::vector<Message> messages = {
      hello,
      Challenge{},
      Auth{},
      AuthOk{},
      BatchMac{},
      event(step),
      event(memory),
      event(collective),
      event(phase),
      event(tel::HeartbeatEvent{}),
      event(tel::LogLineEvent{"loss 2.5"}),
      event(tel::JobStateEvent{tel::JobState::failed, "timeout"}),
      event(tel::EvalEvent{100, 2.68, 0.263, 512}),
      event(layout),
  };
  std::vector<uint8_t> stream;
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "fuzz_seed_corpus: cannot write %s/%s\n", dir.c_str(), name.c_str());
      std::exit(1);
    }
  };
  for (const Message& m : messages) {
    const auto frame = encode(m);
    write(std::string("frame_") + std::to_string(frame[6] | (frame[7] << 8)), frame);
    encode_into(m, stream);
  }
  write("stream", stream);
  return 0;
}
