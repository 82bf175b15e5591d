// The Device layer: every kernel of the table on the cpu and test devices against kernels/cpu
// called directly on host memory (bit for bit: the same kernels in the same order), the test
// device's memory that the host cannot touch, its stream's ordering, counted copies, zero-filled
// reuse, and the ledger's charges.
#include <sys/wait.h>
#include <unistd.h>

#include <QtTest/QtTest>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/device/device.h"
#include "engine/device/device_buffer.h"
#include "engine/device/stream_thread.h"
#include "engine/device/test_device.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/adagrad_update.h"
#include "kernels/cpu/adam_update.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/rmsprop_update.h"
#include "kernels/cpu/scale_cast.h"
#include "kernels/cpu/sgd_update.h"
#include "kernels/cpu/softmax_xent.h"
#include "kernels/cpu/sq_norm.h"

using namespace shardlab;

namespace {

std::vector<float> randoms(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(gen);
  return v;
}

// Host arrays mirrored on a device: up() copies one there, down() brings it back.
struct OnDevice {
  Device& dev;
  std::vector<DeviceBuffer<float>> bufs;
  std::vector<DeviceBuffer<int32_t>> ints;

  DevicePtr<float> up(const std::vector<float>& h) {
    bufs.emplace_back(dev, MemCategory::activations, static_cast<int64_t>(h.size()));
    dev.copy_from_host(std::span<const float>(h), bufs.back().span());
    return bufs.back().data();
  }
  DevicePtr<int32_t> up(const std::vector<int32_t>& h) {
    ints.emplace_back(dev, MemCategory::activations, static_cast<int64_t>(h.size()));
    dev.copy_from_host(std::span<const int32_t>(h), ints.back().span());
    return ints.back().data();
  }
  std::vector<float> down(DevicePtr<float> p, size_t n) {
    std::vector<float> h(n);
    dev.copy_to_host(DeviceSpan<const float>(p, n), std::span<float>(h));
    return h;
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs `body` in a child process and returns how it ended: the signal that killed it, or 0.
int signal_of_child(const std::function<void()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // not the test framework's handler (it prints a stack trace)
    std::signal(SIGBUS, SIG_DFL);
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

}  // namespace

class TstDevice : public QObject {
  Q_OBJECT

 private slots:
  void kernelsEqualTheCpuKernels_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("cols");
    for (const char* kind : {"cpu", "test"})
      for (auto [r, c] : {std::pair{1, 1}, std::pair{3, 7}, std::pair{16, 33}, std::pair{64, 130}})
        QTest::addRow("%s %dx%d", kind, r, c) << QString(kind) << r << c;
  }

  // Every kernel of the table, on device memory, against the same kernels/cpu function called
  // directly on host arrays: the same bits.
  void kernelsEqualTheCpuKernels() {
    QFETCH(QString, kind);
    QFETCH(int, rows);
    QFETCH(int, cols);
    auto dev = make_device(parse_device_kind(kind.toStdString()));
    OnDevice d{*dev, {}, {}};
    const int64_t R = rows, C = cols, n = R * C;
    const std::vector<float> x = randoms(n, 1), y0 = randoms(n, 2), w = randoms(C * C, 3),
                             bias = randoms(C, 4);

    {  // gemm: y = x w^T + y0 (beta 1)
      std::vector<float> want = y0;
      kernels::gemm(kernels::Trans::No, kernels::Trans::Yes, R, C, C, 1.0f, x.data(), C, w.data(),
                    C, 1.0f, want.data(), C);
      auto X = d.up(x), W = d.up(w), Y = d.up(y0);
      dev->gemm(kernels::Trans::No, kernels::Trans::Yes, R, C, C, 1.0f, X, C, W, C, 1.0f, Y, C);
      QVERIFY2(same_bits(d.down(Y, n), want), "gemm");
    }
    {  // relu, gelu forward and backward
      std::vector<float> ry(n), rdx(n), gy(n), gt(n), gdx(n);
      kernels::relu_forward(x.data(), ry.data(), n);
      kernels::relu_backward(ry.data(), y0.data(), rdx.data(), n);
      kernels::gelu_forward(x.data(), gy.data(), gt.data(), n);
      kernels::gelu_backward(x.data(), gt.data(), y0.data(), gdx.data(), n);
      auto X = d.up(x), DY = d.up(y0), RY = d.up(std::vector<float>(n)),
           RDX = d.up(std::vector<float>(n)), GY = d.up(std::vector<float>(n)),
           GT = d.up(std::vector<float>(n)), GDX = d.up(std::vector<float>(n));
      dev->relu_forward(X, RY, n);
      dev->relu_backward(RY, DY, RDX, n);
      dev->gelu_forward(X, GY, GT, n);
      dev->gelu_backward(X, GT, DY, GDX, n);
      QVERIFY(same_bits(d.down(RY, n), ry));
      QVERIFY(same_bits(d.down(RDX, n), rdx));
      QVERIFY(same_bits(d.down(GY, n), gy));
      QVERIFY(same_bits(d.down(GT, n), gt));
      QVERIFY(same_bits(d.down(GDX, n), gdx));
    }
    {  // add, scale, bias_add, bias_grad, fill
      std::vector<float> sum(n), scaled = x, biased = x, dbias = bias;
      kernels::add(x.data(), y0.data(), sum.data(), n);
      kernels::scale(scaled.data(), n, 0.37f);
      kernels::bias_add(biased.data(), bias.data(), R, C);
      kernels::bias_grad(y0.data(), dbias.data(), R, C);
      auto X = d.up(x), Y = d.up(y0), S = d.up(std::vector<float>(n)), SC = d.up(x), BI = d.up(x),
           B = d.up(bias), DB = d.up(bias), F = d.up(x);
      dev->add(X, Y, S, n);
      dev->scale(SC, n, 0.37f);
      dev->bias_add(BI, B, R, C);
      dev->bias_grad(Y, DB, R, C);
      dev->fill(F, n, 2.5f);
      QVERIFY(same_bits(d.down(S, n), sum));
      QVERIFY(same_bits(d.down(SC, n), scaled));
      QVERIFY(same_bits(d.down(BI, n), biased));
      QVERIFY(same_bits(d.down(DB, C), dbias));
      QVERIFY(same_bits(d.down(F, n), std::vector<float>(n, 2.5f)));
    }
    {  // layer norm forward and backward
      std::vector<float> y(n), xhat(n), rstd(R), dx(n), dw(C, 0.0f), db(C, 0.0f);
      kernels::layer_norm_forward(x.data(), bias.data(), bias.data(), y.data(), xhat.data(),
                                  rstd.data(), R, C, 1e-5f);
      kernels::layer_norm_backward(y0.data(), xhat.data(), rstd.data(), bias.data(), dx.data(),
                                   dw.data(), db.data(), R, C);
      auto X = d.up(x), B = d.up(bias), Y = d.up(std::vector<float>(n)),
           XH = d.up(std::vector<float>(n)), RS = d.up(std::vector<float>(R)), DY = d.up(y0),
           DX = d.up(std::vector<float>(n)), DW = d.up(std::vector<float>(C)),
           DB = d.up(std::vector<float>(C));
      dev->layer_norm_forward(X, B, B, Y, XH, RS, R, C, 1e-5f);
      dev->layer_norm_backward(DY, XH, RS, B, DX, DW, DB, R, C);
      QVERIFY(same_bits(d.down(Y, n), y));
      QVERIFY(same_bits(d.down(RS, R), rstd));
      QVERIFY(same_bits(d.down(DX, n), dx));
      QVERIFY(same_bits(d.down(DW, C), dw));
      QVERIFY(same_bits(d.down(DB, C), db));
    }
    {  // softmax cross-entropy, squared norm
      std::vector<int32_t> targets(R);
      for (int64_t r = 0; r < R; ++r) targets[r] = static_cast<int32_t>((r * 5) % C);
      std::vector<float> probs(n), dl(n);
      std::vector<double> loss(R);
      std::vector<int32_t> correct(R);
      kernels::softmax_xent_forward(x.data(), targets.data(), probs.data(), loss.data(),
                                    correct.data(), R, C);
      kernels::softmax_xent_backward(probs.data(), targets.data(), dl.data(), R, C, 0.25f);
      auto X = d.up(x);
      auto T = d.up(targets);
      auto P = d.up(std::vector<float>(n)), DL = d.up(std::vector<float>(n));
      DeviceBuffer<double> L(*dev, MemCategory::activations, R), SQ(*dev, MemCategory::comm, 1);
      DeviceBuffer<int32_t> K(*dev, MemCategory::activations, R);
      dev->softmax_xent_forward(X, T, P, L.data(), K.data(), R, C);
      dev->softmax_xent_backward(P, T, DL, R, C, 0.25f);
      dev->sq_norm(X, n, SQ.data());
      QVERIFY(same_bits(d.down(P, n), probs));
      QVERIFY(same_bits(d.down(DL, n), dl));
      std::vector<double> got_loss(R);
      std::vector<int32_t> got_correct(R);
      dev->copy_to_host(L.span(), std::span<double>(got_loss));
      dev->copy_to_host(K.span(), std::span<int32_t>(got_correct));
      QVERIFY(std::memcmp(got_loss.data(), loss.data(), R * sizeof(double)) == 0);
      QCOMPARE(got_correct, correct);
      const double want_sq = kernels::sq_norm(x.data(), n);
      const double got_sq = dev->read(DevicePtr<const double>(SQ.data()));
      QVERIFY(std::memcmp(&got_sq, &want_sq, sizeof(double)) == 0);
    }
    {  // embedding forward and backward (ids repeat: rows of one id add in order)
      const int64_t B = R, T = 3, V = 5, D = C;
      std::vector<int32_t> ids(B * T);
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7) % V);
      const std::vector<float> table = randoms(V * D, 8), pos = randoms(T * D, 9),
                               dy = randoms(B * T * D, 10);
      std::vector<float> y(B * T * D), dtable(V * D, 0.0f), dpos(T * D, 0.0f);
      kernels::embedding_forward(ids.data(), table.data(), pos.data(), y.data(), B * T, T, D);
      kernels::embedding_backward(ids.data(), dy.data(), dtable.data(), dpos.data(), B * T, T, D);
      auto I = d.up(ids);
      auto TB = d.up(table), PS = d.up(pos), Y = d.up(std::vector<float>(B * T * D)), DY = d.up(dy),
           DT = d.up(std::vector<float>(V * D)), DP = d.up(std::vector<float>(T * D));
      dev->embedding_forward(I, TB, PS, Y, B * T, T, D);
      dev->embedding_backward(I, ids, DY, DT, DP, B * T, T, D, V);
      QVERIFY(same_bits(d.down(Y, B * T * D), y));
      QVERIFY(same_bits(d.down(DT, V * D), dtable));
      QVERIFY(same_bits(d.down(DP, T * D), dpos));
    }
    {  // the four optimizer updates, two steps each
      const std::vector<float> g = randoms(n, 11);
      auto host_and_dev = [&](auto make_args, auto kernel, auto dev_kernel, int states) {
        std::vector<float> p = x;
        std::vector<std::vector<float>> s(states, std::vector<float>(n, 0.0f));
        auto P = d.up(x), G = d.up(g);
        std::vector<DevicePtr<float>> S;
        for (int i = 0; i < states; ++i) S.push_back(d.up(std::vector<float>(n, 0.0f)));
        for (int step = 1; step <= 2; ++step) {
          kernel(make_args(p.data(), g.data(), s, step));
          std::vector<std::vector<float>> dummy;
          auto a = make_args(P.raw(), G.raw(), dummy, step);
          dev_kernel(a, S);
        }
        return same_bits(d.down(P, n), p);
      };
      auto sgd = [&](float* p, const float* gr, std::vector<std::vector<float>>& s, int) {
        kernels::SgdArgs a;
        a.param = p, a.grad = gr, a.n = n, a.lr = 0.1, a.momentum = 0.9;
        if (!s.empty()) a.momentum_buf = s[0].data();
        return a;
      };
      QVERIFY(host_and_dev(
          sgd, [](const kernels::SgdArgs& a) { kernels::sgd_update(a); },
          [&](kernels::SgdArgs a, std::vector<DevicePtr<float>>& S) {
            a.momentum_buf = S[0].raw();
            dev->sgd_update(a);
          },
          1));
      auto adam = [&](float* p, const float* gr, std::vector<std::vector<float>>& s, int step) {
        kernels::AdamArgs a;
        a.param = p, a.grad = gr, a.n = n, a.lr = 1e-3, a.step = step, a.weight_decay = 0.01,
        a.decoupled = true;
        if (!s.empty()) a.exp_avg = s[0].data(), a.exp_avg_sq = s[1].data();
        return a;
      };
      QVERIFY(host_and_dev(
          adam, [](const kernels::AdamArgs& a) { kernels::adam_update(a); },
          [&](kernels::AdamArgs a, std::vector<DevicePtr<float>>& S) {
            a.exp_avg = S[0].raw(), a.exp_avg_sq = S[1].raw();
            dev->adam_update(a);
          },
          2));
      auto rms = [&](float* p, const float* gr, std::vector<std::vector<float>>& s, int) {
        kernels::RmspropArgs a;
        a.param = p, a.grad = gr, a.n = n, a.lr = 1e-2, a.momentum = 0.5;
        if (!s.empty()) a.square_avg = s[0].data(), a.momentum_buf = s[1].data();
        return a;
      };
      QVERIFY(host_and_dev(
          rms, [](const kernels::RmspropArgs& a) { kernels::rmsprop_update(a); },
          [&](kernels::RmspropArgs a, std::vector<DevicePtr<float>>& S) {
            a.square_avg = S[0].raw(), a.momentum_buf = S[1].raw();
            dev->rmsprop_update(a);
          },
          2));
      auto ada = [&](float* p, const float* gr, std::vector<std::vector<float>>& s, int) {
        kernels::AdagradArgs a;
        a.param = p, a.grad = gr, a.n = n, a.lr = 1e-2;
        if (!s.empty()) a.sum = s[0].data();
        return a;
      };
      QVERIFY(host_and_dev(
          ada, [](const kernels::AdagradArgs& a) { kernels::adagrad_update(a); },
          [&](kernels::AdagradArgs a, std::vector<DevicePtr<float>>& S) {
            a.sum = S[0].raw();
            dev->adagrad_update(a);
          },
          1));
    }
    dev->synchronize("test end");
  }

  // The host cannot read or write the test device's memory: a read through its address faults
  // (SIGSEGV) at that line. The same read on the cpu device does not.
  void testDeviceMemoryFaultsOnHostAccess() {
    TestDevice dev;
    DeviceBuffer<float> buf(dev, MemCategory::params, 64);
    dev.fill(buf.data(), 64, 1.0f);
    dev.synchronize("fill");
    float* raw = buf.data().raw();
    QCOMPARE(signal_of_child([raw] {
               volatile float v = *raw;
               (void)v;
             }),
             SIGSEGV);
    QCOMPARE(signal_of_child([raw] { *raw = 3.0f; }), SIGSEGV);
    auto cpu = make_device(DeviceKind::cpu);
    DeviceBuffer<float> hb(*cpu, MemCategory::params, 64);
    float* hraw = hb.data().raw();
    QCOMPARE(signal_of_child([hraw] {
               volatile float v = *hraw;
               (void)v;
             }),
             0);
    // Through a copy the values are there.
    std::vector<float> back(64);
    dev.copy_to_host(buf.span(), std::span<float>(back));
    QCOMPARE(back, std::vector<float>(64, 1.0f));
  }

  // A host pointer handed to the test device's kernels is refused at the call, naming why.
  void testDeviceRefusesHostAddresses() {
    TestDevice dev;
    std::vector<float> host(8, 1.0f);
    try {
      dev.scale(DevicePtr<float>(host.data()), 8, 2.0f);
      QFAIL("a host address was accepted as device memory");
    } catch (const DeviceError& e) {
      QVERIFY2(QString(e.what()).contains("not in this device's memory"), e.what());
    }
    QCOMPARE(host[0], 1.0f);
  }

  // Kernels run on the stream's thread in queue order, after the call returns; the copy to the
  // host waits for them. Many queued dependent kernels give the sequential answer.
  void testDeviceStreamIsOrdered() {
    TestDevice dev;
    DeviceBuffer<float> a(dev, MemCategory::activations, 4096);
    dev.fill(a.data(), 4096, 1.0f);
    for (int i = 0; i < 100; ++i) dev.add(a.data(), a.data(), a.data(), 4096);  // 2^100: exact
    for (int i = 0; i < 100; ++i) dev.scale(a.data(), 4096, 0.5f);              // back to 1
    std::vector<float> back(4096);
    dev.copy_to_host(a.span(), std::span<float>(back));
    QCOMPARE(back, std::vector<float>(4096, 1.0f));
  }

  // Freed memory is reused only after the work queued before the free, and comes back zeroed.
  void testDeviceReusesFreedMemoryZeroed() {
    TestDevice dev;
    void* first = nullptr;
    {
      DeviceBuffer<float> a(dev, MemCategory::activations, 10000);
      first = a.data().raw();
      dev.fill(a.data(), 10000, 7.0f);
    }
    dev.synchronize("free");
    QCOMPARE(dev.memory().bytes_in_use(), size_t{0});
    DeviceBuffer<float> b(dev, MemCategory::activations, 10000);
    QCOMPARE(static_cast<void*>(b.data().raw()), first);
    std::vector<float> back(10000, -1.0f);
    dev.copy_to_host(b.span(), std::span<float>(back));
    QCOMPARE(back, std::vector<float>(10000, 0.0f));
  }

  // Copies each way are counted, with their bytes; device-to-device copies are not host traffic.
  void copiesAreCounted() {
    for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::test}) {
      auto dev = make_device(kind);
      DeviceBuffer<float> a(*dev, MemCategory::params, 100), b(*dev, MemCategory::params, 100);
      const std::vector<float> h = randoms(100, 5);
      std::vector<float> back(100);
      dev->copy_from_host(std::span<const float>(h), a.span());
      dev->copy(DeviceSpan<const float>(a.span()), b.span());
      dev->copy_to_host(DeviceSpan<const float>(b.span()), std::span<float>(back));
      QCOMPARE(back, h);
      const CopyCounts c = dev->copies();
      QCOMPARE(c.from_host, int64_t{1});
      QCOMPARE(c.from_host_bytes, int64_t{400});
      QCOMPARE(c.to_host, int64_t{1});
      QCOMPARE(c.to_host_bytes, int64_t{400});
      try {
        dev->copy_to_host(DeviceSpan<const float>(b.span()), std::span<float>(back).first(50));
        QFAIL("a copy of mismatched sizes was accepted");
      } catch (const InvalidArgument& e) {
        QVERIFY2(QString(e.what()).contains("100 elements but destination 50"), e.what());
      }
    }
  }

  // One device shared by several threads (the host device is shared by a process's rank threads):
  // every thread's squared norm is its own, although they all read it back through the device's
  // one staging slot. Each thread's vector holds one value v in every element, so its squared
  // norm, n * v * v, is exact in double and differs from every other thread's.
  void squaredNormIsThreadSafe() {
    std::unique_ptr<Device> test_device = make_device(DeviceKind::test);
    for (Device* dev : {&host_device(), test_device.get()}) {
      constexpr int kThreads = 6, kRounds = 3000;
      constexpr int64_t kN = 256;
      std::vector<DeviceBuffer<float>> bufs;
      for (int t = 0; t < kThreads; ++t) {
        bufs.emplace_back(*dev, MemCategory::grads, kN);
        const std::vector<float> h(static_cast<size_t>(kN), static_cast<float>(t + 1));
        dev->copy_from_host(std::span<const float>(h), bufs.back().span());
      }
      std::atomic<int> wrong{0};
      std::atomic<double> first_wrong{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          const double want = static_cast<double>(kN) * (t + 1) * (t + 1);
          for (int i = 0; i < kRounds; ++i) {
            const double got = dev->squared_norm(DeviceSpan<const float>(bufs[size_t(t)].span()));
            if (got != want && wrong.fetch_add(1) == 0) first_wrong = got;
          }
        });
      for (std::thread& th : threads) th.join();
      QVERIFY2(wrong.load() == 0,
               qPrintable(QString("%1: %2 of %3 norms were another thread's (first: %4)")
                              .arg(QString::fromStdString(dev->describe()))
                              .arg(wrong.load())
                              .arg(kThreads * kRounds)
                              .arg(first_wrong.load())));
    }
  }

  // DeviceBuffers charge the ledger of the allocating thread under their category, exactly, and
  // give it back when freed; growing reallocates, shrinking does not.
  void buffersChargeTheLedger() {
    for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::test}) {
      auto dev = make_device(kind);
      MemoryLedger ledger;
      LedgerScope bind(&ledger);
      {
        DeviceBuffer<float> p(*dev, MemCategory::params, 1000);
        DeviceBuffer<float> s(*dev, MemCategory::optimizer_state, 2000);
        QCOMPARE(ledger.current(MemCategory::params), int64_t{4000});
        QCOMPARE(ledger.current(MemCategory::optimizer_state), int64_t{8000});
        p.resize(500);
        QCOMPARE(ledger.current(MemCategory::params), int64_t{4000});
        p.resize(3000);
        QCOMPARE(ledger.current(MemCategory::params), int64_t{12000});
      }
      QCOMPARE(ledger.current(MemCategory::params), int64_t{0});
      QCOMPARE(ledger.current(MemCategory::optimizer_state), int64_t{0});
      QCOMPARE(ledger.peak(MemCategory::params), int64_t{12000});
    }
  }

  // A wait is bounded, and a failure on the stream reaches the next wait.
  void streamWaitsAreBoundedAndFailuresReported() {
    StreamThread s("stream under test");
    s.queue([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
    try {
      s.wait("short wait", 0.02);
      QFAIL("the wait did not time out");
    } catch (const TimeoutError& e) {
      QVERIFY2(QString(e.what()).contains("did not finish its queued work within"), e.what());
    }
    s.wait("long wait", 10.0);
    bool ran_after_failure = false;
    s.queue([] { throw std::runtime_error("kernel exploded"); });
    s.queue([&] { ran_after_failure = true; });
    try {
      s.wait("after failure", 10.0);
      QFAIL("the failure was not reported");
    } catch (const DeviceError& e) {
      QVERIFY2(QString(e.what()).contains("kernel exploded"), e.what());
    }
    QVERIFY(!ran_after_failure);
  }

  void deviceNamesParse() {
    QCOMPARE(parse_device_kind("test"), DeviceKind::test);
    QCOMPARE(QString(to_string(DeviceKind::cuda)), QString("cuda"));
    try {
      (void)parse_device_kind("tpu");
      QFAIL("tpu parsed");
    } catch (const InvalidArgument& e) {
      QVERIFY2(QString(e.what()).contains("unknown device \"tpu\" (known: cpu, cuda, test)"),
               e.what());
    }
  }
};

QTEST_APPLESS_MAIN(TstDevice)
#include "tst_device.moc"
