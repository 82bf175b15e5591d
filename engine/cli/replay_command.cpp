// `shardlab replay` and `shardlab export`: a recording read back.
//
//   replay RUN.slrec          how the diagnosis went over the run, then the final per-rank table
//   replay RUN.slrec --http ADDR:PORT [--job FILE] [--token-file F] [--duration S]
//                             the recording in the web dashboard: each viewer plays it back with
//                             play/pause, a position slider and a speed; serves until Ctrl-C (or S
//                             seconds). --job gives the page the planned memory.
//   export RUN.slrec [--chrome-trace OUT.json] [--csv OUT.csv] [--tensorboard DIR]
//                             DIR/rank<N>/events.out.tfevents.* for `tensorboard --logdir DIR`
//                             (net/tensorboard.h: the tags and the layout)
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/stop_signal.h"
#include "engine/cli/web_setup.h"
#include "engine/telemetry/events.h"
#include "net/exporters.h"
#include "net/recording.h"
#include "net/run_model.h"
#include "net/tensorboard.h"
#include "net/web/web_thread.h"

namespace shardlab::cli {
namespace {

int replay_on_the_web(const Args& args, const HttpAddress& http,
                      const net::RecordingContents& rec) {
  if (!rec.complete) fmt::print(stderr, "replay: {}\n", rec.note);
  SL_ENFORCE(!rec.messages.empty(), "replay: {} holds no complete block (nothing to show){}",
             args.positional()[0], rec.complete ? "" : ": " + rec.note);
  const double duration = positive_seconds(args, "--duration", 0);
  net::WebContent content;
  content.info =
      args.has("--job") ? planned_info(args.get("--job"), "replay") : net::DashboardInfo{};
  content.info.mode = "replay";
  content.recording = std::make_shared<const std::vector<net::Message>>(rec.messages);
  // Off loopback the page asks for a token.
  const std::string token =
      net::is_loopback(http.host) ? std::string() : collector_token(args, "replay");
  net::WebServerThread served(web_options(http, token), content);
  net::WebServer& web = served.server();
  served.start();
  fmt::print("web: replaying {} ({} messages) at {}\n", args.positional()[0], rec.messages.size(),
             web.url());
  std::fflush(stdout);
  StopSignal stop;
  const auto start = std::chrono::steady_clock::now();
  while (
      !stop.requested() &&
      (duration <= 0 ||
       std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < duration))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop.release();
  served.stop();
  print_web_stats(web);
  return 0;
}

}  // namespace

int replay_command(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("replay"));
  if (args.positional().size() != 1)
    SL_THROW(UsageError, "replay needs exactly one recording, e.g. shardlab replay runs/x.slrec");
  const std::optional<HttpAddress> http = http_address(args);
  SL_ENFORCE_T(UsageError, http || (!args.has("--job") && !args.has("--duration")),
               "--job and --duration only apply with --http");
  const net::RecordingContents rec = net::read_recording(args.positional()[0]);
  if (http) return replay_on_the_web(args, *http, rec);
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
  Args args(argv, arg_spec("export"));
  if (args.positional().size() != 1)
    SL_THROW(UsageError,
             "export needs exactly one recording, e.g. shardlab export runs/x.slrec "
             "--chrome-trace trace.json");
  if (!args.has("--chrome-trace") && !args.has("--csv") && !args.has("--tensorboard"))
    SL_THROW(UsageError,
             "export needs --chrome-trace OUT.json, --csv OUT.csv and/or --tensorboard DIR");
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
  if (args.has("--tensorboard")) {
    const net::TensorBoardExport tb =
        net::write_tensorboard(rec.messages, args.get("--tensorboard"));
    fmt::print("export: wrote {} scalar events for {} ranks under {} (tensorboard --logdir {})\n",
               tb.events, tb.files.size(), args.get("--tensorboard"), args.get("--tensorboard"));
  }
  return 0;
}

}  // namespace shardlab::cli
