// shardlab bench telemetry: what telemetry costs, in two figures.
//   ingest    how fast one collector (its io_context on one thread) takes in step events from one
//             connection: a raw TCP client in this thread does the handshake by hand, then writes
//             N pre-encoded STEP frames as fast as it can; timed from the first event byte written
//             until the collector has handed all N to its consumer. Rows: a consumer that only
//             counts, and a RunModelConsumer (what `shardlab monitor` and the app feed); beside
//             them decode_frame alone over the same bytes (no sockets), the ceiling.
//   publish   what publish() costs the rank's thread, in ns, for a Publisher and a RecordingSink.
//   overhead  the demo job (resources/jobs/fashion_mlp.json: mlp 784-256-128-10, adam, ZeRO-2 on 4
//             threads), shortened and without evaluation, trained alternately with telemetry off
//             and on (each rank a Publisher to an in-process collector that feeds a RunModel and
//             records to a temporary file, collectives included); the median train seconds of
//             each and the difference.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "engine/bench/harness.h"
#include "net/bench/ingest_bench.h"
#include "engine/bench/telemetry_bench.h"
#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/job/build.h"
#include "engine/run/rank_runner.h"
#include "net/auth.h"
#include "net/collector.h"
#include "net/consumers.h"
#include "net/local_sinks.h"
#include "net/protocol.h"
#include "net/publisher.h"

namespace shardlab::cli {
namespace {

using bench::demo_job;
using bench::OverheadRun;
using bench::publish_ns;
using bench::run_once;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------
// (a) collector ingest

constexpr int32_t kIngestRank = 3;
// Each ingest row is the median of this many runs (a fresh collector and connection each).
constexpr int kIngestReps = 3;

// N STEP events of rank kIngestRank (steps 1..N), seq 0..N-1, encoded back to back.
std::vector<uint8_t> encode_steps(int64_t n) {
  telemetry::StepEvent s;
  s.lr = 1e-3;
  s.grad_norm = 0.5;
  s.throughput = 20000;
  s.step_seconds = 0.003;
  return net::encode_steps(kIngestRank, n, 1, s);
}

void print_ingest_row(const char* label, int64_t events, size_t bytes, double seconds,
                      const char* note, Json& rows) {
  rows.push_back(Json{{"consumer", label},
                      {"events_per_second", static_cast<double>(events) / seconds},
                      {"megabytes_per_second", static_cast<double>(bytes) / seconds / 1e6},
                      {"seconds", seconds}});
  fmt::print("  {:<11} {:>12.0f} {:>9.1f} {:>9.3f}  {}\n", label,
             static_cast<double>(events) / seconds, static_cast<double>(bytes) / seconds / 1e6,
             seconds, note);
}

void bench_ingest(int64_t events, Json& report) {
  const std::vector<uint8_t> bytes = encode_steps(events);
  const size_t frame = bytes.size() / static_cast<size_t>(events);
  report = Json{{"events", events}, {"frame_bytes", frame}, {"rows", Json::array()}};
  Json& rows = report["rows"];
  fmt::print(
      "\ningest: {} STEP events ({} bytes per frame, {:.1f} MB) over one loopback connection; the "
      "collector's io_context on one thread\n",
      events, frame, static_cast<double>(bytes.size()) / 1e6);
  fmt::print("  {:<11} {:>12} {:>9} {:>9}  (median of {} runs each)\n", "consumer", "events/s",
             "MB/s", "seconds", kIngestReps);
  std::fflush(stdout);

  // The ceiling: decode_frame alone over the same bytes.
  std::vector<double> times = bench::sample_seconds(0, kIngestReps, [&] {
    const auto t0 = Clock::now();
    std::span<const uint8_t> rest(bytes);
    int64_t decoded = 0;
    while (!rest.empty()) {
      net::DecodeResult r = net::decode_frame(rest);
      if (r.status != net::DecodeResult::Status::ok) break;
      if (std::holds_alternative<telemetry::Event>(r.message)) ++decoded;
      rest = rest.subspan(r.consumed);
    }
    const double seconds = seconds_since(t0);
    SL_ENFORCE_T(InternalError, decoded == events, "bench telemetry: decoded {} of {} frames",
                 decoded, events);
    return seconds;
  });
  print_ingest_row("decode-only", events, bytes.size(), bench::median(times),
                   "decode_frame alone, no sockets", rows);
  std::fflush(stdout);

  times = bench::sample_seconds(
      0, kIngestReps, [&] { return net::measure_ingest(bytes, events, kIngestRank, {}); });
  print_ingest_row("count", events, bytes.size(), bench::median(times), "counts the events", rows);
  std::fflush(stdout);

  times = bench::sample_seconds(0, kIngestReps, [&] {
    auto model = std::make_unique<net::RunModelConsumer>();
    const double seconds = net::measure_ingest(bytes, events, kIngestRank, {model.get()});
    const auto& ranks = model->model().ranks();
    const auto it = ranks.find(kIngestRank);
    SL_ENFORCE_T(InternalError,
                 model->model().events() == static_cast<uint64_t>(events) && it != ranks.end() &&
                     it->second.step == events,
                 "bench telemetry: the run model holds {} events", model->model().events());
    return seconds;
  });
  print_ingest_row("run-model", events, bytes.size(), bench::median(times),
                   "RunModelConsumer (per-rank state, step and loss series)", rows);
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// (b) worker overhead

// ---------------------------------------------------------------------------------------------
// (b) what publish() costs the rank's thread

void bench_publish_cost(int64_t events, Json& report) {
  fmt::print(
      "\npublish cost on the rank's thread: {} STEP events, mean ns per publish() (the sink's own "
      "thread drains between chunks of 1000)\n",
      events);
  {
    net::CollectorOptions copt;
    copt.token = net::make_token();
    net::Collector collector(copt, {});
    collector.start();
    net::PublisherOptions o;
    o.port = collector.port();
    o.token = copt.token;
    o.hello.job_id = "bench-publish";
    net::Publisher pub(o);
    const double ns = publish_ns(pub, events, [&] { return pub.sent() >= pub.published(); });
    fmt::print("  publisher (to a collector over loopback)  {:8.1f} ns\n", ns);
    report["publisher"] = ns;
    pub.close();
  }
  {
    const std::string path =
        (std::filesystem::temp_directory_path() /
         fmt::format("shardlab-bench-publish-{}.slrec", static_cast<long>(getpid())))
            .string();
    {
      net::RecordingSink rec(path);
      int64_t published = 0;
      auto count = [&] { return static_cast<int64_t>(rec.events()) >= published; };
      struct Counting : telemetry::TelemetrySink {
        net::RecordingSink& to;
        int64_t& n;
        Counting(net::RecordingSink& t, int64_t& c) : to(t), n(c) {}
        void publish(telemetry::Event e) noexcept override {
          ++n;
          to.publish(std::move(e));
        }
      } counting(rec, published);
      const double ns = publish_ns(counting, events, count);
      fmt::print("  recording sink (to a file)                {:8.1f} ns\n", ns);
      report["recording_sink"] = ns;
    }
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
}

void bench_overhead(int64_t steps, int64_t pairs, Json& report) {
  JobSpec job = demo_job(steps);
  const Datasets data = load_completed_data(job);
  const auto problems = validate(job);
  SL_ENFORCE_T(InternalError, problems.empty(), "bench telemetry: the demo job is invalid: {}",
               problems.empty() ? std::string() : problems.front().to_string());
  const MlpConfig& m = job.model.mlp;
  fmt::print(
      "\nworker overhead: {} (mlp {}-{}-{}-{}, {} lr {:g}, {} on {} threads), {} steps, batch {}, "
      "no evaluation; one untimed warm-up run, then {} off/on pairs, interleaved\n",
      job.name, m.input_dim, m.hidden[0], m.hidden[1], m.num_classes, job.optimizer.name,
      job.optimizer.lr, job.parallel.strategy, job.parallel.world_size, steps, job.train.batch_size,
      pairs);
  fmt::print(
      "  on: every rank a Publisher to a collector in this process (RunModel + recording to a "
      "temporary file), collectives included\n");
  fmt::print("  {:<4} {:<9} {:>9} {:>10} {:>8} {:>9} {:>9}\n", "run", "telemetry", "train-s",
             "published", "sent", "dropped", "received");
  std::fflush(stdout);
  const std::string recording_path =
      (std::filesystem::temp_directory_path() /
       fmt::format("shardlab-bench-telemetry-{}.slrec", static_cast<long>(getpid())))
          .string();
  run_once(job, data, false, recording_path);  // first-touch page faults, caches, thread pools
  std::vector<double> off, on;
  std::vector<OverheadRun> on_runs;
  for (int64_t i = 0; i < pairs; ++i)
    for (bool telemetry_on : {false, true}) {
      const OverheadRun r = run_once(job, data, telemetry_on, recording_path);
      if (telemetry_on) {
        on.push_back(r.train_seconds);
        on_runs.push_back(r);
        fmt::print("  {:<4} {:<9} {:>9.3f} {:>10} {:>8} {:>9} {:>9}{}\n", i + 1, "on",
                   r.train_seconds, r.published, r.sent, r.dropped, r.received,
                   r.all_finished ? "" : "  (the run model did not see every rank finish)");
      } else {
        off.push_back(r.train_seconds);
        fmt::print("  {:<4} {:<9} {:>9.3f} {:>10} {:>8} {:>9} {:>9}\n", i + 1, "off",
                   r.train_seconds, "-", "-", "-", "-");
      }
      std::fflush(stdout);
    }
  const double off_s = bench::median(off), on_s = bench::median(on);
  std::vector<double> ratios;  // on / off within each pair: robust to slow drifts in the load
  for (size_t i = 0; i < off.size() && i < on.size(); ++i)
    if (off[i] > 0) ratios.push_back(on[i] / off[i]);
  uint64_t sent = 0, dropped = 0, lost = 0;
  for (const OverheadRun& r : on_runs) {
    sent += r.sent;
    dropped += r.dropped;
    lost += r.sent - std::min(r.sent, r.received);
  }
  report =
      Json{{"steps", steps},
           {"pairs", pairs},
           {"off_seconds", off_s},
           {"on_seconds", on_s},
           {"overhead_percent", off_s > 0 ? 100.0 * (on_s - off_s) / off_s : 0.0},
           {"pair_ratio_percent", 100.0 * (bench::median(ratios) - 1.0)},
           {"events_sent_per_run", static_cast<double>(sent) / static_cast<double>(on_runs.size())},
           {"events_dropped", dropped},
           {"events_lost", lost}};
  fmt::print("median train seconds: off {:.3f}, on {:.3f}; telemetry overhead {:+.1f}%\n", off_s,
             on_s, off_s > 0 ? 100.0 * (on_s - off_s) / off_s : 0.0);
  fmt::print(
      "spread: off {:.3f}..{:.3f} s, on {:.3f}..{:.3f} s; median of the per-pair on/off ratios "
      "{:+.1f}%\n",
      *std::min_element(off.begin(), off.end()), *std::max_element(off.begin(), off.end()),
      *std::min_element(on.begin(), on.end()), *std::max_element(on.begin(), on.end()),
      100.0 * (bench::median(ratios) - 1.0));
  fmt::print(
      "events per on-run: {:.0f} sent ({:.0f} per step), {} dropped in all; {} sent but not "
      "received\n",
      static_cast<double>(sent) / static_cast<double>(on_runs.size()),
      static_cast<double>(sent) / static_cast<double>(on_runs.size()) / static_cast<double>(steps),
      dropped, lost);
}

}  // namespace

int bench_telemetry_command(const std::vector<std::string>& argv) {
  const Args args(argv, arg_spec("bench telemetry"));
  args.expect_no_positional();
  const bool quick = args.has("--quick");
  const int64_t events = args.get_int("--events", quick ? 200000 : 2000000, 1000, 50000000);
  const int64_t steps = args.get_int("--steps", quick ? 40 : 300, 10, 100000);
  const int64_t pairs = args.get_int("--pairs", quick ? 1 : 5, 1, 100);
  const bool json = args.has("--json");
  StdoutToStderr text_to_stderr(json);
  fmt::print("bench telemetry: protocol v{}, loopback TCP, {} cores{}\n", net::kProtocolVersion,
             bench::usable_cores(), quick ? " (--quick)" : "");
  std::fflush(stdout);
  Json out{{"bench", "telemetry"},           {"protocol_version", net::kProtocolVersion},
           {"cores", bench::usable_cores()}, {"ingest", Json::object()},
           {"publish_ns", Json::object()},   {"overhead", Json::object()}};
  bench_ingest(events, out["ingest"]);
  bench_publish_cost(quick ? 20000 : 200000, out["publish_ns"]);
  bench_overhead(steps, pairs, out["overhead"]);
  if (json) {
    text_to_stderr.restore();
    print_json(out);
  }
  return 0;
}

}  // namespace shardlab::cli
