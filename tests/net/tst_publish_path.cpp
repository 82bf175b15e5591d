// What telemetry costs a rank's thread: publish() on a Publisher or a RecordingSink
// allocates nothing and takes no lock (counted here by replacing operator new), and the queue
// under it (engine/telemetry/event_queue.h) loses, repeats and reorders nothing with several
// producers and a consumer running at once, holds exactly its capacity and refuses the rest.
#include <QtTest>

#include <QTemporaryDir>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include "engine/telemetry/event_queue.h"
#include "net/auth.h"
#include "net/collector.h"
#include "net/local_sinks.h"
#include "net/publisher.h"
#include "net/recording.h"
#include "tests/common/wait.h"

using namespace shardlab;
using namespace shardlab::net;
using shardlab::test::wait_for;
using namespace std::chrono_literals;
namespace tl = shardlab::telemetry;

namespace {
// Allocations made by this thread while counting is on.
thread_local bool g_counting = false;
thread_local size_t g_allocations = 0;
}  // namespace

void* operator new(size_t size) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace {

tl::Event step_event(int64_t step) {
  tl::Event e;
  e.time = tl::now_seconds();
  tl::StepEvent s;
  s.step = step;
  s.loss = 1.5;
  e.payload = s;
  return e;
}

// A collective event as comm_telemetry makes one: its strings fit std::string's own buffer.
tl::Event collective_event() {
  tl::Event e;
  tl::CollectiveEvent c;
  c.op = "all_reduce";
  c.group = "dp[3]";
  c.bytes = 4096;
  e.payload = c;
  return e;
}

// Allocations made by publishing `n` events (made beforehand) into `sink` on this thread.
size_t allocations_publishing(tl::TelemetrySink& sink, int n) {
  std::vector<tl::Event> events;
  for (int i = 0; i < n; ++i) events.push_back(i % 2 ? step_event(i) : collective_event());
  g_allocations = 0;
  g_counting = true;
  for (auto& e : events) sink.publish(std::move(e));
  g_counting = false;
  return g_allocations;
}

}  // namespace

class TestPublishPath : public QObject {
  Q_OBJECT
 private slots:
  void publisherPublishAllocatesNothing() {
    CollectorOptions copt;
    copt.token = make_token();
    Collector collector(copt, {});
    collector.start();
    PublisherOptions o;
    o.port = collector.port();
    o.token = copt.token;
    o.hello.job_id = "alloc";
    Publisher pub(o);
    QVERIFY(wait_for([&] { return pub.connected(); }));
    QCOMPARE(allocations_publishing(pub, 3000), size_t{0});
    QVERIFY(wait_for([&] { return pub.sent() == 3000; }));
    QCOMPARE(pub.dropped(), uint64_t{0});
  }

  void recordingSinkPublishAllocatesNothing() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("alloc.slrec").toStdString();
    {
      RecordingSink rec(path);
      Hello h;
      h.job_id = "alloc";
      rec.add_hello(h);
      QCOMPARE(allocations_publishing(rec, 3000), size_t{0});
      rec.flush();
      QCOMPARE(rec.events(), uint64_t{3000});
      QCOMPARE(rec.failed(), uint64_t{0});
    }
    // Everything recorded, numbered 0.. in order after the HELLO.
    const RecordingContents c = read_recording(path);
    QCOMPARE(c.messages.size(), size_t{3001});
    for (size_t i = 1; i < c.messages.size(); ++i)
      QCOMPARE(std::get<tl::Event>(c.messages[i]).seq, static_cast<uint64_t>(i - 1));
  }

  // Four producers and the consumer at once: every item that was accepted comes out once, each
  // producer's in its order; the refused ones are exactly those push() said were refused.
  void queueUnderContention() {
    constexpr int kProducers = 4;
    constexpr int64_t kEach = 200000;
    tl::BoundedQueue<tl::Event> q(1000);  // not a power of two, on purpose
    std::atomic<int64_t> accepted{0};
    std::atomic<int> finished{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p)
      producers.emplace_back([&, p] {
        while (!go) std::this_thread::yield();
        for (int64_t i = 0; i < kEach; ++i) {
          tl::Event e;
          e.rank = p;
          e.seq = static_cast<uint64_t>(i);
          if (q.push(e)) ++accepted;
        }
        ++finished;
      });
    std::vector<int64_t> last(kProducers, -1);
    int64_t popped = 0;
    bool order_ok = true;
    auto take = [&] {
      tl::Event e;
      while (q.pop(e)) {
        ++popped;
        if (static_cast<int64_t>(e.seq) <= last[static_cast<size_t>(e.rank)]) order_ok = false;
        last[static_cast<size_t>(e.rank)] = static_cast<int64_t>(e.seq);
      }
    };
    go = true;
    while (finished.load() < kProducers) take();  // consuming while they produce
    for (auto& t : producers) t.join();
    take();
    QVERIFY2(order_ok, "an item came out twice or before an earlier one of its producer");
    QCOMPARE(popped, accepted.load());
    QVERIFY(accepted.load() > 0);

    // Exactly the capacity, then refusals; after a pop, room for one more.
    tl::BoundedQueue<tl::Event> small(3);
    tl::Event e;
    QVERIFY(small.push(e) && small.push(e) && small.push(e));
    QVERIFY(!small.push(e));
    QCOMPARE(small.size(), size_t{3});
    QVERIFY(small.pop(e));
    QVERIFY(small.push(e));
    QVERIFY(!small.push(e));
  }
};

QTEST_GUILESS_MAIN(TestPublishPath)
#include "tst_publish_path.moc"
