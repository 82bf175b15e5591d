// The collector-ingest measurement of `shardlab bench telemetry` (the socket half, which belongs
// in net/: the engine and the CLI never talk to sockets themselves).
#include "net/bench/ingest_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>

#include <boost/asio.hpp>

#include "engine/core/error.h"
#include "net/auth.h"
#include "net/handshake.h"

namespace shardlab::net {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Counts the events it is handed; placed last among a collector's consumers, so when it has
// counted N every consumer before it has handled all N. Only the collector thread writes.
class CountingConsumer : public MessageConsumer {
 public:
  void on_message(const Message& message) override {
    if (std::holds_alternative<telemetry::Event>(message))
      events_.store(events_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  uint64_t events() const { return events_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> events_{0};
};

// Reads one whole frame (header, then its payload) and decodes it.
Message read_frame(tcp::socket& socket) {
  std::vector<uint8_t> frame(kHeaderSize);
  asio::read(socket, asio::buffer(frame));
  uint32_t length = 0;
  std::memcpy(&length, frame.data() + 8, sizeof length);  // magic(4) version(2) type(2) length(4)
  SL_ENFORCE_T(IoError, length <= kDefaultMaxPayload,
               "ingest benchmark: the collector sent a frame of {} bytes", length);
  frame.resize(kHeaderSize + length);
  asio::read(socket, asio::buffer(frame.data() + kHeaderSize, length));
  DecodeResult r = decode_frame(frame);
  SL_ENFORCE_T(IoError, r.status == DecodeResult::Status::ok,
               "ingest benchmark: bad frame from the collector: {}",
               r.error.empty() ? "incomplete" : r.error);
  return std::move(r.message);
}

}  // namespace

std::vector<uint8_t> encode_steps(int32_t rank, int64_t n, int64_t first_step,
                                  telemetry::StepEvent step) {
  std::vector<uint8_t> out;
  const double t0 = telemetry::now_seconds();
  telemetry::Event e;
  e.rank = rank;
  for (int64_t i = 0; i < n; ++i) {
    e.seq = static_cast<uint64_t>(i);
    e.time = t0 + 1e-3 * static_cast<double>(i);
    step.step = first_step + i;
    step.loss = 2.3 / (1.0 + 1e-4 * static_cast<double>(i));
    e.payload = step;
    if (i == 0) {  // every frame has the same size: reserve once
      const size_t frame = encode(Message(e)).size();
      out.reserve(frame * static_cast<size_t>(n));
    }
    encode_into(Message(e), out);
  }
  return out;
}

double measure_ingest(const std::vector<uint8_t>& frames, int64_t events, int32_t rank,
                      std::vector<MessageConsumer*> consumers,
                      const std::function<void(Collector&)>& ready) {
  const int32_t kIngestRank = rank;
  CountingConsumer counter;
  consumers.push_back(&counter);
  CollectorOptions copt;
  copt.token = make_token();
  std::string last_log;
  copt.log = [&last_log](const std::string& line) { last_log = line; };  // collector thread
  Collector collector(copt, consumers);
  collector.start();
  if (ready) ready(collector);

  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), collector.port()));
  // The handshake by hand (net/handshake.h): HELLO -> CHALLENGE -> AUTH -> AUTH_OK.
  Hello hello;
  hello.job_id = "bench-telemetry";
  hello.rank = kIngestRank;
  hello.world = kIngestRank + 1;
  hello.dp = hello.world;
  hello.dp_i = kIngestRank;
  hello.host = "bench";
  hello.pid = static_cast<int64_t>(getpid());
  WorkerHandshake handshake(copt.token, hello);
  asio::write(socket, asio::buffer(handshake.hello_frame()));
  const Message challenge = read_frame(socket);
  const auto* c = std::get_if<Challenge>(&challenge);
  SL_ENFORCE_T(IoError, c != nullptr, "ingest benchmark: expected CHALLENGE from the collector");
  asio::write(socket, asio::buffer(handshake.answer(*c)));
  const Message ok = read_frame(socket);
  SL_ENFORCE_T(IoError, std::holds_alternative<AuthOk>(ok),
               "ingest benchmark: expected AUTH_OK from the collector");
  // Sealed as a publisher seals them (a BATCH_MAC every 64 KiB), before the clock starts: what is
  // timed is the collector's side, the check included.
  BatchSealer sealer(handshake.session_key());
  const std::vector<uint8_t> bytes = seal_frames(frames, sealer);

  // Stream: large writes straight from the buffer, as much as the kernel takes per call.
  constexpr size_t kWriteMax = 8u << 20;
  const auto t0 = Clock::now();
  for (size_t off = 0; off < bytes.size();)
    off += socket.write_some(
        asio::buffer(bytes.data() + off, std::min(kWriteMax, bytes.size() - off)));
  // Wait until the collector has handed all of them on; give up when it stops making progress.
  const auto want = static_cast<uint64_t>(events);
  uint64_t seen = counter.events();
  auto progress = Clock::now();
  while (seen < want) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    const uint64_t now = counter.events();
    if (now != seen) {
      seen = now;
      progress = Clock::now();
    }
    if (collector.stats().rejected > 0 || seconds_since(progress) > 10) {
      std::string why;
      collector.call([&] { why = last_log; });
      SL_THROW(IoError, "ingest benchmark: the collector took {} of {} events{}", seen, want,
               why.empty() ? std::string() : "; " + why);
    }
  }
  const double seconds = seconds_since(t0);
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
  collector.stop();
  return seconds;
}

}  // namespace shardlab::net
