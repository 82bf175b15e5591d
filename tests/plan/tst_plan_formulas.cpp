// engine/plan's formulas against the papers they come from, each expected figure written from the
// paper (published numbers, or its expression typed out here term by term), never from the code
// under test:
//   zeroFigure1           Rajbhandari et al. 2019 figure 1: 7.5B parameters, 64-way data
//                         parallel, mixed-precision Adam (K = 12): 120, 31.4, 16.6, 1.9 GB.
//   zeroTable1            Rajbhandari et al. 2019 table 1: per-device model states of 7.5B, 128B
//                         and 1T parameters at data-parallel degrees 1 to 1024, stages 1-3.
//   megatronDistributedOptimizer  Megatron-LM's bytes per parameter with fp32 gradients.
//   activationsTable2     Korthikanti et al. 2022 table 2, every row, at GPT-3 175B's sizes.
//   parametersTable1      Narayanan et al. 2021 eq. 2 against the parameter counts of table 1.
//   flopsExpressions      Korthikanti's model FLOPs 72BLsh^2(1 + s/6h + V/12hL) and Narayanan's
//                         eq. 3 with full recomputation 96BLsh^2(1 + s/6h + V/16hL).
//   badShapes             one message naming the field.
#include <QtTest>

#include <cmath>

#include "engine/core/error.h"
#include "engine/plan/model_states.h"
#include "engine/plan/transformer.h"

using namespace shardlab::plan;

namespace {

// GPT-3 175B (Brown et al. 2020): 96 layers, hidden 12288, 96 heads, sequence 2048.
GptShape gpt3() {
  return GptShape{96, 12288, 96, 0, 2048, 51200};
}

bool near(double a, double b, double rel) {
  return std::abs(a - b) <= rel * std::abs(b);
}

}  // namespace

class TestPlanFormulas : public QObject {
  Q_OBJECT

 private slots:
  void zeroFigure1() {
    const int64_t psi = 7'500'000'000, n = 64;
    const StateWidths mixed{2, 2, 12};
    // Published to one decimal (GB = 1e9 bytes): allow half a unit of the last digit.
    const double published[] = {120, 31.4, 16.6, 1.9};
    for (int stage = 0; stage <= 3; ++stage) {
      const double gb =
          static_cast<double>(zero_model_states(stage, psi, psi / n, mixed).total()) / 1e9;
      QVERIFY2(
          std::abs(gb - published[stage]) <= 0.05,
          qPrintable(
              QString("stage %1: %2 GB, published %3").arg(stage).arg(gb).arg(published[stage])));
    }
  }

  // Table 1 of the ZeRO paper (GB = 1e9 bytes; mixed-precision Adam, K = 12), as printed: for
  // each model, P_os, P_os+g and P_os+g+p (stages 1, 2, 3) at N_d = 1, 4, 16, 64, 256, 1024. One
  // cell is left out (7.5B, N_d = 256, P_os): our transcription of it is uncertain.
  void zeroTable1() {
    struct Cell {
      double psi;
      int64_t nd;
      int stage;
      const char* gb;  // as printed
    };
    constexpr double b75 = 7.5e9, b128 = 128e9, t1 = 1e12;
    const Cell cells[] = {
        {b75, 1, 1, "120"},     {b75, 1, 2, "120"},     {b75, 1, 3, "120"},
        {b75, 4, 1, "52.5"},    {b75, 4, 2, "41.3"},    {b75, 4, 3, "30"},
        {b75, 16, 1, "35.6"},   {b75, 16, 2, "21.6"},   {b75, 16, 3, "7.5"},
        {b75, 64, 1, "31.4"},   {b75, 64, 2, "16.6"},   {b75, 64, 3, "1.88"},
        {b75, 256, 2, "15.4"},  {b75, 256, 3, "0.47"},  {b75, 1024, 1, "30.1"},
        {b75, 1024, 2, "15.1"}, {b75, 1024, 3, "0.12"}, {b128, 1, 1, "2048"},
        {b128, 1, 2, "2048"},   {b128, 1, 3, "2048"},   {b128, 4, 1, "896"},
        {b128, 4, 2, "704"},    {b128, 4, 3, "512"},    {b128, 16, 1, "608"},
        {b128, 16, 2, "368"},   {b128, 16, 3, "128"},   {b128, 64, 1, "536"},
        {b128, 64, 2, "284"},   {b128, 64, 3, "32"},    {b128, 256, 1, "518"},
        {b128, 256, 2, "263"},  {b128, 256, 3, "8"},    {b128, 1024, 1, "513"},
        {b128, 1024, 2, "257"}, {b128, 1024, 3, "2"},   {t1, 1, 1, "16000"},
        {t1, 1, 2, "16000"},    {t1, 1, 3, "16000"},    {t1, 4, 1, "7000"},
        {t1, 4, 2, "5500"},     {t1, 4, 3, "4000"},     {t1, 16, 1, "4750"},
        {t1, 16, 2, "2875"},    {t1, 16, 3, "1000"},    {t1, 64, 1, "4187"},
        {t1, 64, 2, "2218"},    {t1, 64, 3, "250"},     {t1, 256, 1, "4046"},
        {t1, 256, 2, "2054"},   {t1, 256, 3, "62.5"},   {t1, 1024, 1, "4011"},
        {t1, 1024, 2, "2013"},  {t1, 1024, 3, "15.6"},
    };
    const StateWidths mixed{2, 2, 12};
    for (const Cell& c : cells) {
      const auto psi = static_cast<int64_t>(c.psi);
      const double gb =
          static_cast<double>(zero_model_states(c.stage, psi, psi / c.nd, mixed).total()) / 1e9;
      // One unit of the last printed digit: the table rounds some cells and truncates others
      // (1T at N_d = 64, stage 2: 2218.75 printed 2218; 7.5B at N_d = 4, stage 2: 41.25 as 41.3).
      const QString printed(c.gb);
      const int decimals = printed.contains('.') ? printed.size() - printed.indexOf('.') - 1 : 0;
      const double unit = std::pow(10.0, -decimals);
      QVERIFY2(std::abs(gb - printed.toDouble()) <= unit * (1 + 1e-9),
               qPrintable(QString("%1 parameters, N_d %2, stage %3: %4 GB, published %5")
                              .arg(c.psi)
                              .arg(c.nd)
                              .arg(c.stage)
                              .arg(gb)
                              .arg(c.gb)));
    }
  }

  // Megatron-LM's distributed-optimizer document (docs/source/distrib_optimizer.md): with bf16
  // parameters and fp32 gradients, 18 bytes per parameter without it and 6 + 12/d with it.
  void megatronDistributedOptimizer() {
    const int64_t psi = 1'000'000'000, d = 8;
    const StateWidths bf16_fp32{2, 4, 12};
    QCOMPARE(zero_model_states(0, psi, psi, bf16_fp32).total(), 18 * psi);
    QCOMPARE(zero_model_states(1, psi, psi / d, bf16_fp32).total(), 6 * psi + 12 * psi / d);
  }

  void activationsTable2() {
    const GptShape g = gpt3();
    const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
    const double sbh = s * b * h;
    struct Row {
      int t;
      bool sp;
      Recompute r;
      double expected;
      const char* name;
    };
    const Row rows[] = {
        {1, false, Recompute::none, sbh * (34 + 5 * a * s / h), "no parallelism"},
        {8, false, Recompute::none, sbh * (10 + 24 / t + 5 * a * s / (h * t)), "tensor parallel"},
        {8, true, Recompute::none, sbh / t * (34 + 5 * a * s / h), "tensor + sequence parallel"},
        {8, false, Recompute::selective, sbh * (10 + 24 / t), "tensor parallel + selective"},
        {8, true, Recompute::selective, 34 * sbh / t, "tensor + sequence + selective"},
        {1, false, Recompute::full, 2 * sbh, "full recompute"},
    };
    for (const Row& row : rows) {
      const double got = layer_activation_bytes(g, b, row.t, row.sp, row.r);
      QVERIFY2(near(got, row.expected, 1e-12),
               qPrintable(QString("%1: %2 against %3").arg(row.name).arg(got).arg(row.expected)));
    }
    // Korthikanti section 5's headline for GPT-3 at t = 8: sequence parallelism with selective
    // recomputation keeps 34/(10 + 24/8 + 5as/ht) of what tensor parallelism alone keeps.
    const double tp_only = layer_activation_bytes(g, b, 8, false, Recompute::none);
    const double sp_sel = layer_activation_bytes(g, b, 8, true, Recompute::selective);
    QVERIFY(sp_sel < 0.2 * tp_only);
  }

  void parametersTable1() {
    struct Row {
      double billions;  // published
      int64_t heads, hidden, layers;
    };
    const Row rows[] = {{1.7, 24, 2304, 24},    {3.6, 32, 3072, 30},     {7.5, 32, 4096, 36},
                        {18.4, 48, 6144, 40},   {39.1, 64, 8192, 48},    {76.1, 80, 10240, 60},
                        {145.6, 96, 12288, 80}, {310.1, 128, 16384, 96}, {529.6, 128, 20480, 105},
                        {1008, 160, 25600, 128}};
    for (const Row& r : rows) {
      const double got = static_cast<double>(gpt_parameters(
                             GptShape{r.layers, r.hidden, r.heads, 0, 2048, 51200})) /
                         1e9;
      // Published rounded to 0.1B (1008B to 1B).
      const double half_unit = r.billions >= 1000 ? 0.5 : 0.05;
      QVERIFY2(std::abs(got - r.billions) <= half_unit,
               qPrintable(QString("%1B published, eq. 2 gives %2B").arg(r.billions).arg(got)));
    }
  }

  void flopsExpressions() {
    const GptShape g = gpt3();
    const double B = 1536, L = 96, s = 2048, h = 12288, V = 51200;
    const double model = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));
    const double full = 96 * B * L * s * h * h * (1 + s / (6 * h) + V / (16 * h * L));
    const double selective = 72 * B * L * s * h * h * (1 + s / (3 * h) + V / (12 * h * L));
    QVERIFY(near(model_flops(g, B), model, 1e-12));
    QVERIFY(near(hardware_flops(g, B, Recompute::none), model, 1e-12));
    QVERIFY(near(hardware_flops(g, B, Recompute::full), full, 1e-12));
    QVERIFY(near(hardware_flops(g, B, Recompute::selective), selective, 1e-12));
  }

  void badShapes() {
    GptShape g = gpt3();
    g.hidden = 12289;
    try {
      check_shape(g);
      QFAIL("no error");
    } catch (const shardlab::InvalidArgument& e) {
      QVERIFY2(QString(e.what()).contains("hidden 12289 is not a multiple of heads 96"), e.what());
    }
    g = gpt3();
    g.layers = 0;
    try {
      check_shape(g);
      QFAIL("no error");
    } catch (const shardlab::InvalidArgument& e) {
      QVERIFY2(QString(e.what()).contains("layers, hidden, heads, seq and vocab must be positive"),
               e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestPlanFormulas)
#include "tst_plan_formulas.moc"
