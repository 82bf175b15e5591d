// What the suites that run a real Collector on loopback share (tst_collector,
// tst_collector_limits, tst_connection_lost, tst_handshake, tst_telemetry_load, tst_web_viewers;
// web_client.h connects through loopback() too):
//   asio, tcp, tl: the names the helpers and the suites write Boost.Asio and telemetry with;
//   loopback(port): 127.0.0.1 at `port`;
//   MessageStore: a consumer keeping every message, read through snapshot() or events_in() on
//     the collector's thread; events_of() keeps the telemetry events of a list of messages;
//   SequenceChecker: a consumer counting each rank's events and the sequence numbers out of turn;
//   read_frame(), decoded(): one whole frame read from a raw socket, and its message.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <variant>
#include <vector>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>

#include <boost/asio.hpp>

#include "net/collector.h"
#include "net/protocol.h"

namespace shardlab::test {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
namespace tl = telemetry;

inline tcp::endpoint loopback(uint16_t port) {
  return {asio::ip::make_address("127.0.0.1"), port};
}

// Keeps every message; the collector's thread owns `messages` while the collector runs.
class MessageStore : public net::MessageConsumer {
 public:
  void on_message(const net::Message& message) override { messages.push_back(message); }
  std::vector<net::Message> messages;
};

// A copy of what `store` holds, taken on `collector`'s thread.
inline std::vector<net::Message> snapshot(net::Collector& collector, MessageStore& store) {
  std::vector<net::Message> copy;
  collector.call([&] { copy = store.messages; });
  return copy;
}

// The telemetry events among `messages`, in order.
inline std::vector<tl::Event> events_of(const std::vector<net::Message>& messages) {
  std::vector<tl::Event> out;
  for (const auto& m : messages)
    if (const auto* e = std::get_if<tl::Event>(&m)) out.push_back(*e);
  return out;
}

// The telemetry events `store` holds, taken on `collector`'s thread.
inline std::vector<tl::Event> events_in(net::Collector& collector, MessageStore& store) {
  return events_of(snapshot(collector, store));
}

// Checks each rank's sequence numbers as they arrive (on the collector thread).
class SequenceChecker : public net::MessageConsumer {
 public:
  void on_message(const net::Message& message) override {
    if (const auto* e = std::get_if<tl::Event>(&message)) {
      uint64_t& next = next_[e->rank];
      if (e->seq != next) ++errors;
      next = e->seq + 1;
      ++events;
    }
  }
  uint64_t events = 0, errors = 0;

 private:
  std::map<int32_t, uint64_t> next_;
};

// Reads one whole frame (blocking; closing the socket ends it). Throws on EOF and for a frame
// claiming more than 1 MiB.
inline std::vector<uint8_t> read_frame(tcp::socket& s) {
  std::vector<uint8_t> frame(net::kHeaderSize);
  asio::read(s, asio::buffer(frame));
  net::FrameHeader header;
  std::memcpy(&header, frame.data(), sizeof header);
  if (header.length > (1u << 20)) throw std::runtime_error("frame too large");
  frame.resize(net::kHeaderSize + header.length);
  asio::read(s, asio::buffer(frame.data() + net::kHeaderSize, header.length));
  return frame;
}

// The message a whole frame holds; throws when it does not decode.
inline net::Message decoded(const std::vector<uint8_t>& frame) {
  net::DecodeResult r = net::decode_frame(frame);
  if (r.status != net::DecodeResult::Status::ok) throw std::runtime_error("bad frame: " + r.error);
  return std::move(r.message);
}

}  // namespace shardlab::test
