// `shardlab monitor`, `shardlab replay` and `shardlab export`: the headless side of telemetry.
//
//   monitor --listen ADDR:PORT [--record RUN.slrec] [--token-file F] [--until-done]
//           [--duration S] [--interval S]
//       a collector printing the live per-rank table (step, loss, memory, comm time, last seen,
//       STRAGGLER / SILENT / FAILED flags; a rank whose connection ended before it finished,
//       killed or crashed, shows as failed with that reason at once). The token:
//       SHARDLAB_TELEMETRY_TOKEN, or --token-file (created with a fresh token when it does not
//       exist), or a fresh one written to ./shardlab-monitor.token. Listens on loopback unless ADDR
//       says otherwise.
//   --http ADDR:PORT serves the web dashboard, /api/run and /metrics beside it (web_setup.h);
//   --job FILE gives the page the job's planned memory per rank.
// `replay` and `export` are in replay_command.cpp.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/stop_signal.h"
#include "engine/cli/telemetry_setup.h"
#include "engine/cli/web_setup.h"
#include "engine/telemetry/events.h"
#include "net/auth.h"
#include "net/collector.h"
#include "net/consumers.h"
#include "net/exporters.h"
#include "net/publisher.h"
#include "net/recording.h"

namespace shardlab::cli {
namespace {}  // namespace

int monitor_command(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("monitor"));
  if (!args.positional().empty())
    SL_THROW(UsageError, "monitor takes no positional arguments (got '{}')", args.positional()[0]);
  if (!args.has("--listen"))
    SL_THROW(UsageError, "monitor needs --listen ADDR:PORT, e.g. --listen 127.0.0.1:7070");
  const std::optional<HttpAddress> http = http_address(args);
  SL_ENFORCE_T(UsageError, http || !args.has("--job"),
               "--job only applies with --http (it gives the web page the planned memory)");
  // Ctrl-C from here on stops the monitor cleanly (and keeps the recording).
  StopSignal stop;
  net::CollectorOptions o;
  net::parse_host_port(args.get("--listen"), o.address, o.port, "--listen", true);
  if (o.address != "127.0.0.1" && o.address != "localhost" && o.address != "::1")
    fmt::print(stderr,
               "monitor: listening on {}, not loopback: workers on other machines can connect "
               "(they still need the token)\n",
               o.address);
  const double duration = positive_seconds(args, "--duration", 0);
  const double interval = positive_seconds(args, "--interval", 1.0);
  o.token = collector_token(args, "monitor");
  o.log = [](const std::string& line) { fmt::print(stderr, "monitor: {}\n", line); };
  net::RunModelConsumer model;
  std::unique_ptr<net::RecordingConsumer> recording;
  std::vector<net::MessageConsumer*> consumers{&model};
  if (args.has("--record")) {
    check_record_path(args);
    recording = std::make_unique<net::RecordingConsumer>(args.get("--record"));
    consumers.push_back(recording.get());
  }
  const net::DashboardInfo info =
      args.has("--job") ? planned_info(args.get("--job"), "live") : net::DashboardInfo{};
  net::Collector collector(o, consumers);
  collector.start();
  std::unique_ptr<net::WebServer> web;
  if (http) web = serve_live(*http, collector, model.model(), info, o.token);
  fmt::print("monitor: listening on {}:{}{}\n", o.address, collector.port(),
             recording ? " recording to " + args.get("--record") : std::string());
  std::fflush(stdout);
  const bool tty = isatty(STDOUT_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  bool done = false;
  while (!stop.requested() && !done) {
    // In slices, so Ctrl-C is seen within 0.1 s whatever the interval.
    const auto wake = std::chrono::steady_clock::now() + std::chrono::duration<double>(interval);
    while (!stop.requested() && std::chrono::steady_clock::now() < wake)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::string table;
    collector.call([&] {
      table = model.model().table(telemetry::now_seconds());
      done = args.has("--until-done") && model.model().all_done();
      if (recording) recording->writer().flush();  // readable while it grows
    });
    if (tty) fmt::print("\x1b[H\x1b[2J");
    fmt::print("{}\n", table);
    std::fflush(stdout);
    if (duration > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= duration)
      break;
  }
  stop.release();  // a second Ctrl-C ends it at once
  collector.stop();
  if (web) print_web_stats(*web);
  const net::CollectorStats st = collector.stats();
  if (recording) recording->writer().flush();
  fmt::print(
      "monitor: {} connections ({} authenticated, {} refused{}), {} messages{}\n", st.accepted,
      st.authenticated, st.rejected,
      st.lost > 0 ? fmt::format(", {} lost before their rank finished", st.lost) : std::string(),
      st.messages, recording ? " recorded to " + args.get("--record") : std::string());
  return 0;
}

}  // namespace shardlab::cli
