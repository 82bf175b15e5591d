// One engine on every device: the same job trained in one process on the cpu device and on the
// test device (memory the host cannot touch, kernels on the device's own stream thread) gives the
// same parameters bit for bit, the same losses and the same evaluation, for every optimizer, with
// gradient accumulation and clipping, for the MLP and the GPT. The reference is the cpu run (the
// engine's path since before devices), the other side the device path end to end: data copied
// in, kernels queued, the loss and the gradient norm read back through counted copies.
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <cstring>
#include <mutex>
#include <vector>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/comm/comm_record.h"
#include "engine/comm/device_collectives.h"
#include "engine/comm/threads/world.h"
#include "engine/core/error.h"
#include "engine/device/device.h"
#include "engine/device/device_buffer.h"
#include "engine/run/device_training.h"
#include "engine/doctor/model_checks.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "engine/run/rank_runner.h"
#include "tests/common/data.h"

using namespace shardlab;
using shardlab::test::example_job;
using shardlab::test::have_fashion_mnist;
using shardlab::test::kNoFashionMnist;

namespace {

struct Run {
  TrainResult result;
  std::vector<CopyCounts> per_step;  // the device's host traffic after each step
  int64_t params = 0;
};

Run train(JobSpec job, const std::string& device) {
  job.device = device;
  TrainingSetup s = build_training(job);
  Run run;
  run.params = s.model->num_params();
  TrainerCallbacks cb;
  Device& dev = s.model->device();
  cb.on_step = [&](const StepInfo&) { run.per_step.push_back(dev.copies()); };
  run.result = run_training(s, cb);
  return run;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

JobSpec small_job(const QString& model, const QString& optimizer, int accumulation, double clip) {
  std::vector<std::string> o = {"parallel.strategy=none", "parallel.world_size=1",
                                "train.steps=4",          "train.eval_every=2",
                                "train.eval_batches=2",   "train.log_every=100"};
  o.push_back("optimizer.name=" + optimizer.toStdString());
  if (optimizer == "sgd" || optimizer == "rmsprop") o.push_back("optimizer.momentum=0.9");
  o.push_back("train.accumulation_steps=" + std::to_string(accumulation));
  o.push_back("train.clip_grad_norm=" + std::to_string(clip));
  if (model == "mlp") {
    o.push_back("train.batch_size=32");
    return load_job(example_job("fashion_mlp.json"), o);
  }
  o.push_back("train.batch_size=8");
  o.push_back("model.gpt.layers=2");
  return load_job(example_job("chars_gpt.json"), o);
}

}  // namespace

class TstDeviceEngine : public QObject {
  Q_OBJECT

 private slots:
  void testDeviceEqualsCpu_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<int>("accumulation");
    QTest::addColumn<double>("clip");
    // Every optimizer's update kernel on the MLP; the GPT's layers (embedding, LayerNorm,
    // attention, GELU) under one optimizer: the update kernels do not depend on the model.
    for (const char* o : {"sgd", "adam", "adamw", "rmsprop", "adagrad"})
      QTest::addRow("mlp %s", o) << QString("mlp") << QString(o) << 1 << 0.0;
    QTest::addRow("gpt adam") << QString("gpt") << QString("adam") << 1 << 0.0;
    // Accumulation scales dlogits on the device; a small clip bound makes every step clip.
    for (const char* m : {"mlp", "gpt"})
      QTest::addRow("%s adamw accumulate 2 clip 0.05", m) << QString(m) << "adamw" << 2 << 0.05;
  }

  void testDeviceEqualsCpu() {
    QFETCH(QString, model);
    QFETCH(QString, optimizer);
    QFETCH(int, accumulation);
    QFETCH(double, clip);
    if (model == "mlp" && !have_fashion_mnist()) QSKIP(kNoFashionMnist);
    const JobSpec job = small_job(model, optimizer, accumulation, clip);
    const Run cpu = train(job, "cpu");
    const Run dev = train(job, "test");
    QCOMPARE(dev.result.steps, cpu.result.steps);
    QCOMPARE(dev.result.losses, cpu.result.losses);
    QVERIFY2(same_bits(dev.result.params, cpu.result.params),
             "the test device's parameters differ from the cpu run's");
    QCOMPARE(static_cast<int64_t>(dev.result.params.size()), cpu.params);
    QCOMPARE(dev.result.evals.size(), cpu.result.evals.size());
    for (size_t i = 0; i < cpu.result.evals.size(); ++i) {
      QCOMPARE(dev.result.evals[i].loss, cpu.result.evals[i].loss);
      QCOMPARE(dev.result.evals[i].accuracy, cpu.result.evals[i].accuracy);
    }
  }

  // DDP, ZeRO-1, ZeRO-2 and FSDP with their ranks as threads, each on a test device of its own,
  // the buckets (FSDP: blocks) all-reduced or reduce-scattered and the parameters all-gathered
  // through staged copies: every rank's parameters equal the cpu run's bit for bit (the same
  // kernels, the same reduction order on the host), and the ledger holds what the cpu ranks hold
  // for parameters, gradients and optimizer state (peaks: FSDP's gathered blocks included).
  void shardedOnTestDevicesEqualsCpu_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("accumulation");
    // Four ranks with accumulation, and three (shards of unequal size, padding), per strategy.
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"}) {
      QTest::addRow("%s gpt 4 ranks accumulate 2", s) << QString(s) << "gpt" << 4 << 2;
      QTest::addRow("%s mlp 3 ranks", s) << QString(s) << "mlp" << 3 << 1;
    }
  }

  void shardedOnTestDevicesEqualsCpu() {
    QFETCH(QString, strategy);
    QFETCH(QString, model);
    QFETCH(int, world);
    QFETCH(int, accumulation);
    if (model == "mlp" && !have_fashion_mnist()) QSKIP(kNoFashionMnist);
    JobSpec job = small_job(model, "adamw", accumulation, 0.05);
    job.parallel.strategy = strategy.toStdString();
    job.parallel.world_size = world;
    job.train.batch_size = 12 * world * accumulation / (model == "gpt" ? 3 : 1);
    job.parallel.bucket_mb = 0.01;  // several buckets
    JobSpec on_cpu = job, on_test = job;
    on_cpu.device = "cpu";
    on_test.device = "test";
    const Datasets data = load_completed_data(on_cpu);
    (void)load_completed_data(on_test);
    const ParallelRunResult cpu = run_threads_job(on_cpu, data, RankRunOptions{});
    const ParallelRunResult dev = run_threads_job(on_test, data, RankRunOptions{});
    QCOMPARE(dev.result.losses, cpu.result.losses);
    QVERIFY2(same_bits(dev.result.params, cpu.result.params),
             "the test devices' run differs from the cpu run");
    QCOMPARE(dev.ranks.size(), cpu.ranks.size());
    for (size_t r = 0; r < cpu.ranks.size(); ++r)
      for (const MemCategory c :
           {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state})
        QCOMPARE(dev.ranks[r].memory.peak[c], cpu.ranks[r].memory.peak[c]);
  }

  // Checkpoints cross devices: a ZeRO-2 run on test devices saves at step 3; the same job on cpu
  // resumed from that checkpoint ends with the test run's parameters bit for bit (test -> cpu);
  // a cpu run's step-3 checkpoint resumed on test devices as DDP (resharded: zero2 on 2 ranks ->
  // ddp on 2) ends there too (cpu -> test); an FSDP run's checkpoint on test devices resumed on
  // cpu ends at that run. The device's parameters (FSDP: its shard) and optimizer state go through
  // host copies each way.
  void checkpointsCrossDevices() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    JobSpec job = small_job("gpt", "adamw", 1, 0.0);
    job.parallel.strategy = "zero2";
    job.parallel.world_size = 2;
    job.train.steps = 6;
    job.train.checkpoint_every = 3;
    auto run = [&](JobSpec j, const std::string& device, const std::string& dir,
                   const std::string& resume) {
      j.device = device;
      j.train.checkpoint_dir = tmp.filePath(QString::fromStdString(dir)).toStdString();
      const Datasets data = load_completed_data(j);
      RankRunOptions o;
      o.resume_from = resume;
      return run_threads_job(j, data, o);
    };
    const ParallelRunResult a = run(job, "test", "a", "");
    QCOMPARE(a.result.steps, int64_t{6});
    const std::string a3 = step_dir(tmp.filePath("a").toStdString(), 3);
    const ParallelRunResult b = run(job, "cpu", "b", a3);
    QCOMPARE(b.result.losses.size(), size_t{3});
    QVERIFY2(same_bits(b.result.params, a.result.params), "test -> cpu resume differs");

    const ParallelRunResult c = run(job, "cpu", "c", "");
    QVERIFY2(same_bits(c.result.params, a.result.params), "zero2 on cpu differs from test");
    JobSpec as_ddp = job;
    as_ddp.parallel.strategy = "ddp";
    const ParallelRunResult d =
        run(as_ddp, "test", "d", step_dir(tmp.filePath("c").toStdString(), 3));
    QCOMPARE(d.result.losses.size(), size_t{3});
    for (size_t i = 0; i < 3; ++i) QCOMPARE(d.result.losses[i], a.result.losses[3 + i]);
    QVERIFY2(same_bits(d.result.params, a.result.params), "cpu -> test resharded resume differs");

    // FSDP holds a shard of the parameters on the device: its step-3 checkpoint on test devices
    // resumed on cpu ends at the test run.
    JobSpec as_fsdp = job;
    as_fsdp.parallel.strategy = "fsdp";
    const ParallelRunResult e = run(as_fsdp, "test", "e", "");
    const ParallelRunResult f =
        run(as_fsdp, "cpu", "f", step_dir(tmp.filePath("e").toStdString(), 3));
    QCOMPARE(f.result.losses.size(), size_t{3});
    QVERIFY2(same_bits(f.result.params, e.result.params), "fsdp test -> cpu resume differs");
  }

  // What a training step moves between host and device, pinned: per micro-batch the input and the
  // targets go in (the GPT's embedding also reads its ids back to check them and sends them as
  // 32-bit ids), the per-row losses come out; per step the gradient norm comes out. Nothing else:
  // no parameter, gradient or activation crosses.
  void stepCopiesArePinned_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("accumulation");
    QTest::addRow("gpt x1") << "gpt" << 1;
    QTest::addRow("gpt x2") << "gpt" << 2;
    QTest::addRow("mlp x2") << "mlp" << 2;
  }

  void stepCopiesArePinned() {
    QFETCH(QString, model);
    QFETCH(int, accumulation);
    if (model == "mlp" && !have_fashion_mnist()) QSKIP(kNoFashionMnist);
    JobSpec job = small_job(model, "adamw", accumulation, 0.0);
    job.train.eval_every = 0;  // evaluation's copies would fall between the steps
    const Run r = train(job, "test");
    QVERIFY(r.per_step.size() >= 3);
    const int64_t per_micro_in = model == "gpt" ? 3 : 2;
    const int64_t per_micro_out = model == "gpt" ? 2 : 1;
    for (size_t i = 1; i + 1 < r.per_step.size(); ++i) {
      const CopyCounts& a = r.per_step[i];
      const CopyCounts& b = r.per_step[i + 1];
      QCOMPARE(b.from_host - a.from_host, per_micro_in * accumulation);
      QCOMPARE(b.to_host - a.to_host, per_micro_out * accumulation + 1);
      // Bytes: far below one copy of the parameters.
      QVERIFY(b.from_host_bytes - a.from_host_bytes < r.params * 4 / 4);
    }
  }

  // The collectives on device memory (DeviceCollectives), threads ranks each on a device of its
  // own: the cpu device hands its memory to the communicator as it is, the test device is staged
  // through host copies; both give the exact values written here (small integers in float, so
  // every sum is exact) for all-reduce (sum, max), reduce-scatter, all-gather, broadcast and
  // send/recv.
  void deviceCollectivesGiveExactValues_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("count");
    for (const QString& d : {QString("cpu"), QString("test")})
      for (int w : {1, 2, 3, 4})
        for (int n : {1, 7, 1000}) QTest::addRow("%s/w%d/n%d", qPrintable(d), w, n) << d << w << n;
  }

  void deviceCollectivesGiveExactValues() {
    QFETCH(QString, device);
    QFETCH(int, world);
    QFETCH(int, count);
    std::mutex mu;
    QStringList wrong;
    auto expect = [&](int rank, const char* what, const std::vector<float>& got,
                      const std::vector<float>& want) {
      if (got == want) return;
      size_t i = 0;
      while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
      const std::lock_guard<std::mutex> hold(mu);
      wrong << QString("rank %1 %2: element %3 is %4, expected %5 (%6 vs %7 elements)")
                   .arg(rank)
                   .arg(what)
                   .arg(i)
                   .arg(i < got.size() ? double(got[i]) : -1.0)
                   .arg(i < want.size() ? double(want[i]) : -1.0)
                   .arg(got.size())
                   .arg(want.size());
    };
    const int64_t n = count;
    // Rank r's element i.
    auto value = [](int r, int64_t i) { return static_cast<float>((r + 1) * (i % 5 + 1)); };
    CommOptions options;
    options.timeout = std::chrono::milliseconds(30000);
    run_threads(world, options, [&](Communicator& comm) {
      const int r = comm.rank();
      std::unique_ptr<Device> own =
          device == "cpu" ? nullptr : make_device(parse_device_kind(device.toStdString()));
      Device& dev = own ? *own : host_device();
      DeviceCollectives dc(comm, dev);
      if (dc.staged() != (device == "test")) expect(r, "staged()", {float(dc.staged())}, {});
      auto upload = [&](const std::vector<float>& h) {
        DeviceBuffer<float> b(dev, MemCategory::comm, static_cast<int64_t>(h.size()));
        dev.copy_from_host(std::span<const float>(h), b.span());
        return b;
      };
      auto download = [&](const DeviceBuffer<float>& b) {
        std::vector<float> h(static_cast<size_t>(b.size()));
        dev.copy_to_host(b.span(), std::span<float>(h));
        return h;
      };
      std::vector<float> mine(static_cast<size_t>(n)), sum(static_cast<size_t>(n)),
          most(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        mine[size_t(i)] = value(r, i);
        for (int q = 0; q < world; ++q) sum[size_t(i)] += value(q, i);
        most[size_t(i)] = value(world - 1, i);
      }
      DeviceBuffer<float> a = upload(mine);
      dc.all_reduce_async(a.span(), ReduceOp::Sum)->wait();
      expect(r, "all_reduce(sum)", download(a), sum);
      DeviceBuffer<float> m = upload(mine);
      dc.all_reduce_async(m.span(), ReduceOp::Max)->wait();
      expect(r, "all_reduce(max)", download(m), most);

      const IndexRange c = chunk_range(n, world, r);
      DeviceBuffer<float> in = upload(mine);
      DeviceBuffer<float> out = upload(std::vector<float>(static_cast<size_t>(c.size()), -9.0f));
      dc.reduce_scatter_async(DeviceSpan<const float>(in.span()), out.span(), ReduceOp::Sum)
          ->wait();
      expect(r, "reduce_scatter(sum)", download(out),
             std::vector<float>(sum.begin() + c.begin, sum.begin() + c.end));

      // All-gather: each rank's chunk of its own values.
      std::vector<float> gathered_want(static_cast<size_t>(n));
      for (int q = 0; q < world; ++q) {
        const IndexRange cq = chunk_range(n, world, q);
        for (int64_t i = cq.begin; i < cq.end; ++i) gathered_want[size_t(i)] = value(q, i);
      }
      DeviceBuffer<float> chunk =
          upload(std::vector<float>(mine.begin() + c.begin, mine.begin() + c.end));
      DeviceBuffer<float> all = upload(std::vector<float>(static_cast<size_t>(n), -1.0f));
      dc.all_gather_async(DeviceSpan<const float>(chunk.span()), all.span())->wait();
      expect(r, "all_gather", download(all), gathered_want);

      DeviceBuffer<float> b = upload(mine);
      dc.broadcast(b.span(), world - 1);
      std::vector<float> root(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) root[size_t(i)] = value(world - 1, i);
      expect(r, "broadcast(root last)", download(b), root);

      // Point to point around a ring: each rank sends its values to the next and receives the
      // previous rank's (staged: the send's device memory is reused at once, the send having
      // copied it out; direct: it stays untouched until the send is waited for).
      if (world > 1) {
        DeviceBuffer<float> src = upload(mine);
        DeviceBuffer<float> dst = upload(std::vector<float>(static_cast<size_t>(n), -1.0f));
        const int next = (r + 1) % world, prev = (r + world - 1) % world;
        WorkHandle sent = dc.send_async(DeviceSpan<const float>(src.span()), next, 7);
        if (dc.staged()) dev.fill(src.data(), n, -2.0f);
        dc.recv(dst.span(), prev, 7);
        sent->wait();
        std::vector<float> from_prev(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) from_prev[size_t(i)] = value(prev, i);
        expect(r, "send/recv (ring)", download(dst), from_prev);
      }
      // Staged: every operation copied through the host (the rank's own device counts them).
      if (own && own->copies().from_host == 0) expect(r, "staged copies", {0.0f}, {1.0f});
    });
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join('\n')));
  }

  // A device communicator (what NCCL is on a GPU: RankRunOptions::device_comm) carries a
  // strategy's collectives on device memory while the control values stay on the rank's
  // communicator. Here it is a split of the threads world named "data", over test devices: ddp
  // and zero2 train bit for bit as without it, every gradient and parameter collective
  // (CommSubject grads / params) is on "data", and "world" carries none of them.
  void deviceCommunicatorCarriesTheData_data() {
    QTest::addColumn<QString>("strategy");
    for (const char* s : {"ddp", "zero2"}) QTest::newRow(s) << QString(s);
  }

  void deviceCommunicatorCarriesTheData() {
    QFETCH(QString, strategy);
    JobSpec job = small_job("gpt", "adamw", 1, 0.05);
    job.parallel.strategy = strategy.toStdString();
    job.parallel.world_size = 2;
    job.parallel.bucket_mb = 0.01;
    job.device = "test";
    const Datasets data = load_completed_data(job);
    const ParallelRunResult plain = run_threads_job(job, data, RankRunOptions{});

    auto sink = std::make_shared<MemorySink>();
    CommOptions co = job_comm_options(job.parallel);
    co.sink = sink;
    RankRunOptions ro;
    ro.device_comm = [](Communicator& comm, Device&) { return comm.split(0, comm.rank(), "data"); };
    std::vector<ParallelRunResult> out(2);
    run_threads(2, co, [&](Communicator& comm) {
      out[static_cast<size_t>(comm.rank())] = run_rank(job, comm, data, ro);
    });
    QCOMPARE(out[0].result.losses, plain.result.losses);
    QVERIFY2(same_bits(out[0].result.params, plain.result.params),
             "training with a device communicator differs");
    int on_data = 0, on_world = 0;
    for (const CommRecord& r : sink->records()) {
      const bool payload =
          r.subject.array == CommArray::grads || r.subject.array == CommArray::params;
      if (!payload) continue;
      (r.group == "data" ? on_data : on_world) += 1;
    }
    QVERIFY2(
        on_data > 0 && on_world == 0,
        qPrintable(
            QString("payload collectives: %1 on data, %2 on world").arg(on_data).arg(on_world)));
  }

  // The doctor's model checks (engine/doctor/model_checks.h), which a GPU runs with tolerances, on
  // the test device: every one there, every one passing, and every figure against the cpu 0 (the
  // same kernels in the same order as the cpu reference; "accumulate" compares a GEMM that adds
  // into its output with twice one that does not, which rounds differently on any device).
  void doctorModelChecksOnTestDevice() {
    std::unique_ptr<Device> dev = make_device(DeviceKind::test);
    const doctor::CheckList checks = doctor::device_model_checks(*dev);
    QCOMPARE(checks.size(), size_t{28});  // 2 MLP cases x 6, 2 GPT cases x 7, 2 round trips
    for (const doctor::CheckResult& c : checks) {
      QVERIFY2(c.status == doctor::CheckStatus::kPass, (c.name + ": " + c.detail).c_str());
      if (c.name.find(" accumulate") == std::string::npos)
        QVERIFY2(c.figure == 0.0, (c.name + ": " + std::to_string(c.figure)).c_str());
    }
  }

  // Every job that validates runs on the test device: device_job_problem has nothing to say about
  // the 3D example, fsdp or strategy none.
  void testDeviceRunsEveryJob() {
    JobSpec job = load_job(example_job("gpt-3d.json"), {});
    job.device = "test";
    QCOMPARE(QString::fromStdString(device_job_problem(job)), QString());
    job = load_job(example_job("fashion_mlp.json"), {"parallel.strategy=fsdp"});
    job.device = "test";
    QCOMPARE(QString::fromStdString(device_job_problem(job)), QString());
    job.parallel.strategy = "none";
    job.parallel.world_size = 1;
    QCOMPARE(QString::fromStdString(device_job_problem(job)), QString());
  }
};

QTEST_APPLESS_MAIN(TstDeviceEngine)
#include "tst_device_engine.moc"
