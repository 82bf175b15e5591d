#include "engine/bench/telemetry_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "engine/run/rank_runner.h"
#include "net/auth.h"
#include "net/collector.h"
#include "net/consumers.h"
#include "net/publisher.h"

namespace shardlab::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

// resources/jobs/fashion_mlp.json (spelled out so that the command does not depend on the working
// directory), shortened to `steps` and without evaluation.
JobSpec demo_job(int64_t steps) {
  JobSpec job;
  job.name = "fashion-mlp";
  job.model.kind = "mlp";
  job.model.seed = 1;
  job.model.mlp.hidden = {256, 128};
  job.model.mlp.activation = "relu";
  job.data.dataset = "fashion-mnist";
  job.data.path = "/usr/share/datasets/fashion-mnist";
  job.optimizer.name = "adam";
  job.optimizer.lr = 0.001;
  job.train.steps = steps;
  job.train.batch_size = 64;
  job.train.log_every = 100;
  job.train.eval_every = 0;
  job.train.eval_batches = 1;
  job.train.schedule.kind = "warmup_cosine";
  job.train.schedule.warmup_steps = 100;
  job.train.schedule.min_lr_ratio = 0.1;
  job.parallel.strategy = "zero2";
  job.parallel.world_size = 4;
  job.parallel.backend = "threads";
  return job;
}

OverheadRun run_once(const JobSpec& job, const Datasets& data, bool telemetry_on,
                     const std::string& recording_path) {
  OverheadRun out;
  out.telemetry = telemetry_on;
  if (!telemetry_on) {
    out.train_seconds = run_threads_job(job, data).result.train_seconds;
    return out;
  }
  const int world = static_cast<int>(job.parallel.world_size);
  net::RunModelConsumer model;
  auto recording = std::make_unique<net::RecordingConsumer>(recording_path);
  net::CollectorOptions copt;
  copt.token = net::make_token();
  net::Collector collector(copt, {&model, recording.get()});
  collector.start();
  std::vector<std::unique_ptr<net::Publisher>> publishers;
  for (int r = 0; r < world; ++r) {
    net::PublisherOptions o;
    o.port = collector.port();
    o.token = copt.token;
    o.hello.job_id = job.name;
    o.hello.rank = r;
    o.hello.world = world;
    o.hello.dp = world;
    o.hello.dp_i = r;
    publishers.push_back(std::make_unique<net::Publisher>(std::move(o)));
  }
  RankRunOptions opts;
  opts.telemetry = [&publishers](int rank) -> telemetry::TelemetrySink* {
    const auto i = static_cast<size_t>(rank);
    return rank >= 0 && i < publishers.size() ? publishers[i].get() : nullptr;
  };
  out.train_seconds = run_threads_job(job, data, opts).result.train_seconds;
  for (auto& p : publishers) {
    p->close();
    out.published += p->published();
    out.sent += p->sent();
    out.dropped += p->dropped();
  }
  // Every HELLO and every event sent, handed on before the collector stops.
  const uint64_t want = out.sent + static_cast<uint64_t>(world);
  const auto t0 = Clock::now();
  while (collector.stats().messages < want && seconds_since(t0) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  collector.stop();
  const uint64_t messages = collector.stats().messages;  // HELLOs and events
  out.received = messages - std::min<uint64_t>(messages, static_cast<uint64_t>(world));
  recording->writer().flush();
  out.recorded = recording->writer().messages();
  out.all_finished =
      model.model().all_done() && model.model().ranks().size() == static_cast<size_t>(world);
  for (const auto& [rank, state] : model.model().ranks())
    if (state.state != telemetry::JobState::finished || state.step != job.train.steps)
      out.all_finished = false;
  recording.reset();
  std::error_code ec;
  std::filesystem::remove(recording_path, ec);
  return out;
}

// A STEP event as the training loop makes one.
telemetry::Event step_event(int64_t step) {
  telemetry::Event e;
  e.time = telemetry::now_seconds();
  telemetry::StepEvent s;
  s.step = step;
  s.loss = 2.3;
  s.step_seconds = 1e-3;
  e.payload = s;
  return e;
}

// Mean nanoseconds per publish() over `events` calls made in chunks of kChunk; between chunks
// (untimed) the sink's thread is given time to take them, so the queue never fills. `drained`
// says whether the sink has taken all published so far.
double publish_ns(telemetry::TelemetrySink& sink, int64_t events,
                  const std::function<bool()>& drained) {
  constexpr int64_t kChunk = 1000;
  double seconds = 0;
  for (int64_t done = 0; done < events; done += kChunk) {
    std::vector<telemetry::Event> chunk;  // made before the clock starts: only publish() is timed
    chunk.reserve(kChunk);
    for (int64_t i = 0; i < kChunk; ++i) chunk.push_back(step_event(done + i));
    const auto t0 = Clock::now();
    for (auto& e : chunk) sink.publish(std::move(e));
    seconds += seconds_since(t0);
    const auto wait0 = Clock::now();
    while (!drained() && seconds_since(wait0) < 5)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return 1e9 * seconds / static_cast<double>(events);
}

}  // namespace shardlab::bench
