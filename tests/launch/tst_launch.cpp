// The launch layer on real jobs, sockets and processes (no mocks):
// - prepare: fashion_mlp prepared once holds its completed model, topology, communication options
//   and HELLOs; plan_job reads nothing; gpt-3d's pp x tp x dp topology reaches the comm sinks.
// - threads: run_threads with RunSinks recording and fanning out to a queue; publishers streaming
//   to a RunCollector over loopback with the collector's token; ThreadsRun stopped, and failing on
//   missing data with the path.
// - mpirun: `shardlab worker` under a real mpirun, recorded by the loopback collector.
// - the worker command line, the remote command, the end of a run judged from a RunModel, the
//   app's mode rules.
// - cleanup: a real process tree (a group, a grandchild, a "worker" that left its group) killed.
#include <QtTest>

#include <QElapsedTimer>
#include <QStandardPaths>
#include <QTemporaryDir>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "engine/core/error.h"
#include "engine/launch/message_queue.h"
#include "engine/launch/mpirun.h"
#include "engine/launch/prepared_job.h"
#include "engine/launch/process_tree.h"
#include "engine/launch/run_collector.h"
#include "engine/launch/run_end.h"
#include "engine/launch/run_mode.h"
#include "engine/launch/run_sinks.h"
#include "engine/launch/threads_run.h"
#include "engine/launch/workers.h"
#include "net/auth.h"
#include "net/recording.h"

extern char** environ;

using namespace shardlab;
using namespace shardlab::launch;

namespace {

// fashion_mlp.json, short and quiet; `extra` overrides come last (the last --set wins).
JobSpec fashion(std::vector<std::string> extra = {}, int steps = 6) {
  extra.insert(extra.begin(), {"train.steps=" + std::to_string(steps), "train.log_every=1000",
                               "train.eval_every=0", "train.eval_batches=1"});
  return load_job(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json", extra);
}

// The ranks whose HELLO is among `messages`, and how many events each sent.
std::map<int, int> events_by_rank(const std::vector<net::Message>& messages,
                                  std::set<int>* hellos) {
  std::map<int, int> out;
  for (const net::Message& m : messages) {
    if (const auto* h = std::get_if<net::Hello>(&m)) hellos->insert(h->rank);
    if (const auto* e = std::get_if<telemetry::Event>(&m)) ++out[e->rank];
  }
  return out;
}

std::vector<net::Message> drain(MessageQueue& q) {
  std::vector<net::Message> out;
  for (auto& [m, t] : q.take()) out.push_back(std::move(m));
  return out;
}

// What can be read of a /proc file: a process that exits while it is read makes the read fail
// (ESRCH), on which an ifstream's buffer throws; that reads as the part read so far.
std::string proc_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
  }
  return text;
}

bool alive(pid_t pid) {
  // A zombie (killed, not yet reaped by its parent) counts as gone.
  if (::kill(pid, 0) != 0) return false;
  const std::string text = proc_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = text.rfind(')');
  return close != std::string::npos && text.size() > close + 2 && text[close + 2] != 'Z';
}

net::Message state_event(int rank, telemetry::JobState s, std::string reason = {}) {
  telemetry::Event e;
  e.rank = rank;
  e.time = telemetry::now_seconds();
  e.payload = telemetry::JobStateEvent{s, std::move(reason)};
  return net::Message{e};
}

}  // namespace

class TestLaunch : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;  // default recordings go to its runs/ (SHARDLAB_RUNS_DIR)

 public:
  TestLaunch() { qputenv("SHARDLAB_RUNS_DIR", tmp_.filePath("runs").toLocal8Bit()); }

 private slots:

  void prepareOnceHoldsEveryFact() {
    QVERIFY(tmp_.isValid());
    const JobSpec job = fashion({"parallel.timeout_s=12.5"});
    const PreparedJob p = prepare_job(job);
    QVERIFY(p.has_data());
    QCOMPARE(p.job.model.mlp.input_dim, int64_t{784});  // completed from the data
    QCOMPARE(p.job.model.mlp.num_classes, int64_t{10});
    QCOMPARE(p.topology.world(), 4);
    QCOMPARE(p.topology.dp(), 4);
    QCOMPARE(p.comm.timeout, std::chrono::milliseconds(12500));
    QVERIFY(!p.comm_topology().has_value());  // 1-D: the world communicator names its ranks
    const net::Hello h = p.hello(2);
    QCOMPARE(h.rank, 2);
    QCOMPARE(h.world, 4);
    QCOMPARE(h.dp_i, 2);
    QCOMPARE(h.job_id, std::string("fashion-mlp"));
    QCOMPARE(h.pid, static_cast<int64_t>(getpid()));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, p.hello(4));

    // plan_job reads nothing: a job whose data is missing plans, and fails when loaded.
    PreparedJob missing = plan_job(fashion({"data.path=/nonexistent"}));
    QVERIFY(!missing.has_data());
    try {
      load_data(missing);
      QFAIL("load_data read a missing directory");
    } catch (const IoError& e) {
      QVERIFY2(std::string(e.what()).find("/nonexistent") != std::string::npos, e.what());
    }

    const JobSpec gpt =
        load_job(SHARDLAB_SOURCE_DIR "/resources/jobs/gpt-3d.json", {"train.steps=1"});
    const PreparedJob g = plan_job(gpt);
    QCOMPARE(g.topology.pp(), static_cast<int>(gpt.parallel.pp));
    QCOMPARE(g.topology.tp(), static_cast<int>(gpt.parallel.tp));
    QVERIFY(g.comm_topology().has_value());
    QCOMPARE(g.comm_topology()->world(), static_cast<int>(gpt.parallel.world_size));
    const Coord c = g.topology.coord(g.topology.world() - 1);
    QCOMPARE(g.hello(g.topology.world() - 1).pp_i, c.pp);
    QCOMPARE(g.hello(g.topology.world() - 1).tp_i, c.tp);
  }

  void threadsModeRecordsAndFansOut() {
    const PreparedJob p = prepare_job(fashion());
    MessageQueue queue;
    SinkOptions so;
    so.record_path = tmp_.filePath("sub/dir/threads.slrec").toStdString();
    so.also = {&queue};
    RunSinks sinks(p, {0, 1, 2, 3}, so);
    RankRunOptions o;
    o.telemetry = sinks.sink_of();
    const ParallelRunResult run = run_threads(p, o);
    QCOMPARE(run.result.steps, int64_t{6});
    QCOMPARE(run.ranks.size(), size_t{4});
    const SinksClosed closed = sinks.close();
    QVERIFY(closed.recorded && !closed.streamed);
    QVERIFY(closed.recorded_events > 0);
    QCOMPARE(closed.record_failures, uint64_t{0});
    QCOMPARE(sinks.close().recorded_events, closed.recorded_events);  // idempotent

    std::set<int> hellos;
    const auto recorded = events_by_rank(net::read_recording(closed.record_path).messages, &hellos);
    QCOMPARE(hellos, (std::set<int>{0, 1, 2, 3}));
    std::set<int> none;
    const auto queued = events_by_rank(drain(queue), &none);
    QVERIFY(none.empty());       // the queue gets events; the HELLOs are the caller's
    QCOMPARE(queued, recorded);  // every event went to both
    QCOMPARE(queued.size(), size_t{4});
  }

  void publishersStreamToTheCollectorWithItsToken() {
    const PreparedJob p = prepare_job(fashion({"train.steps=3"}));
    MessageQueue queue;
    CollectorRunOptions co;
    co.record_path = tmp_.filePath("collected.slrec").toStdString();
    co.consumers = {&queue};
    RunCollector collector(co);
    QVERIFY(collector.port() > 0);
    QCOMPARE(collector.token().size(), size_t{64});
    {
      SinkOptions so;
      so.address = "127.0.0.1:" + std::to_string(collector.port());
      so.token = collector.token();
      RunSinks sinks(p, {0, 1, 2, 3}, so);
      RankRunOptions o;
      o.telemetry = sinks.sink_of();
      (void)run_threads(p, o);
      const SinksClosed closed = sinks.close();
      QVERIFY(closed.streamed);
      QVERIFY(closed.sent > 0);
      QCOMPARE(closed.not_delivered, uint64_t{0});
    }
    QTRY_COMPARE_WITH_TIMEOUT(collector.stats().authenticated, uint64_t{4}, 10000);
    const uint64_t recorded = collector.finish();
    QVERIFY(recorded > 0);
    QCOMPARE(collector.finish(), recorded);
    std::set<int> hellos;
    const auto queued = events_by_rank(drain(queue), &hellos);
    QCOMPARE(hellos, (std::set<int>{0, 1, 2, 3}));
    QCOMPARE(queued.size(), size_t{4});
    QCOMPARE(net::read_recording(co.record_path).messages.size(), static_cast<size_t>(recorded));

    // A wrong token is refused: nothing of it reaches the consumers.
    MessageQueue other;
    CollectorRunOptions co2;
    co2.consumers = {&other};
    RunCollector refusing(co2);
    {
      SinkOptions so;
      so.address = "127.0.0.1:" + std::to_string(refusing.port());
      so.token = std::string(64, 'a');
      RunSinks sinks(p, {0}, so);
      telemetry::Event e;
      e.time = telemetry::now_seconds();
      e.payload = telemetry::LogLineEvent{"refused"};
      sinks.sink(0)->publish(std::move(e));
      QTRY_VERIFY_WITH_TIMEOUT(refusing.stats().rejected >= 1, 10000);
    }
    refusing.finish();
    QVERIFY(other.take().empty());
  }

  void threadsRunStopsAndFails() {
    MessageQueue queue;
    PreparedJob p = plan_job(fashion({}, 100000));
    ThreadsRun run(std::move(p), [&](int) -> telemetry::TelemetrySink* { return &queue; });
    // Wait for a step, then stop: every rank ends after the same step, and the run finishes.
    bool stepped = false;
    QElapsedTimer clock;
    clock.start();
    while (!stepped && !run.done() && clock.elapsed() < 120000) {
      for (auto& [m, t] : queue.take())
        if (const auto* e = std::get_if<telemetry::Event>(&m);
            e && std::holds_alternative<telemetry::StepEvent>(e->payload))
          stepped = true;
      if (!stepped) QTest::qWait(20);
    }
    QVERIFY2(stepped && !run.done(), run.message().c_str());
    run.stop();
    run.stop();
    run.join();
    QVERIFY(run.done());
    QVERIFY2(run.ok(), run.message().c_str());
    QVERIFY2(run.message().rfind("stopped after ", 0) == 0, run.message().c_str());

    ThreadsRun bad(plan_job(fashion({"data.path=/nonexistent"})), {});
    bad.join();
    QVERIFY(bad.done());
    QVERIFY(!bad.ok());
    QVERIFY2(bad.message().find("/nonexistent") != std::string::npos, bad.message().c_str());
  }

  void mpirunModeRecordsTheWorkers() {
    if (QStandardPaths::findExecutable("mpirun").isEmpty())
      QSKIP("mpirun not found (apt-get install openmpi-bin)");
    const std::string job_file = tmp_.filePath("mpi-job.json").toStdString();
    write_worker_job(fashion({"parallel.backend=mpi", "parallel.world_size=2"}, 4), job_file);
    MpirunWorkers run;
    run.ranks = 2;
    run.worker.program = SHARDLAB_CLI;
    run.worker.job_file = job_file;
    run.worker.quiet = true;
    run.record_path = tmp_.filePath("mpi/run.slrec").toStdString();
    std::vector<std::string> log;
    run.log = [&](const std::string& line) { log.push_back(line); };
    const MpirunDone done = run_mpirun_workers(run);
    QCOMPARE(done.status, 0);
    QCOMPARE(done.record_path, run.record_path);
    QVERIFY(done.recorded > 0);
    QVERIFY(qgetenv(net::kTokenEnv).isEmpty());  // the token left the environment again
    std::set<int> hellos;
    const auto recorded = events_by_rank(net::read_recording(done.record_path).messages, &hellos);
    QCOMPARE(hellos, (std::set<int>{0, 1}));
    QCOMPARE(recorded.size(), size_t{2});
    QCOMPARE(log.size(), size_t{2});  // one line per closed connection
  }

  // SIGTERM to `shardlab run` alone (a scheduler, `kill`) while its mpirun runs: the signal is
  // passed on, so mpirun and every worker end too, and the command ends with 128 + SIGTERM's
  // status text. Before, mpirun and the workers went on training without it.
  void sigtermToAnMpiRunEndsItsWorkers() {
    if (QStandardPaths::findExecutable("mpirun").isEmpty())
      QSKIP("mpirun not found (apt-get install openmpi-bin)");
    // A job file of its own, so its workers are told from any other test's.
    const std::string job_file = tmp_.filePath("sigterm_job.json").toStdString();
    {
      std::ifstream in(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json");
      std::ofstream out(job_file);
      out << in.rdbuf();
    }
    std::vector<std::string> args{SHARDLAB_CLI,
                                  "run",
                                  job_file,
                                  "--set",
                                  "parallel.backend=mpi",
                                  "--set",
                                  "parallel.world_size=2",
                                  "--set",
                                  "train.steps=1000000",
                                  "--set",
                                  "train.eval_every=0",
                                  "--quiet",
                                  "--no-record"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    QCOMPARE(posix_spawn(&pid, SHARDLAB_CLI, nullptr, nullptr, argv.data(), environ), 0);
    struct Reap {  // whatever happens: nothing of the run outlives the test
      pid_t pid;
      std::string job;
      ~Reap() {
        ::kill(pid, SIGKILL);
        for (pid_t w : workers_of(job)) ::kill(w, SIGKILL);
        int st = 0;
        waitpid(pid, &st, WNOHANG);
      }
    } reap{pid, job_file};
    // The two workers, and mpirun (its command line names the job and "worker" too).
    QTRY_VERIFY_WITH_TIMEOUT(workers_of(job_file).size() >= 2, 30000);
    const std::vector<pid_t> workers = workers_of(job_file);
    QCOMPARE(::kill(pid, SIGTERM), 0);
    int status = 0;
    QElapsedTimer t;
    t.start();
    pid_t r = 0;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && t.elapsed() < 30000)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    QVERIFY2(r == pid, "shardlab run did not end within 30 s of SIGTERM");
    QVERIFY(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    for (pid_t w : workers) QTRY_VERIFY_WITH_TIMEOUT(!alive(w), 20000);
    QVERIFY(workers_of(job_file).empty());
  }

  void workerCommandLines() {
    WorkerCommand w;
    w.program = "/opt/shard lab/shardlab";
    w.job_file = "/runs/job.json";
    w.sets = {"train.steps=5"};
    w.quiet = true;
    w.telemetry = "127.0.0.1:5000";
    w.save_model = "m.slmodel";
    QCOMPARE(worker_argv(w),
             (std::vector<std::string>{"/opt/shard lab/shardlab", "worker", "/runs/job.json",
                                       "--set", "train.steps=5", "--quiet", "--telemetry",
                                       "127.0.0.1:5000", "--save-model", "m.slmodel"}));
    w.token_file = "/runs/it's.token";
    // Both remote lines are worker_argv's words, shell-quoted where they need it.
    const std::string words =
        "'/opt/shard lab/shardlab' worker /runs/job.json --set train.steps=5 --quiet --telemetry "
        "127.0.0.1:5000 --token-file '/runs/it'\\''s.token' --save-model m.slmodel";
    QCOMPARE(remote_command(w, 4, false), "mpirun -np 4 " + words);
    QCOMPARE(remote_command(w, 2, true), "srun --mpi=pmix -n 2 " + words);
    // srun's argv (what tst_slurm runs, and the app shows): PMIx, then the worker's words.
    std::vector<std::string> srun{"srun", "--mpi=pmix", "-n", "2"};
    for (const std::string& word : worker_argv(w)) srun.push_back(word);
    QCOMPARE(srun_argv(w, 2), srun);
    QCOMPARE(shell_line(srun_argv(w, 2)), remote_command(w, 2, true));
    w.verify = true;
    QCOMPARE(worker_argv(w).back(), std::string("--verify"));
    QVERIFY_THROWS_EXCEPTION(shardlab::InvalidArgument, srun_argv(w, 0));
    QCOMPARE(advertise_host("10.1.2.3", ""), std::string("10.1.2.3"));
    QCOMPARE(advertise_host("0.0.0.0", "head.cluster"), std::string("head.cluster"));
    QCOMPARE(advertise_host("::1", ""), std::string("[::1]"));
    QVERIFY(!advertise_host("0.0.0.0", "").empty());
    const std::string a = unused_path(tmp_.filePath("u").toStdString(), ".x");
    std::ofstream(a).put('x');
    QCOMPARE(unused_path(tmp_.filePath("u").toStdString(), ".x"),
             tmp_.filePath("u-2.x").toStdString());
    QVERIFY(app_recording_path(fashion()).rfind(tmp_.filePath("runs").toStdString() + "/", 0) == 0);
  }

  void theEndOfARunWithWorkers() {
    net::RunModel model;
    const PreparedJob four = plan_job(fashion());
    for (int r = 0; r < 4; ++r) model.add(net::Message{four.hello(r)});
    QVERIFY(!remote_end(model));
    model.add(state_event(0, telemetry::JobState::finished));
    model.add(state_event(1, telemetry::JobState::running));
    model.add(state_event(2, telemetry::JobState::failed, "oom"));
    model.add(state_event(3, telemetry::JobState::finished));
    QVERIFY(!remote_end(model));
    QCOMPARE(failure_detail(model, -1), std::string("; rank 2 failed: oom"));
    const std::vector<int> marked = mark_unfinished_failed(model, "stopped by the user", true);
    QCOMPARE(marked, std::vector<int>{1});
    QCOMPARE(model.ranks().at(1).reason,
             std::string("ended without finishing: stopped by the user"));
    const auto end = remote_end(model);
    QVERIFY(end.has_value());
    QVERIFY(!end->ok);
    QVERIFY2(end->message.rfind("2 of 4 ranks failed (rank 1: ", 0) == 0, end->message.c_str());
    QCOMPARE(mpirun_end(0, false, 4).message,
             std::string("finished: 4 ranks (mpirun exited with status 0)"));
    QCOMPARE(mpirun_end(137, false, 3).message, std::string("mpirun exited with status 137"));

    EndWatch watch;
    QVERIFY(!watch.due(model, true, true));  // not known yet
    watch.known(mpirun_end(137, false, 4));
    QVERIFY(!watch.due(model, false, true));  // the grace period runs
    const auto due = watch.due(model, true, true);
    QVERIFY(due && !due->ok);
    QVERIFY2(due->message.rfind("mpirun exited with status 137; rank 1 failed: ", 0) == 0,
             due->message.c_str());
  }

  void theAppsModes() {
    QCOMPARE(mode_problem(fashion(), RunMode::threads), std::string());
    QVERIFY(mode_problem(fashion(), RunMode::mpirun).find("parallel.backend") != std::string::npos);
    QCOMPARE(mode_problem(fashion({"parallel.backend=mpi"}), RunMode::remote), std::string());
    JobSpec none = fashion();
    none.parallel = ParallelConfig{};
    none.parallel.strategy = "none";
    QVERIFY(mode_problem(none, RunMode::threads).find("none") != std::string::npos);
  }

  void processTreeCleanup() {
    const std::string job_file = tmp_.filePath("tree-job.json").toStdString();
    // A group leader with a child and a grandchild, and a "worker" of the job that left the group
    // and its parent (as a worker whose mpirun is gone): all found, all killed.
    const std::string script =
        "sh -c 'sleep 300' & (setsid bash -c 'while :; do sleep 1; done' "
        "worker " +
        job_file + " &) ; wait";
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    const char* argv[] = {"bash", "-c", script.c_str(), nullptr};
    pid_t leader = 0;
    QCOMPARE(posix_spawnp(&leader, "bash", nullptr, &attr, const_cast<char* const*>(argv), environ),
             0);
    posix_spawnattr_destroy(&attr);
    // Whatever happens below, nothing of this tree outlives the test (a leftover holding the
    // test's stdout would keep ctest waiting).
    struct Reaper {
      pid_t leader;
      std::string job_file;
      ~Reaper() {
        ::kill(-leader, SIGKILL);
        for (pid_t p : workers_of(job_file)) ::kill(p, SIGKILL);
      }
    } reaper{leader, job_file};
    // The orphan is the setsid'd loop, once it has left the leader's group. Until then the
    // subshell that starts it is a copy of the leader (same command line, same group), so it is
    // told apart by its own command line, not by set differences of racing snapshots.
    const auto loop_worker = [&]() -> pid_t {
      for (pid_t w : workers_of(job_file)) {
        const std::string text = proc_file("/proc/" + std::to_string(w) + "/cmdline");
        if (text.rfind("bash", 0) == 0 && text.find("while :") != std::string::npos &&
            text.find("setsid") == std::string::npos && ::getpgid(w) != leader)
          return w;
      }
      return 0;
    };
    std::vector<pid_t> below, workers;
    pid_t orphan = 0;
    // Settled: the leader's child and grandchild exist, and the loop has left both its group and
    // the tree (its starting subshell exited, so it is no longer a descendant).
    const auto settled = [&] {
      below = descendants(leader);
      orphan = loop_worker();
      return below.size() >= 2 && orphan > 0 &&
             std::find(below.begin(), below.end(), orphan) == below.end();
    };
    QTRY_VERIFY_WITH_TIMEOUT(settled(), 10000);
    workers = workers_of(job_file);
    QVERIFY(workers_of("").empty());
    // The worker outside the tree: not a descendant of the leader, not in its group.
    QVERIFY(std::find(below.begin(), below.end(), orphan) == below.end());
    QVERIFY(std::find(workers.begin(), workers.end(), orphan) != workers.end());
    QVERIFY(::getpgid(orphan) != leader);
    kill_run_processes(leader, job_file);
    int status = 0;
    QCOMPARE(waitpid(leader, &status, 0), leader);
    QVERIFY(WIFSIGNALED(status));
    for (pid_t p : below) QTRY_VERIFY_WITH_TIMEOUT(!alive(p), 5000);
    for (pid_t p : workers) QTRY_VERIFY_WITH_TIMEOUT(!alive(p), 5000);
    QTRY_VERIFY_WITH_TIMEOUT(workers_of(job_file).empty(), 5000);
  }
};

QTEST_GUILESS_MAIN(TestLaunch)
#include "tst_launch.moc"
