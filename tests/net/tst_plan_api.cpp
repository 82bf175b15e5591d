// The planner on the web server (net/web/plan_api.h, net/web/web_routes.h) over loopback:
// /api/plan answers exactly what `shardlab plan --json` prints for the same fields (the command run
// as a process), reads the query as a form encodes it, caps the plans at 20, answers bad input 400
// with the planner's message; /api/plan/presets lists model_presets() and gpu_names(); the /plan
// page is served; and with the token required all of it is guarded like /api/run.
#include <QtTest>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/plan/hardware.h"
#include "engine/plan/plan_inputs.h"
#include "net/run_model.h"
#include "net/web/web_server.h"
#include "tests/common/process.h"
#include "tests/net/web_client.h"
#include "tests/net/web_host.h"

using namespace shardlab;
using namespace shardlab::net;
using nlohmann::json;
using namespace shardlab::test;

namespace {

#define VERIFY_TYPE(reply, prefix)                                            \
  QVERIFY2((reply).header(http::field::content_type).rfind((prefix), 0) == 0, \
           (reply).header(http::field::content_type).c_str())

using Fields = std::vector<std::pair<std::string, std::string>>;

// GPT-3 175B on 1024 A100 80GB, a global batch of 1536 (Narayanan et al. 2021's setting).
const Fields kGpt3{
    {"model", "gpt3-175b"}, {"gpu", "a100-80gb"}, {"gpus", "1024"}, {"global-batch", "1536"}};

std::string query_of(const Fields& fields) {
  std::string q;
  for (const auto& [k, v] : fields) q += (q.empty() ? "?" : "&") + k + "=" + v;
  return q;
}

// `shardlab plan --FIELD VALUE ... --json`, parsed; a null json when it failed (`why` says how).
json plan_command(const Fields& fields, QString& why) {
  QStringList args{QStringLiteral("plan")};
  for (const auto& [k, v] : fields)
    args << QString::fromStdString("--" + k) << QString::fromStdString(v);
  args << QStringLiteral("--json");
  const test::ProcessOutcome o =
      test::run_process(QStringLiteral(SHARDLAB_BINARY_DIR "/engine/cli/shardlab"), args);
  why = QStringLiteral("shardlab %1: exit %2\n%3").arg(args.join(' ')).arg(o.exit_code).arg(o.err);
  if (o.exit_code != 0) return nullptr;
  json j = json::parse(o.out.toStdString(), nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

// A server on loopback; with `token`, the token required.
WebOptions options(const std::string& token = {}) {
  WebOptions o;
  o.token = token;
  o.require_token = !token.empty();
  return o;
}

}  // namespace

class TestPlanApi : public QObject {
  Q_OBJECT

 private slots:
  // The API and the command give the same document: one engine, one reader of the fields.
  void sameAsTheCommand() {
    RunModel model;
    WebHost host(options(), live(model));
    const Reply r = get(host.port(), "/api/plan" + query_of(kGpt3));
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "application/json");
    const json got = json::parse(r.body(), nullptr, false);
    QVERIFY2(!got.is_discarded() && !got["plans"].empty(), r.body().substr(0, 500).c_str());
    const json& best = got["plans"][0];
    QVERIFY(best["fits"].get<bool>());
    const json& l = best["layout"];
    QCOMPARE(l["pp"].get<int>() * l["tp"].get<int>() * l["dp"].get<int>(), 1024);
    QCOMPARE(best["stage_gib"].size(), l["pp"].get<size_t>());

    QString why;
    const json expected = plan_command(kGpt3, why);
    QVERIFY2(!expected.is_null(), qPrintable(why));
    QCOMPARE(got, expected);

    // With fixed fields too.
    Fields fixed = kGpt3;
    fixed.insert(fixed.end(), {{"tp", "8"}, {"recompute", "selective"}, {"top", "3"}});
    const Reply f = get(host.port(), "/api/plan" + query_of(fixed));
    QVERIFY2(f.status() == 200, qPrintable(describe(f)));
    const json fixed_expected = plan_command(fixed, why);
    QVERIFY2(!fixed_expected.is_null(), qPrintable(why));
    QCOMPARE(json::parse(f.body()), fixed_expected);
    QCOMPARE(fixed_expected["plans"].size(), size_t{3});
  }

  // The query as a form sends it: %XX escapes, '+' for a space; at most 20 plans.
  void encodedQuery() {
    RunModel model;
    WebHost host(options(), live(model));
    Reply r = get(host.port(),
                  "/api/plan?model=gpt3%2D175b&gpu=h100-sxm&gpus=1024&global-batch=1536&tp=8&"
                  "recompute=f%75ll&sequence-parallel=1&top=500");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    const json doc = json::parse(r.body());
    QCOMPARE(doc["plans"].size(), size_t{20});
    for (const json& p : doc["plans"]) {
      QCOMPARE(p["layout"]["tp"].get<int>(), 8);
      QCOMPARE(p["layout"]["recompute"].get<std::string>(), std::string("full"));
      QVERIFY(p["layout"]["sequence_parallel"].get<bool>());
    }
    r = get(host.port(), "/api/plan?model=gpt3+175b&gpu=a100-80gb&gpus=8&global-batch=8");
    QVERIFY2(r.status() == 400, qPrintable(describe(r)));
    QVERIFY2(json::parse(r.body())["error"].get<std::string>().find("got 'gpt3 175b'") !=
                 std::string::npos,
             r.body().c_str());
  }

  // Bad input: 400, {"error": the planner's message}, naming the field as the form does.
  void badQueries() {
    RunModel model;
    WebHost host(options(), live(model));
    const std::pair<const char*, const char*> bad[] = {
        {"/api/plan?model=gpt3-175b&gpu=a100-80gb&gpus=abc&global-batch=1536",
         "gpus: must be a whole number, got 'abc'"},
        {"/api/plan?model=gpt3-175b&gpu=a100-80gb&gpus=1024&global-batch=1536&tp=3",
         "tp 3 does not divide the 1024 GPUs"},
        {"/api/plan?model=gpt5&gpu=a100-80gb&gpus=8&global-batch=8", "model: must be one of gpt,"},
        {"/api/plan?model=gpt3-175b&gpu=tpu&gpus=8&global-batch=8", "gpu: must be one of"},
        {"/api/plan", "layers is required"},
    };
    for (const auto& [target, message] : bad) {
      const Reply r = get(host.port(), target);
      QVERIFY2(r.status() == 400, qPrintable(QString(target) + ": " + describe(r)));
      VERIFY_TYPE(r, "application/json");
      const json e = json::parse(r.body(), nullptr, false);
      QVERIFY2(!e.is_discarded() && e.size() == 1 && e.contains("error") &&
                   e["error"].get<std::string>().find(message) != std::string::npos,
               qPrintable(QString(target) + ": " + QString::fromStdString(r.body())));
    }
  }

  // The form's choices, from the engine's own lists.
  void presets() {
    RunModel model;
    WebHost host(options(), live(model));
    const Reply r = get(host.port(), "/api/plan/presets");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "application/json");
    const json p = json::parse(r.body());
    QCOMPARE(p["models"].size(), plan::model_presets().size());
    for (size_t i = 0; i < p["models"].size(); ++i) {
      const plan::ModelPreset& m = plan::model_presets()[i];
      const json& got = p["models"][i];
      QCOMPARE(got["name"].get<std::string>(), m.name);
      QCOMPARE(got["source"].get<std::string>(), m.source);
      QCOMPARE(got["layers"].get<int64_t>(), m.shape.layers);
      QCOMPARE(got["hidden"].get<int64_t>(), m.shape.hidden);
      QCOMPARE(got["heads"].get<int64_t>(), m.shape.heads);
      QCOMPARE(got["ffn"].get<int64_t>(), m.shape.ffn_width());
      QCOMPARE(got["seq"].get<int64_t>(), m.shape.seq);
      QCOMPARE(got["vocab"].get<int64_t>(), m.shape.vocab);
    }
    QCOMPARE(p["gpus"].get<std::vector<std::string>>(), plan::gpu_names());
  }

  // /plan is the page (plan.html, with the dashboard's policy), its script is served, and the
  // dashboard links to it.
  void page() {
    RunModel model;
    WebHost host(options(), live(model));
    Reply r = get(host.port(), "/plan");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "text/html");
    QVERIFY(r.body().find("<script src=\"plan.js\"") != std::string::npos);
    QVERIFY(r.header("Content-Security-Policy").find("default-src 'self'") != std::string::npos);
    QCOMPARE(get(host.port(), "/plan.html").body(), r.body());
    r = get(host.port(), "/plan.js");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "text/javascript");
    QVERIFY(r.body().find("/api/plan/presets") != std::string::npos);
    QVERIFY(get(host.port(), "/").body().find("href=\"plan\"") != std::string::npos);
    QCOMPARE(get(host.port(), "/plan/x").status(), 404u);
  }

  // With the token required: 401 without it like /api/run, the page sends a browser to /login.
  void tokenRequired() {
    RunModel model;
    const std::string token = "plan-token";
    WebHost host(options(token), live(model));
    const test::HeaderList bearer{{http::field::authorization, "Bearer " + token}};
    const test::HeaderList wrong{{http::field::authorization, "Bearer nope"}};
    const std::vector<std::string> guarded{"/api/run", "/api/plan" + query_of(kGpt3),
                                           "/api/plan/presets", "/plan.js"};
    for (const std::string& path : guarded) {
      Reply r = get(host.port(), path);
      QVERIFY2(r.status() == 401, qPrintable(QString::fromStdString(path) + ": " + describe(r)));
      QVERIFY(r.header(http::field::www_authenticate).rfind("Bearer", 0) == 0);
      r = get(host.port(), path, wrong);
      QVERIFY2(r.status() == 401, qPrintable(QString::fromStdString(path) + ": " + describe(r)));
      r = get(host.port(), path, bearer);
      QVERIFY2(r.status() == 200, qPrintable(QString::fromStdString(path) + ": " + describe(r)));
    }
    // A bad query is checked only after the token: no planner message to a stranger.
    Reply r = get(host.port(), "/api/plan?gpus=abc");
    QVERIFY2(r.status() == 401, qPrintable(describe(r)));
    for (const char* page : {"/plan", "/plan.html"}) {
      r = get(host.port(), page);
      QVERIFY2(r.status() == 303, qPrintable(QString(page) + ": " + describe(r)));
      QCOMPARE(r.header(http::field::location), std::string("/login"));
      r = get(host.port(), page, bearer);
      QVERIFY2(r.status() == 200, qPrintable(QString(page) + ": " + describe(r)));
    }
  }
};

QTEST_GUILESS_MAIN(TestPlanApi)
#include "tst_plan_api.moc"
