// shardlab bench web: what the web dashboard costs the collector, and a large run to look at.
//
//   shardlab bench web [--events N] [--viewers V] [--ranks R]
//       ingest    the collector (its io_context on one thread, which the web server shares) takes
//                 N STEP events over one loopback connection into a RunModel that already holds R
//                 ranks (each with a HELLO and a few steps), first with no viewer, then with V
//                 dashboard viewers connected over WebSocket (clients on another thread, reading
//                 every frame). Median of 3 runs each; the viewers' frames and bytes are counted.
//   shardlab bench web --serve --ranks R --http ADDR:PORT [--duration S] [--step-ms MS]
//       a synthetic R-rank 2-stage run (every rank a step each MS ms: forward, backward, a tp and
//       a dp all-reduce, optimizer, memory, step) fed to a collector's model, served at --http:
//       open it in a browser to see the page at scale (tests/web/browser_check.py --frame-times
//       reads the page's own render times).
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <thread>

#include "engine/bench/harness.h"
#include "net/bench/ingest_bench.h"
#include "engine/bench/synthetic_run.h"
#include "net/bench/viewer_bench.h"
#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/cli/stop_signal.h"
#include "engine/cli/web_setup.h"
#include "engine/telemetry/events.h"
#include "net/auth.h"
#include "net/collector.h"
#include "net/consumers.h"
#include "net/protocol.h"

namespace shardlab::cli {
namespace {

using bench::add_step;
using bench::populate;

using Clock = std::chrono::steady_clock;

constexpr int32_t kIngestRank = 0;

// N STEP events of kIngestRank, seq 0..N-1, encoded back to back; their steps follow the 5
// populate() gave every rank.
std::vector<uint8_t> encode_steps(int64_t n) {
  telemetry::StepEvent s;
  s.step_seconds = 0.003;
  return net::encode_steps(kIngestRank, n, 6, s);
}

void bench_ingest(int64_t events, int viewers, int ranks, Json& report) {
  const std::vector<uint8_t> bytes = encode_steps(events);
  report = Json{{"events", events}, {"rows", Json::array()}};
  fmt::print(
      "ingest: {} STEP events over one loopback connection into a run model of {} ranks; the "
      "collector's io_context on one thread, shared with the web server (frames at 10 Hz)\n",
      events, ranks);
  fmt::print("  {:<9} {:>12} {:>9}  {}\n", "viewers", "events/s", "seconds",
             "frames and bytes the viewers received during the run (median of 3 runs)");
  for (const int v : {0, viewers}) {
    uint64_t frames = 0, received = 0;
    const std::vector<double> times = bench::sample_seconds(0, 3, [&] {
      auto model = std::make_unique<net::RunModelConsumer>();
      populate(model->model(), ranks);
      std::unique_ptr<net::WebServer> web;
      std::unique_ptr<net::BenchViewers> clients;
      const double s = net::measure_ingest(
          bytes, events, kIngestRank, {model.get()}, [&](net::Collector& collector) {
            net::WebContent content;
            content.info.mode = "live";
            content.live = &model->model();
            net::WebOptions o;
            web = std::make_unique<net::WebServer>(collector.io_context(), o, content);
            collector.on_stop(web->closer());
            web->start();
            if (v == 0) return;
            clients = std::make_unique<net::BenchViewers>(web->port(), v);
            SL_ENFORCE_T(IoError, clients->wait_first(),
                         "bench web: the viewers did not all get a first frame in 30 s");
          });
      if (clients) {
        frames = clients->frames();
        received = clients->bytes();
        clients->stop();
        const net::WebStats st = web->stats();
        fmt::print("    (server: {} frames, {:.1f} MB to {} viewers)\n", st.frames,
                   static_cast<double>(st.bytes) / 1e6, v);
      }
      return s;
    });
    const double median = bench::median(times);
    report["rows"].push_back(Json{{"viewers", v},
                                  {"events_per_second", static_cast<double>(events) / median},
                                  {"seconds", median}});
    fmt::print("  {:<9} {:>12.0f} {:>9.3f}  {}\n", v, static_cast<double>(events) / median, median,
               v == 0 ? std::string("-")
                      : fmt::format("{} frames, {:.1f} MB (last run)", frames,
                                    static_cast<double>(received) / 1e6));
    std::fflush(stdout);
  }
}

// What a tick costs the collector thread: FrameBuilder::build at `ranks` ranks, every rank one step
// further between builds (a delta holding every row and a new heat-map column), and a full frame.
void bench_frames(int ranks, Json& report) {
  net::RunModel model;
  populate(model, ranks);
  net::DashboardInfo info;
  net::FrameBuilder builder;
  const double now = telemetry::now_seconds();
  builder.build(net::FrameInput{model, info, now, nullptr}, false);
  std::vector<double> delta_s, full_s;
  size_t delta_bytes = 0, full_bytes = 0;
  for (int64_t step = 6; step < 26; ++step) {
    for (int r = 0; r < ranks; ++r)
      add_step(model, r, ranks, step, now + 0.2 * static_cast<double>(step), 0.2);
    auto t0 = Clock::now();
    const net::FrameBuilder::Frame f =
        builder.build(net::FrameInput{model, info, now, nullptr}, false);
    delta_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    delta_bytes = f.delta ? f.delta->size() : 0;
    t0 = Clock::now();
    const std::string full = net::full_state(net::FrameInput{model, info, now, nullptr});
    full_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    full_bytes = full.size();
  }
  report = Json{{"delta_ms", 1e3 * bench::median(delta_s)},
                {"delta_bytes", delta_bytes},
                {"full_ms", 1e3 * bench::median(full_s)},
                {"full_bytes", full_bytes}};
  fmt::print(
      "frames at {} ranks (median of 20): a delta with every rank one step on {:.2f} ms ({:.0f} "
      "KB), a full frame {:.2f} ms ({:.0f} KB)\n",
      ranks, 1e3 * bench::median(delta_s), static_cast<double>(delta_bytes) / 1e3,
      1e3 * bench::median(full_s), static_cast<double>(full_bytes) / 1e3);
  std::fflush(stdout);
}

int serve(const Args& args, int ranks) {
  const std::optional<HttpAddress> http = http_address(args);
  SL_ENFORCE_T(UsageError, http.has_value(), "bench web --serve needs --http ADDR:PORT");
  const double duration = positive_seconds(args, "--duration", 0);
  const double step_seconds =
      static_cast<double>(args.get_int("--step-ms", 500, 20, 60000)) / 1000.0;
  net::RunModelConsumer model;
  net::CollectorOptions co;
  co.token = net::make_token();
  net::Collector collector(co, {&model});
  collector.start();
  net::DashboardInfo info;
  info.job_name = fmt::format("bench-web ({} synthetic ranks)", ranks);
  collector.call([&] { populate(model.model(), ranks); });
  auto web = serve_live(*http, collector, model.model(), info, co.token);
  StopSignal stop;
  const auto start = Clock::now();
  int64_t step = 6;
  while (!stop.requested()) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (duration > 0 && elapsed >= duration) break;
    const double now = telemetry::now_seconds();
    collector.call([&] {
      for (int r = 0; r < ranks; ++r) add_step(model.model(), r, ranks, step, now, step_seconds);
    });
    ++step;
    std::this_thread::sleep_for(std::chrono::duration<double>(step_seconds));
  }
  stop.release();
  collector.stop();
  print_web_stats(*web);
  return 0;
}

}  // namespace

int bench_web_command(const std::vector<std::string>& argv) {
  const Args args(argv, arg_spec("bench web"));
  args.expect_no_positional();
  const int ranks = static_cast<int>(args.get_int("--ranks", 1024, 1, 65536));
  const bool json = args.has("--json");
  SL_ENFORCE_T(UsageError, !(json && args.has("--serve")),
               "--json reports the measurement; --serve measures nothing");
  if (args.has("--serve")) return serve(args, ranks);
  const int64_t events = args.get_int("--events", 2000000, 1000, 50000000);
  const int viewers = static_cast<int>(args.get_int("--viewers", 100, 1, 1000));
  StdoutToStderr text_to_stderr(json);
  fmt::print("bench web: {} cores\n", bench::usable_cores());
  Json out{{"bench", "web"},
           {"cores", bench::usable_cores()},
           {"ranks", ranks},
           {"frames", Json::object()},
           {"ingest", Json::object()}};
  bench_frames(ranks, out["frames"]);
  bench_ingest(events, viewers, ranks, out["ingest"]);
  if (json) {
    text_to_stderr.restore();
    print_json(out);
  }
  return 0;
}

}  // namespace shardlab::cli
