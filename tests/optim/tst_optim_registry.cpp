// The optimizer registry against the optimizers themselves: every entry's state arrays are the
// ones its optimizer really allocates (names, order, sizes, initial values) under each setting
// that changes them; the planner's figure is the same; the hyper-parameters an entry lists are
// exactly the ones validation lets it read; the state format records every hyper-parameter.
#include <QtTest>

#include <set>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/registry.h"

using namespace shardlab;

namespace {

// Every optimizer with each zero-default hyper-parameter it reads set, and unset: the settings
// that can change which state arrays it keeps or what they start at.
std::vector<OptimizerConfig> settings() {
  std::vector<OptimizerConfig> v;
  for (const OptimizerSpec& spec : optimizer_registry()) {
    OptimizerConfig c;
    c.name = spec.name;
    v.push_back(c);
    if (spec.reads("momentum")) {
      c.momentum = 0.5;
      v.push_back(c);
    }
    if (spec.reads("initial_accumulator")) {
      c.initial_accumulator = 0.25;
      v.push_back(c);
    }
  }
  return v;
}

QString describe(const OptimizerConfig& c) {
  return QString("%1 (momentum %2, initial_accumulator %3)")
      .arg(QString::fromStdString(c.name))
      .arg(c.momentum)
      .arg(c.initial_accumulator);
}

}  // namespace

class TestOptimRegistry : public QObject {
  Q_OBJECT

 private slots:
  void namesAreTheRegistrysInOrderAndUnique() {
    std::vector<std::string> names;
    std::set<std::string> unique;
    for (const OptimizerSpec& s : optimizer_registry()) {
      names.push_back(s.name);
      unique.insert(s.name);
      QVERIFY(find_optimizer(s.name) == &s);
      QVERIFY(s.args && s.make);
    }
    QCOMPARE(optimizer_names(), names);
    QCOMPARE(unique.size(), names.size());
    QVERIFY(find_optimizer("lamb") == nullptr);
  }

  void stateArraysAreWhatTheOptimizerAllocates() {
    const int64_t n = 7;
    for (const OptimizerConfig& c : settings()) {
      auto opt = make_optimizer(c);
      opt->attach({3, 3 + n});
      const auto real = opt->state();
      const auto listed = state_arrays(c);
      QVERIFY2(real.size() == listed.size(), qPrintable(describe(c)));
      int64_t floats = 0;
      for (size_t i = 0; i < real.size(); ++i) {
        QCOMPARE(real[i].first, listed[i].name);
        QCOMPARE(static_cast<int64_t>(real[i].second.size()), n * listed[i].per_param);
        for (float x : real[i].second)
          QVERIFY2(x == static_cast<float>(listed[i].initial), qPrintable(describe(c)));
        floats += listed[i].per_param;
      }
      QCOMPARE(state_floats_per_param(c), floats);
      QCOMPARE(opt->state_bytes(), floats * n * static_cast<int64_t>(sizeof(float)));
    }
  }

  void momentumDecidesTheMomentumBuffer() {
    OptimizerConfig c;
    c.name = "sgd";
    QCOMPARE(state_floats_per_param(c), int64_t{0});
    c.momentum = 0.9;
    QCOMPARE(state_floats_per_param(c), int64_t{1});
    c.name = "rmsprop";
    QCOMPARE(state_arrays(c).size(), size_t{2});
    QCOMPARE(state_arrays(c)[1].name, std::string("momentum_buffer"));
    c.name = "adam";
    c.momentum = 0;
    QCOMPARE(state_floats_per_param(c), int64_t{2});
  }

  // A hyper-parameter an entry lists is validated by its range rule; one it does not list with a
  // zero default is refused as unused. Either way validation names that field.
  void listedHyperParametersAreTheOnesValidationReads() {
    for (const OptimizerSpec& spec : optimizer_registry()) {
      for (const auto& h : spec.hyper_parameters) {
        bool known = false;
        for (const HyperParameter& p : hyper_parameters()) known = known || h == p.name;
        QVERIFY2(known, h.c_str());
      }
      for (const HyperParameter& h : hyper_parameters()) {
        if (!h.zero_default) continue;
        OptimizerConfig c;
        c.name = spec.name;
        // A value out of range for every rule: negative (a flag reads as set).
        if (h.rule == HyperRule::needs_momentum)
          c.nesterov = true;
        else if (std::string(h.name) == "weight_decay")
          c.weight_decay = -1;
        else if (std::string(h.name) == "momentum")
          c.momentum = -1;
        else
          c.initial_accumulator = -1;
        try {
          make_optimizer(c);
          QFAIL(qPrintable(QString("%1 accepted %2").arg(spec.name.c_str(), h.name)));
        } catch (const InvalidArgument& e) {
          const QString msg = e.what();
          QVERIFY2(msg.startsWith(QString("optimizer.") + h.name + ":"), e.what());
          QCOMPARE(msg.contains("not used by"), !spec.reads(h.name));
        }
      }
    }
  }

  void optimizersReadingFollowsTheEntries() {
    QCOMPARE(optimizers_reading("momentum"), (std::vector<std::string>{"sgd", "rmsprop"}));
    QCOMPARE(optimizers_reading("lr"), optimizer_names());
    QVERIFY(optimizers_reading("no_such_field").empty());
  }

  void unknownNameThrowsListingKnownOnes() {
    OptimizerConfig c;
    c.name = "lamb";
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, state_arrays(c));
    try {
      optimizer_spec(c);
    } catch (const InvalidArgument& e) {
      QVERIFY2(QString(e.what()).contains("known: sgd, adam, adamw, rmsprop, adagrad"), e.what());
    }
  }
};

QTEST_APPLESS_MAIN(TestOptimRegistry)
#include "tst_optim_registry.moc"
