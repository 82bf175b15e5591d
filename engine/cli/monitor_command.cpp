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
//   replay RUN.slrec          the same table from a recording
//   export RUN.slrec [--chrome-trace OUT.json] [--csv OUT.csv]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "engine/cli/args.h"
#include "engine/cli/commands.h"
#include "engine/telemetry/events.h"
#include "net/auth.h"
#include "net/collector.h"
#include "net/consumers.h"
#include "net/exporters.h"
#include "net/publisher.h"
#include "net/recording.h"

namespace shardlab::cli {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) {
  g_stop = true;
}

// The token the monitor expects, and where workers find it.
std::string monitor_token(const Args& args) {
  // An explicit --token-file wins over the variable (as for the workers).
  if (const char* env = std::getenv(net::kTokenEnv); env && *env && !args.has("--token-file")) {
    fmt::print(stderr, "monitor: using the token in {}\n", net::kTokenEnv);
    return net::find_token("");
  }
  const std::string path = args.get("--token-file", "shardlab-monitor.token");
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    fmt::print(stderr, "monitor: using the token in {}\n", path);
    return net::read_token_file(path);
  }
  const std::string token = net::make_token();
  net::write_token_file(path, token);
  fmt::print(stderr,
             "monitor: wrote a new token to {} (workers: --token-file {} or {}=<its contents>)\n",
             path, path, net::kTokenEnv);
  return token;
}

double positive_seconds(const Args& args, const std::string& flag, double fallback) {
  if (!args.has(flag)) return fallback;
  const std::string text = args.get(flag);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v > 0) || v > 1e7)
    SL_THROW(UsageError, "{}: expected a positive number of seconds, got '{}'", flag, text);
  return v;
}

}  // namespace

int monitor_command(const std::vector<std::string>& argv) {
  Args args(argv, {{"--listen", "--record", "--token-file", "--duration", "--interval"},
                   {"--until-done"}});
  if (!args.positional().empty())
    SL_THROW(UsageError, "monitor takes no positional arguments (got '{}')", args.positional()[0]);
  if (!args.has("--listen"))
    SL_THROW(UsageError, "monitor needs --listen ADDR:PORT, e.g. --listen 127.0.0.1:7070");
  // Ctrl-C from here on stops the monitor cleanly (and keeps the recording).
  g_stop = false;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  net::CollectorOptions o;
  net::parse_host_port(args.get("--listen"), o.address, o.port, "--listen", true);
  if (o.address != "127.0.0.1" && o.address != "localhost" && o.address != "::1")
    fmt::print(stderr,
               "monitor: listening on {}, not loopback: workers on other machines can connect "
               "(they still need the token)\n",
               o.address);
  const double duration = positive_seconds(args, "--duration", 0);
  const double interval = positive_seconds(args, "--interval", 1.0);
  o.token = monitor_token(args);
  o.log = [](const std::string& line) { fmt::print(stderr, "monitor: {}\n", line); };
  net::RunModelConsumer model;
  std::unique_ptr<net::RecordingConsumer> recording;
  std::vector<net::MessageConsumer*> consumers{&model};
  if (args.has("--record")) {
    recording = std::make_unique<net::RecordingConsumer>(args.get("--record"));
    consumers.push_back(recording.get());
  }
  net::Collector collector(o, consumers);
  collector.start();
  fmt::print("monitor: listening on {}:{}{}\n", o.address, collector.port(),
             recording ? " recording to " + args.get("--record") : std::string());
  std::fflush(stdout);
  const bool tty = isatty(STDOUT_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  bool done = false;
  while (!g_stop && !done) {
    // In slices, so Ctrl-C is seen within 0.1 s whatever the interval.
    const auto wake = std::chrono::steady_clock::now() + std::chrono::duration<double>(interval);
    while (!g_stop && std::chrono::steady_clock::now() < wake)
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
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends it at once
  std::signal(SIGTERM, SIG_DFL);
  collector.stop();
  const net::CollectorStats st = collector.stats();
  if (recording) recording->writer().flush();
  fmt::print(
      "monitor: {} connections ({} authenticated, {} refused{}), {} messages{}\n", st.accepted,
      st.authenticated, st.rejected,
      st.lost > 0 ? fmt::format(", {} lost before their rank finished", st.lost) : std::string(),
      st.messages, recording ? " recorded to " + args.get("--record") : std::string());
  return 0;
}

int replay_command(const std::vector<std::string>& argv) {
  Args args(argv, {{}, {}});
  if (args.positional().size() != 1)
    SL_THROW(UsageError, "replay needs exactly one recording, e.g. shardlab replay runs/x.slrec");
  const net::RecordingContents rec = net::read_recording(args.positional()[0]);
  net::RunModel model;
  net::DiagnosisTracker diagnoses;
  double last = 0;
  for (const net::Message& m : rec.messages) {
    model.add(m);
    if (const auto* e = std::get_if<telemetry::Event>(&m)) {
      last = std::max(last, e->time);
      if (std::holds_alternative<telemetry::StepEvent>(e->payload)) diagnoses.update(model);
    }
  }
  // How the diagnosis went over the run, then the final state.
  for (const net::DiagnosisChange& c : diagnoses.changes()) {
    if (c.lines.empty()) fmt::print("diagnosis at step {}: nobody holds the others back\n", c.step);
    for (const std::string& line : c.lines) fmt::print("diagnosis at step {}: {}\n", c.step, line);
  }
  fmt::print("{}\n", model.table(last));
  fmt::print("replay: {} messages{}\n", rec.messages.size(),
             rec.complete ? std::string() : "; " + rec.note);
  return 0;
}

int export_command(const std::vector<std::string>& argv) {
  Args args(argv, {{"--chrome-trace", "--csv"}, {}});
  if (args.positional().size() != 1)
    SL_THROW(UsageError,
             "export needs exactly one recording, e.g. shardlab export runs/x.slrec "
             "--chrome-trace trace.json");
  if (!args.has("--chrome-trace") && !args.has("--csv"))
    SL_THROW(UsageError, "export needs --chrome-trace OUT.json and/or --csv OUT.csv");
  const net::RecordingContents rec = net::read_recording(args.positional()[0]);
  if (!rec.complete) fmt::print(stderr, "export: {}\n", rec.note);
  SL_ENFORCE(!rec.messages.empty(), "export: {} holds no complete block (nothing to export){}",
             args.positional()[0], rec.complete ? "" : ": " + rec.note);
  auto write = [&](const std::string& path, auto&& body) {
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      SL_ENFORCE_T(IoError, out.good(), "cannot write {}", tmp);
      body(out);
      out.flush();
      SL_ENFORCE_T(IoError, out.good(), "writing {} failed (disk full?)", tmp);
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    SL_ENFORCE_T(IoError, !ec, "cannot rename {} to {}: {}", tmp, path, ec.message());
    fmt::print("export: wrote {}\n", path);
  };
  if (args.has("--chrome-trace"))
    write(args.get("--chrome-trace"),
          [&](std::ostream& out) { net::write_chrome_trace(rec.messages, out); });
  if (args.has("--csv"))
    write(args.get("--csv"), [&](std::ostream& out) { net::write_step_csv(rec.messages, out); });
  return 0;
}

}  // namespace shardlab::cli
