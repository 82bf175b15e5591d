// /metrics (net/web/metrics.h): prometheus_metrics() read back by a small parser of the text
// exposition format 0.0.4 written here (# HELP / # TYPE lines, name{label="value",...} value),
// which also checks the format's rules: every family declared once with HELP and TYPE before its
// samples, samples of one family together, label values escaped, no series twice. The figures are
// worked out here from the events fed: collective seconds by the kind of group, the straggler of a
// scenario built so that one rank holds the others up, ranks that are down (failed, finished,
// silent), the memory ledger's categories.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "net/run_model.h"
#include "net/web/metrics.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tl = shardlab::telemetry;
using test::EventFeeder;
using test::grid_hello;
using test::make_step;

namespace {

constexpr double kT0 = 1.7e9;

// ---- An exposition-format parser (0.0.4), independent of metrics.cpp ----

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Family {
  std::string help, type;
  int helps = 0, types = 0;
  bool has_samples = false;
};

struct Exposition {
  std::map<std::string, Family> families;
  std::vector<Sample> samples;
  std::vector<std::string> errors;  // every rule broken, with the line

  // The samples of `name` whose labels include every one of `match`.
  std::vector<Sample> find(const std::string& name,
                           const std::map<std::string, std::string>& match = {}) const {
    std::vector<Sample> out;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool all = true;
      for (const auto& [k, v] : match) {
        const auto it = s.labels.find(k);
        all = all && it != s.labels.end() && it->second == v;
      }
      if (all) out.push_back(s);
    }
    return out;
  }
};

bool metric_name_ok(const std::string& n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!(alpha || (i > 0 && c >= '0' && c <= '9'))) return false;
  }
  return true;
}

bool label_name_ok(const std::string& n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!(alpha || (i > 0 && c >= '0' && c <= '9'))) return false;
  }
  return n.rfind("__", 0) != 0;  // reserved
}

bool parse_value(const std::string& text, double& v) {
  if (text == "NaN") {
    v = std::nan("");
    return true;
  }
  if (text == "+Inf" || text == "Inf") {
    v = INFINITY;
    return true;
  }
  if (text == "-Inf") {
    v = -INFINITY;
    return true;
  }
  if (text.empty()) return false;
  char* end = nullptr;
  v = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(v);
}

// The family a sample line belongs to: its own name for counters, gauges and untyped metrics;
// histograms and summaries add suffixes.
std::string family_of(const std::string& sample, const std::map<std::string, Family>& families) {
  if (families.count(sample)) return sample;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (sample.size() > s.size() && sample.compare(sample.size() - s.size(), s.size(), s) == 0) {
      const std::string base = sample.substr(0, sample.size() - s.size());
      const auto it = families.find(base);
      if (it != families.end() && (it->second.type == "histogram" || it->second.type == "summary"))
        return base;
    }
  }
  return {};
}

Exposition parse_exposition(const std::string& text) {
  Exposition x;
  auto error = [&](const std::string& what, const std::string& line) {
    x.errors.push_back(what + ": [" + line + "]");
  };
  if (!text.empty() && text.back() != '\n') error("the text does not end with a newline", "");
  std::set<std::string> series;  // name + labels, for duplicates
  std::string current;           // the family whose samples are being read
  std::set<std::string> closed;  // families whose samples ended
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    const std::string line = text.substr(at, nl == std::string::npos ? nl : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    if (line.empty()) continue;
    if (line[0] == '#') {
      // "# HELP name doc" / "# TYPE name type"; other comments are free text.
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        const bool help = line[2] == 'H';
        const std::string rest = line.substr(7);
        const size_t sp = rest.find(' ');
        const std::string name = rest.substr(0, sp);
        const std::string arg = sp == std::string::npos ? "" : rest.substr(sp + 1);
        if (!metric_name_ok(name)) error("bad metric name", line);
        Family& f = x.families[name];
        if (help) {
          ++f.helps;
          f.help = arg;
          // Docstrings escape only backslash and newline.
          for (size_t i = 0; i < arg.size(); ++i)
            if (arg[i] == '\\') {
              if (i + 1 >= arg.size() || (arg[i + 1] != '\\' && arg[i + 1] != 'n'))
                error("bad escape in HELP", line);
              ++i;
            }
        } else {
          ++f.types;
          f.type = arg;
          if (f.has_samples) error("TYPE after the family's samples", line);
          if (arg != "counter" && arg != "gauge" && arg != "histogram" && arg != "summary" &&
              arg != "untyped")
            error("unknown type", line);
        }
      }
      continue;
    }
    // name[{labels}] value [timestamp]
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!metric_name_ok(s.name)) error("bad metric name", line);
    std::string key;  // the series' labels in order, for duplicates
    if (i < line.size() && line[i] == '{') {
      ++i;
      bool ok = true;
      while (ok && i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) {
          ok = false;
          break;
        }
        const std::string lname = line.substr(i, eq - i);
        if (!label_name_ok(lname)) error("bad label name '" + lname + "'", line);
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') {
          ok = false;
          break;
        }
        ++i;
        std::string value;
        bool closed_quote = false;
        while (i < line.size()) {
          const char c = line[i++];
          if (c == '"') {
            closed_quote = true;
            break;
          }
          if (c == '\\') {
            if (i >= line.size()) break;
            const char e = line[i++];
            if (e == '\\')
              value += '\\';
            else if (e == '"')
              value += '"';
            else if (e == 'n')
              value += '\n';
            else
              error("bad escape in a label value", line);
          } else {
            value += c;
          }
        }
        if (!closed_quote) {
          ok = false;
          break;
        }
        if (!s.labels.emplace(lname, value).second) error("label twice", line);
        key += lname + "=" + value + "\x1f";
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (!ok || i >= line.size() || line[i] != '}') {
        error("bad label set", line);
        continue;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      error("no value", line);
      continue;
    }
    const std::string rest = line.substr(i + 1);
    const size_t sp = rest.find(' ');
    const std::string value = rest.substr(0, sp);
    if (!parse_value(value, s.value)) error("bad value", line);
    if (sp != std::string::npos) {
      const std::string ts = rest.substr(sp + 1);
      if (ts.empty() || ts.find_first_not_of("-0123456789") != std::string::npos)
        error("bad timestamp", line);
    }
    const std::string family = family_of(s.name, x.families);
    if (family.empty()) {
      error("a sample of no declared family", line);
    } else {
      Family& f = x.families[family];
      if (f.types == 0) error("a sample before its family's TYPE", line);
      f.has_samples = true;
      if (family != current) {
        if (closed.count(family)) error("the family's samples are not together", line);
        if (!current.empty()) closed.insert(current);
        current = family;
      }
    }
    if (!series.insert(s.name + "\x1e" + key).second) error("the same series twice", line);
    x.samples.push_back(std::move(s));
  }
  for (const auto& [name, f] : x.families) {
    if (f.helps != 1) x.errors.push_back(name + ": HELP " + std::to_string(f.helps) + " times");
    if (f.types != 1) x.errors.push_back(name + ": TYPE " + std::to_string(f.types) + " times");
  }
  return x;
}

std::string all_errors(const Exposition& x) {
  std::string out;
  for (const auto& e : x.errors) out += e + "\n";
  return out;
}

// ---- Runs built by hand ----

Hello hello(int rank, int world, int pp, int tp, int dp, const std::string& job = "job-m") {
  Hello h = grid_hello(job, rank, world, pp, tp, dp);
  h.host = "node" + std::to_string(rank / 4);
  h.pid = 1000 + rank;
  return h;
}

tl::CollectiveEvent collective(const std::string& op, const std::string& group, double start,
                               double duration, double wait = -1, int last = -1) {
  tl::CollectiveEvent c;
  c.op = op;
  c.group = group;
  c.bytes = 1 << 20;
  c.start = start;
  c.duration = duration;
  c.algbw = 1;
  c.busbw = 1;
  c.ok = true;
  c.wait = wait;
  c.last_rank = last;
  return c;
}

std::string label(int v) {
  return std::to_string(v);
}

const std::vector<std::string> kFamilies = {"shardlab_step",
                                            "shardlab_loss",
                                            "shardlab_step_seconds",
                                            "shardlab_comm_seconds_total",
                                            "shardlab_memory_bytes",
                                            "shardlab_rank_up",
                                            "shardlab_straggler",
                                            "shardlab_collector_events_total",
                                            "shardlab_collector_connections"};

const std::map<std::string, std::string> kTypes = {{"shardlab_step", "gauge"},
                                                   {"shardlab_loss", "gauge"},
                                                   {"shardlab_step_seconds", "gauge"},
                                                   {"shardlab_comm_seconds_total", "counter"},
                                                   {"shardlab_memory_bytes", "gauge"},
                                                   {"shardlab_rank_up", "gauge"},
                                                   {"shardlab_straggler", "gauge"},
                                                   {"shardlab_collector_events_total", "counter"},
                                                   {"shardlab_collector_connections", "gauge"}};

}  // namespace

class TestMetrics : public QObject {
  Q_OBJECT

 private slots:
  // The parser itself rejects what the format forbids (so that a clean parse means something).
  void parserCatchesBrokenText() {
    QVERIFY(parse_exposition("# HELP a x\n# TYPE a gauge\na 1\n").errors.empty());
    QVERIFY(!parse_exposition("a 1\n").errors.empty());                  // undeclared
    QVERIFY(!parse_exposition("# TYPE a gauge\na 1\n").errors.empty());  // no HELP
    QVERIFY(!parse_exposition("# HELP a x\n# TYPE a gauge\na{b=\"x} 1\n").errors.empty());
    QVERIFY(!parse_exposition("# HELP a x\n# TYPE a gauge\na{b=\"\\q\"} 1\n").errors.empty());
    QVERIFY(!parse_exposition("# HELP a x\n# TYPE a gauge\na 1\na 2\n").errors.empty());
    QVERIFY(!parse_exposition("# HELP a x\n# TYPE a gauge\na one\n").errors.empty());
    QVERIFY(!parse_exposition("# HELP a x\n# TYPE a gauge\n# HELP b y\n# TYPE b gauge\n"
                              "a{x=\"1\"} 1\nb 1\na{x=\"2\"} 2\n")
                 .errors.empty());  // a's samples split
    const Exposition x =
        parse_exposition("# HELP a x\n# TYPE a counter\na{k=\"q\\\"b\\\\s\\nn\",z=\"\"} 2.5\n");
    QVERIFY2(x.errors.empty(), all_errors(x).c_str());
    QCOMPARE(x.samples.size(), size_t{1});
    QCOMPARE(x.samples[0].labels.at("k"), std::string("q\"b\\s\nn"));
    QCOMPARE(x.samples[0].value, 2.5);
  }

  // Every family named in metrics.h, declared once with HELP and TYPE; every sample in a family;
  // per-rank labels from the HELLOs; a rank without a HELLO left out; the collector's own figures.
  void everyFamilyWellFormed() {
    RunModel m;
    EventFeeder feed(m);
    constexpr int kWorld = 8;
    for (int r = 0; r < kWorld; ++r) m.add(Message(hello(r, kWorld, 2, 2, 2)));
    uint64_t events = 0;
    std::map<int, tl::StepEvent> last_step;
    for (int n = 1; n <= 5; ++n)
      for (int r = 0; r < kWorld; ++r) {
        const tl::StepEvent s = make_step(n, 4.0 / (n + r), 0.25 + 0.01 * r);
        feed.add(r, kT0 + n, s);
        last_step[r] = s;
        ++events;
      }
    feed.add(11, kT0 + 1, make_step(3, 1, 1));  // no HELLO: no coordinates, not exported
    ++events;
    const std::string text = prometheus_metrics(MetricsInput{m, "", kT0 + 6, 42});
    const Exposition x = parse_exposition(text);
    QVERIFY2(x.errors.empty(), (all_errors(x) + text).c_str());

    for (const std::string& f : kFamilies) {
      QVERIFY2(x.families.count(f), f.c_str());
      const Family& fam = x.families.at(f);
      QCOMPARE(fam.helps, 1);
      QCOMPARE(fam.types, 1);
      QVERIFY2(!fam.help.empty(), f.c_str());
      QCOMPARE(fam.type, kTypes.at(f));
      QVERIFY2(fam.has_samples, f.c_str());
    }
    // Nothing else is declared.
    QCOMPARE(x.families.size(), kFamilies.size());

    // Per-rank families: one series per rank with coordinates (the HELLO-less rank 11 left out).
    for (const char* f : {"shardlab_step", "shardlab_loss", "shardlab_step_seconds",
                          "shardlab_rank_up", "shardlab_straggler"}) {
      const auto samples = x.find(f);
      QCOMPARE(samples.size(), size_t{kWorld});
      std::set<std::string> ranks;
      for (const Sample& s : samples) {
        QCOMPARE(s.labels.size(), size_t{6});
        const int r = std::stoi(s.labels.at("rank"));
        QCOMPARE(s.labels.at("host"), "node" + std::to_string(r / 4));  // the HELLO's host
        ranks.insert(s.labels.at("rank"));
        const Hello h = hello(r, kWorld, 2, 2, 2);
        QCOMPARE(s.labels.at("job"), std::string("job-m"));  // the HELLOs' job id
        QCOMPARE(s.labels.at("pp"), label(h.pp_i));
        QCOMPARE(s.labels.at("tp"), label(h.tp_i));
        QCOMPARE(s.labels.at("dp"), label(h.dp_i));
      }
      QCOMPARE(ranks.size(), size_t{kWorld});
      QVERIFY(!ranks.count("11"));
    }
    for (int r = 0; r < kWorld; ++r) {
      const std::map<std::string, std::string> at{{"rank", label(r)}};
      QCOMPARE(x.find("shardlab_step", at).at(0).value, double(last_step[r].step));
      QCOMPARE(x.find("shardlab_loss", at).at(0).value, last_step[r].loss);
      QCOMPARE(x.find("shardlab_step_seconds", at).at(0).value, last_step[r].step_seconds);
      QCOMPARE(x.find("shardlab_rank_up", at).at(0).value, 1.0);
      QCOMPARE(x.find("shardlab_straggler", at).at(0).value, 0.0);
      QCOMPARE(x.find("shardlab_comm_seconds_total", at).size(), size_t{4});
      QCOMPARE(x.find("shardlab_memory_bytes", at).size(), size_t{5});
    }
    const auto ev = x.find("shardlab_collector_events_total");
    QCOMPARE(ev.size(), size_t{1});
    QCOMPARE(ev[0].labels, (std::map<std::string, std::string>{{"job", "job-m"}}));
    QCOMPARE(ev[0].value, double(events));
    const auto conn = x.find("shardlab_collector_connections");
    QCOMPARE(conn.size(), size_t{1});
    QCOMPARE(conn[0].value, 42.0);

    // An empty model: the families are still declared, with only the collector's samples.
    RunModel empty;
    const Exposition e = parse_exposition(prometheus_metrics(MetricsInput{empty, "j", kT0, 0}));
    QVERIFY2(e.errors.empty(), all_errors(e).c_str());
    QCOMPARE(e.find("shardlab_step").size(), size_t{0});
    QCOMPARE(e.find("shardlab_collector_events_total").at(0).value, 0.0);
    QCOMPARE(e.find("shardlab_collector_events_total").at(0).labels.at("job"), std::string("j"));
  }

  // A job name with a double quote, a backslash and a newline (given, or from the HELLOs) reads
  // back as it was.
  void labelValuesEscaped() {
    const std::string weird = "we\"ird\\job\nname \\n";
    for (const bool from_hello : {false, true}) {
      RunModel m;
      EventFeeder feed(m);
      m.add(Message(hello(0, 1, 1, 1, 1, from_hello ? weird : "plain")));
      feed.add(0, kT0, make_step(1, 1, 1));
      const std::string text =
          prometheus_metrics(MetricsInput{m, from_hello ? "" : weird, kT0 + 1, 0});
      // No raw newline inside a line: every line parses as a whole.
      const Exposition x = parse_exposition(text);
      QVERIFY2(x.errors.empty(), (all_errors(x) + text).c_str());
      QVERIFY(!x.samples.empty());
      // A name from the wire is kept printable by the run model (control characters as '?',
      // engine/core/display_text.h); one given to the server is exposed as it is.
      std::string shown = weird;
      if (from_hello)
        for (char& c : shown)
          if (static_cast<unsigned char>(c) < 0x20) c = '?';
      for (const Sample& s : x.samples) QCOMPARE(s.labels.at("job"), shown);
    }
  }

  // shardlab_comm_seconds_total by kind = the sums of the collectives' durations on groups of
  // that kind (the part of the group's name before '['); other groups count in none.
  void commSecondsByKind() {
    RunModel m;
    EventFeeder feed(m);
    constexpr int kWorld = 4;
    for (int r = 0; r < kWorld; ++r) m.add(Message(hello(r, kWorld, 2, 2, 1)));
    const std::vector<std::string> groups = {"tp[0]", "tp[1]",     "pp[0]", "dp[3]",   "world",
                                             "dp",    "custom[1]", "tpx",   "world[0]"};
    std::map<int, std::map<std::string, double>> expected;
    for (int r = 0; r < kWorld; ++r)
      for (const char* k : {"tp", "pp", "dp", "world"}) expected[r][k] = 0;
    int i = 0;
    for (int round = 0; round < 7; ++round)
      for (int r = 0; r < kWorld; ++r)
        for (const std::string& g : groups) {
          ++i;
          const double d = 0.001 * ((i * 37) % 101) + 0.0003 * r;
          feed.add(r, kT0 + i * 0.001, collective(i % 2 ? "all_reduce" : "send", g, kT0, d));
          const std::string kind = g.substr(0, g.find('['));
          if (kind == "tp" || kind == "pp" || kind == "dp" || kind == "world")
            expected[r][kind] += d;
        }
    const std::string text = prometheus_metrics(MetricsInput{m, "", kT0 + 1, 0});
    const Exposition x = parse_exposition(text);
    QVERIFY2(x.errors.empty(), all_errors(x).c_str());
    const auto all = x.find("shardlab_comm_seconds_total");
    QCOMPARE(all.size(), size_t{kWorld * 4});
    for (int r = 0; r < kWorld; ++r)
      for (const auto& [kind, seconds] : expected[r]) {
        const auto s = x.find("shardlab_comm_seconds_total", {{"rank", label(r)}, {"kind", kind}});
        QCOMPARE(s.size(), size_t{1});
        QVERIFY2(std::abs(s[0].value - seconds) <= 1e-12 * std::max(1.0, seconds),
                 qPrintable(QString("rank %1 %2: %3, expected %4")
                                .arg(r)
                                .arg(QString::fromStdString(kind))
                                .arg(s[0].value, 0, 'g', 17)
                                .arg(seconds, 0, 'g', 17)));
        QVERIFY(seconds > 0);
      }
  }

  // One rank holds every step up: its dp peers wait 0.4 s of each 1 s step for it at the
  // all-reduce, where it arrives last. shardlab_straggler is 1 for that rank only, as
  // RunModel::straggler() says.
  void stragglerFlag() {
    RunModel m;
    EventFeeder feed(m);
    constexpr int kWorld = 4, kSlow = 2, kSteps = 12;
    for (int r = 0; r < kWorld; ++r) m.add(Message(hello(r, kWorld, 1, 1, kWorld)));
    double last_time = 0;
    for (int n = 1; n <= kSteps; ++n)
      for (int r = 0; r < kWorld; ++r) {
        const double t = kT0 + 10.0 * n;
        feed.add(r, t + 0.2, tl::PhaseEvent{0, 0, tl::Phase::forward, t, t + 0.2});
        feed.add(r, t + 0.5, tl::PhaseEvent{0, 0, tl::Phase::backward, t + 0.2, t + 0.5});
        const double d = r == kSlow ? 0.05 : 0.45, w = r == kSlow ? 0.0 : 0.40;
        feed.add(r, t + 0.5 + d, collective("all_reduce", "dp[0]", t + 0.5, d, w, kSlow));
        feed.add(r, t + 0.55 + d,
                 tl::PhaseEvent{0, -1, tl::Phase::optimizer, t + 0.5 + d, t + 0.55 + d});
        feed.add(r, t + 1.0, make_step(n, 1.0 / n, 1.0));
        last_time = t + 1.0;
      }
    // The scenario does what it is meant to.
    QVERIFY(m.straggler(kSlow));
    const Exposition x = parse_exposition(prometheus_metrics(MetricsInput{m, "", last_time, 0}));
    QVERIFY2(x.errors.empty(), all_errors(x).c_str());
    int flagged = 0;
    for (int r = 0; r < kWorld; ++r) {
      const auto s = x.find("shardlab_straggler", {{"rank", label(r)}});
      QCOMPARE(s.size(), size_t{1});
      QVERIFY(s[0].value == 0.0 || s[0].value == 1.0);
      QCOMPARE(s[0].value == 1.0, m.straggler(r));
      QCOMPARE(s[0].value == 1.0, r == kSlow);
      flagged += s[0].value == 1.0;
    }
    QCOMPARE(flagged, 1);

    // The same ranks without the slow one: nobody.
    RunModel even;
    EventFeeder efeed(even);
    for (int r = 0; r < kWorld; ++r) even.add(Message(hello(r, kWorld, 1, 1, kWorld)));
    for (int n = 1; n <= kSteps; ++n)
      for (int r = 0; r < kWorld; ++r) {
        const double t = kT0 + 10.0 * n;
        efeed.add(r, t + 0.1, collective("all_reduce", "dp[0]", t, 0.1, 0.0, (n + r) % kWorld));
        efeed.add(r, t + 1.0, make_step(n, 1.0 / n, 1.0));
      }
    const Exposition y =
        parse_exposition(prometheus_metrics(MetricsInput{even, "", kT0 + 10.0 * kSteps + 1, 0}));
    QVERIFY2(y.errors.empty(), all_errors(y).c_str());
    for (const Sample& s : y.find("shardlab_straggler")) QCOMPARE(s.value, 0.0);
  }

  // shardlab_rank_up: 1 while starting or running and heard from within 5 s; 0 for a failed, a
  // finished and a silent rank. A rank known only from its HELLO is up (nothing to be silent
  // since).
  void rankUp() {
    RunModel m;
    EventFeeder feed(m);
    constexpr int kWorld = 5;
    for (int r = 0; r < kWorld; ++r) m.add(Message(hello(r, kWorld, 1, 1, kWorld)));
    const double now = kT0 + 100;
    feed.add(0, now - 1, make_step(7, 1, 1));                                // running
    feed.add(1, now - 1, make_step(7, 1, 1));                                // failed
    feed.add(1, now - 0.5, tl::JobStateEvent{tl::JobState::failed, "oom"});  //
    feed.add(2, now - 10, make_step(7, 1, 1));                               // silent: 10 s
    feed.add(3, now - 1, tl::JobStateEvent{tl::JobState::finished, ""});     // finished
    // rank 4: HELLO only
    const Exposition x = parse_exposition(prometheus_metrics(MetricsInput{m, "", now, 0}));
    QVERIFY2(x.errors.empty(), all_errors(x).c_str());
    const std::map<int, double> expected{{0, 1}, {1, 0}, {2, 0}, {3, 0}, {4, 1}};
    for (const auto& [r, up] : expected) {
      const auto s = x.find("shardlab_rank_up", {{"rank", label(r)}});
      QCOMPARE(s.size(), size_t{1});
      if (s[0].value != up) QFAIL(qPrintable(QString("rank %1: up %2").arg(r).arg(s[0].value)));
    }
    // The silent rank comes back with a heartbeat.
    feed.add(2, now - 0.1, tl::HeartbeatEvent{});
    const Exposition y = parse_exposition(prometheus_metrics(MetricsInput{m, "", now, 0}));
    QCOMPARE(y.find("shardlab_rank_up", {{"rank", "2"}}).at(0).value, 1.0);
  }

  // shardlab_memory_bytes: the latest MEMORY event's current bytes, one series per category.
  void memoryCategories() {
    RunModel m;
    EventFeeder feed(m);
    for (int r = 0; r < 2; ++r) m.add(Message(hello(r, 2, 1, 1, 2)));
    tl::MemoryEvent a;
    a.current = {1000, 2000, 3000, 4000, 5000};
    a.peak = {9000, 9000, 9000, 9000, 9000};
    feed.add(0, kT0, a);
    tl::MemoryEvent b;
    b.current = {int64_t{3} << 40, 17, 0, 123456789, 8};
    b.peak = b.current;
    feed.add(0, kT0 + 1, b);  // the latest counts
    feed.add(1, kT0 + 1, a);
    const Exposition x = parse_exposition(prometheus_metrics(MetricsInput{m, "", kT0 + 2, 0}));
    QVERIFY2(x.errors.empty(), all_errors(x).c_str());
    const std::vector<std::string> categories = {"params", "grads", "optimizer_state",
                                                 "activations", "comm"};
    for (int r = 0; r < 2; ++r) {
      const auto& want = r == 0 ? b.current : a.current;
      const auto all = x.find("shardlab_memory_bytes", {{"rank", label(r)}});
      QCOMPARE(all.size(), categories.size());
      for (size_t c = 0; c < categories.size(); ++c) {
        const auto s =
            x.find("shardlab_memory_bytes", {{"rank", label(r)}, {"category", categories[c]}});
        QCOMPARE(s.size(), size_t{1});
        QCOMPARE(s[0].value, double(want[c]));
      }
    }
  }

  // Non-finite losses are exposition values Prometheus reads (NaN, +Inf), not "nan"/"inf".
  void nonFiniteValues() {
    RunModel m;
    EventFeeder feed(m);
    for (int r = 0; r < 2; ++r) m.add(Message(hello(r, 2, 1, 1, 2)));
    feed.add(0, kT0, make_step(1, std::nan(""), 1));
    feed.add(1, kT0, make_step(1, INFINITY, 1));
    const std::string text = prometheus_metrics(MetricsInput{m, "", kT0 + 1, 0});
    const Exposition x = parse_exposition(text);
    QVERIFY2(x.errors.empty(), (all_errors(x) + text).c_str());
    QVERIFY(std::isnan(x.find("shardlab_loss", {{"rank", "0"}}).at(0).value));
    QCOMPARE(x.find("shardlab_loss", {{"rank", "1"}}).at(0).value, double(INFINITY));
  }
};

QTEST_GUILESS_MAIN(TestMetrics)
#include "tst_metrics.moc"
