// PlanView: the form, the planner's answer in the table and the texts (the charts:
// plan_charts.cpp).
#include "gui/plan_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <limits>
#include <utility>

namespace shardlab::gui {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// The model's sizes, in the form's order, with the GptShape field each one fills.
constexpr std::pair<const char*, int64_t plan::GptShape::*> kModelFields[] = {
    {"layers", &plan::GptShape::layers}, {"hidden", &plan::GptShape::hidden},
    {"heads", &plan::GptShape::heads},   {"ffn", &plan::GptShape::ffn},
    {"seq", &plan::GptShape::seq},       {"vocab", &plan::GptShape::vocab}};

// A number field. `absent`: the text shown at the minimum, which then means "left out"; without
// it every value goes to the planner, which says what is out of range.
QSpinBox* number(int value, int minimum, const QString& absent = {}) {
  auto* s = new QSpinBox;
  s->setRange(minimum, std::numeric_limits<int>::max());
  s->setSpecialValueText(absent);
  s->setValue(value);
  s->setMinimumWidth(70);  // not the width of INT_MAX
  s->setMaximumWidth(96);
  return s;
}

QTableWidgetItem* cell(const QString& text) {
  auto* item = new QTableWidgetItem(text);
  item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

}  // namespace

PlanView::PlanView(QWidget* parent) : QWidget(parent) {
  message_ = new QLabel;
  message_->setObjectName(QStringLiteral("planMessage"));
  message_->setTextFormat(Qt::PlainText);
  message_->setWordWrap(true);
  message_->setStyleSheet(QStringLiteral("color: #b71c1c;"));
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->hide();
  summary_ =
      new QLabel(tr("Choose a model, the GPUs and the batch, then Plan: every layout the "
                    "choices left at \"search\" allow is estimated and ranked."));
  summary_->setObjectName(QStringLiteral("planSummary"));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  table_ = new QTableWidget(0, kColumns);
  table_->setObjectName(QStringLiteral("planTable"));
  table_->setHorizontalHeaderLabels(
      {tr("#"), tr("pp"), tr("tp"), tr("dp"), tr("micro-batch"), tr("interleave"), tr("zero"),
       tr("recompute"), tr("sp"), tr("GiB"), tr("step s"), tr("TFLOP/s"), tr("MFU"), tr("fits")});
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  for (int col : {kMicroBatch, kInterleave, kRecompute})  // never narrower than their heading
    table_->horizontalHeader()->setSectionResizeMode(col, QHeaderView::ResizeToContents);
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setAlternatingRowColors(true);
  connect(table_, &QTableWidget::currentCellChanged, this, [this](int row) {
    if (row >= 0 && row != shown_) showPlan(row);
  });

  auto* answer = new QSplitter(Qt::Vertical);
  answer->addWidget(table_);
  answer->addWidget(buildCharts());
  answer->setStretchFactor(0, 0);
  answer->setStretchFactor(1, 1);
  answer->setSizes({200, 560});

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(buildForm());
  layout->addWidget(message_);
  layout->addWidget(summary_);
  layout->addWidget(answer, 1);
}

QWidget* PlanView::buildForm() {
  auto* form = new QWidget;
  auto* rows = new QVBoxLayout(form);
  rows->setContentsMargins(0, 0, 0, 0);
  rows->setSpacing(4);
  QHBoxLayout* row = nullptr;
  const auto start_row = [&](const QString& title) {
    row = new QHBoxLayout;
    row->setSpacing(4);
    auto* head = new QLabel(QStringLiteral("<b>%1</b>").arg(title));
    head->setMinimumWidth(56);
    row->addWidget(head);
    rows->addLayout(row);
  };
  const auto add = [&](const char* name, const QString& label, QWidget* w, const QString& tip) {
    fields_.emplace(name, w);
    w->setObjectName(QString::fromLatin1(name));
    w->setToolTip(tip);
    if (!label.isEmpty()) {
      auto* l = new QLabel(label);
      l->setBuddy(w);
      row->addSpacing(4);
      row->addWidget(l);
    }
    row->addWidget(w);
  };

  start_row(tr("Model"));
  model_ = new QComboBox;
  for (const plan::ModelPreset& p : plan::model_presets()) {
    model_->addItem(QString::fromStdString(p.name), QString::fromStdString(p.name));
    model_->setItemData(model_->count() - 1, QString::fromStdString(p.source), Qt::ToolTipRole);
  }
  model_->addItem(tr("custom"), QString());
  add("model", {}, model_, tr("A published model's sizes, or custom ones"));
  setFocusProxy(model_);
  const QString model_tips[] = {tr("transformer layers"), tr("hidden size"),
                                tr("attention heads"),    tr("MLP width (4 × hidden unless given)"),
                                tr("sequence length"),    tr("vocabulary")};
  int i = 0;
  for (const auto& [name, member] : kModelFields) {
    QSpinBox* s = std::string_view(name) == "ffn" ? number(0, 0, tr("4 × hidden")) : number(0, 0);
    add(name, QString::fromLatin1(name), s, model_tips[i++]);
    connect(s, &QSpinBox::valueChanged, this, [this] { modelEdited(); });
  }
  row->addStretch();
  connect(model_, &QComboBox::currentIndexChanged, this, [this](int index) { fillPreset(index); });

  start_row(tr("Job"));
  auto* gpu = new QComboBox;
  for (const std::string& g : plan::gpu_names())
    gpu->addItem(QString::fromStdString(g), QString::fromStdString(g));
  add("gpu", tr("GPU"), gpu, tr("The GPU, in a DGX-style cluster of 8 per node"));
  add("gpus", tr("GPUs"), number(1024, 0), tr("GPUs in the job: pp × tp × dp"));
  add("gpus-per-node", tr("per node"), number(0, 0, tr("preset")),
      tr("GPUs per node (tensor parallelism stays inside a node); preset: the cluster's"));
  add("global-batch", tr("global batch"), number(1536, 0), tr("Sequences per step"));
  add("top", tr("plans"), number(10, 0), tr("Plans shown, best first"));
  row->addStretch();

  start_row(tr("Layout"));
  const QString fixed = tr("Fixed, or left to the search");
  add("tp", tr("tp"), number(0, 0, tr("search")), fixed);
  add("pp", tr("pp"), number(0, 0, tr("search")), fixed);
  add("dp", tr("dp"), number(0, 0, tr("search")), fixed);
  auto* zero = new QComboBox;
  zero->addItem(tr("search"), QString());
  for (int z = 0; z <= 3; ++z) zero->addItem(QString::number(z), QString::number(z));
  add("zero", tr("zero"), zero, tr("ZeRO stage (0: plain data parallelism); fixed or searched"));
  auto* recompute = new QComboBox;
  recompute->addItem(tr("search"), QString());
  for (plan::Recompute r :
       {plan::Recompute::none, plan::Recompute::selective, plan::Recompute::full}) {
    const QString name = QString::fromStdString(plan::recompute_name(r));
    recompute->addItem(name, name);
  }
  add("recompute", tr("recompute"), recompute, tr("Activation recomputation; fixed or searched"));
  add("micro-batch", tr("micro-batch"), number(0, 0, tr("search")), fixed);
  add("interleave", tr("interleave"), number(0, 0, tr("search")),
      tr("Model chunks per pipeline stage; fixed or searched"));
  row->addStretch();

  start_row(tr("Options"));
  add("sequence-parallel", {}, new QCheckBox(tr("sequence parallelism on")),
      tr("Ticked: every layout uses sequence parallelism; unticked: searched"));
  add("fp32-grads", {}, new QCheckBox(tr("fp32 gradients")),
      tr("Accumulate gradients in fp32, as Megatron does"));
  add("no-dp-overlap", {}, new QCheckBox(tr("no dp overlap")),
      tr("Reduce gradients after the backward instead of during the last micro-batch's"));
  row->addStretch();
  plan_button_ = new QPushButton(tr("Plan"));
  plan_button_->setObjectName(QStringLiteral("planButton"));
  plan_button_->setDefault(true);
  connect(plan_button_, &QPushButton::clicked, this, [this] { plan(); });
  row->addWidget(plan_button_);
  open_job_button_ = new QPushButton(tr("Open as job"));
  open_job_button_->setObjectName(QStringLiteral("openJobButton"));
  open_job_button_->setToolTip(
      tr("Open the selected layout as a ShardLab job this machine runs: the same kind of layout "
         "on at most 2 ranks per dimension, training the character GPT"));
  open_job_button_->setEnabled(false);
  connect(open_job_button_, &QPushButton::clicked, this, [this] {
    const std::optional<plan::LayoutAsJob> j = shownAsJob();
    if (!j) return;
    QStringList changes;
    for (const std::string& c : j->changes) changes << QString::fromStdString(c);
    emit openJob(QString::fromStdString(j->job.dump(2)), changes.join(QStringLiteral("; ")));
  });
  row->addWidget(open_job_button_);

  fillPreset(model_->currentIndex());
  return form;
}

void PlanView::fillPreset(int index) {
  const auto& presets = plan::model_presets();
  if (index < 0 || index >= static_cast<int>(presets.size())) return;  // "custom": keep them
  const plan::GptShape& shape = presets[static_cast<size_t>(index)].shape;
  for (const auto& [name, member] : kModelFields) {
    auto* s = static_cast<QSpinBox*>(fields_.find(std::string_view(name))->second);
    const QSignalBlocker quiet(s);
    s->setValue(static_cast<int>(shape.*member));
  }
}

void PlanView::modelEdited() {
  const auto& presets = plan::model_presets();
  const int index = model_->currentIndex();
  if (index < 0 || index >= static_cast<int>(presets.size())) return;
  const plan::GptShape& shape = presets[static_cast<size_t>(index)].shape;
  for (const auto& [name, member] : kModelFields) {
    const auto* s = static_cast<const QSpinBox*>(fields_.find(std::string_view(name))->second);
    if (s->value() != shape.*member) {
      const QSignalBlocker quiet(model_);  // the sizes stay as edited
      model_->setCurrentIndex(model_->count() - 1);
      return;
    }
  }
}

std::optional<std::string> PlanView::field(std::string_view name) const {
  const auto it = fields_.find(name);
  if (it == fields_.end()) return std::nullopt;
  if (const auto* c = qobject_cast<const QComboBox*>(it->second)) {
    const QString v = c->currentData().toString();
    return v.isEmpty() ? std::nullopt : std::optional<std::string>(v.toStdString());
  }
  if (const auto* s = qobject_cast<const QSpinBox*>(it->second)) {
    if (!s->specialValueText().isEmpty() && s->value() == s->minimum()) return std::nullopt;
    return std::to_string(s->value());
  }
  if (const auto* b = qobject_cast<const QCheckBox*>(it->second))
    return b->isChecked() ? std::optional<std::string>("1") : std::nullopt;
  return std::nullopt;
}

bool PlanView::setField(const QString& name, const QString& value) {
  const auto it = fields_.find(name.toStdString());
  if (it == fields_.end()) return false;
  if (auto* c = qobject_cast<QComboBox*>(it->second)) {
    int i = c->findData(value);
    if (i < 0) i = c->findText(value);
    if (i < 0) return false;
    c->setCurrentIndex(i);
    return true;
  }
  if (auto* s = qobject_cast<QSpinBox*>(it->second)) {
    if (value == s->specialValueText() && !value.isEmpty()) {
      s->setValue(s->minimum());
      return true;
    }
    bool ok = false;
    const int v = value.toInt(&ok);
    if (!ok || v < s->minimum() || v > s->maximum()) return false;
    s->setValue(v);
    return true;
  }
  if (auto* b = qobject_cast<QCheckBox*>(it->second)) {
    b->setChecked(!value.isEmpty() && value != QLatin1String("0") &&
                  value != QLatin1String("false"));
    return true;
  }
  return false;
}

bool PlanView::plan() {
  clearAnswer();
  QGuiApplication::setOverrideCursor(Qt::WaitCursor);
  try {
    const plan::FieldGetter get = [this](std::string_view name) { return field(name); };
    plan::PlanInputs in = plan::read_plan_inputs(get, "");
    result_ = plan::search_plans(in.job, in.cluster, in.options);
    inputs_ = std::move(in);
  } catch (const std::exception& e) {
    QGuiApplication::restoreOverrideCursor();
    result_ = {};
    message_->setText(QString::fromUtf8(e.what()).simplified());
    message_->show();
    summary_->clear();
    emit planned(false);
    return false;
  }
  QGuiApplication::restoreOverrideCursor();

  const plan::GptShape& g = inputs_->job.model;
  const plan::ClusterSpec& c = inputs_->cluster;
  QString text =
      tr("GPT, %1 layers, hidden %2, %3 heads, MLP %4, sequence %5, vocabulary %6: %7B "
         "parameters · %8 × %9 (%10, %11 per node) · global batch %12 · %13 layouts searched")
          .arg(g.layers)
          .arg(g.hidden)
          .arg(g.heads)
          .arg(g.ffn_width())
          .arg(g.seq)
          .arg(g.vocab)
          .arg(static_cast<double>(plan::gpt_parameters(g)) / 1e9, 0, 'f', 1)
          .arg(inputs_->job.gpus)
          .arg(QString::fromStdString(c.gpu.name), QString::fromStdString(c.name))
          .arg(c.gpus_per_node)
          .arg(inputs_->job.global_batch)
          .arg(result_.searched);
  if (!result_.any_fits) text += tr(" · nothing fits: the least memory first");
  summary_->setText(text);
  summary_->setStyleSheet(result_.any_fits ? QString() : QStringLiteral("color: #b35900;"));
  fillTable();
  if (!result_.plans.empty()) showPlan(0);
  emit planned(true);
  return true;
}

void PlanView::fillTable() {
  const QSignalBlocker quiet(table_);
  table_->setRowCount(static_cast<int>(result_.plans.size()));
  for (int r = 0; r < table_->rowCount(); ++r) {
    const plan::Estimate& e = result_.plans[static_cast<size_t>(r)];
    const plan::Layout& l = e.layout;
    const QString cells[kColumns] = {QString::number(r + 1),
                                     QString::number(l.pp),
                                     QString::number(l.tp),
                                     QString::number(l.dp),
                                     QString::number(l.micro_batch),
                                     QString::number(l.interleave),
                                     QString::number(l.zero),
                                     QString::fromStdString(plan::recompute_name(l.recompute)),
                                     l.sequence_parallel ? tr("y") : tr("n"),
                                     QString::number(e.memory.total() / kGiB, 'f', 1),
                                     QString::number(e.step_seconds, 'f', 2),
                                     QString::number(e.tflops_per_gpu, 'f', 1),
                                     QStringLiteral("%1%").arg(e.mfu * 100, 0, 'f', 0),
                                     e.fits ? tr("yes") : tr("no")};
    const QString tip = QString::fromStdString(result_.why[static_cast<size_t>(r)]);
    for (int col = 0; col < kColumns; ++col) {
      QTableWidgetItem* item = cell(cells[col]);
      item->setToolTip(tip);
      if (col == kFits && !e.fits) item->setForeground(QColor(0xb7, 0x1c, 0x1c));
      table_->setItem(r, col, item);
    }
  }
}

void PlanView::showPlan(int row) {
  if (row < 0 || row >= static_cast<int>(result_.plans.size())) return;
  shown_ = row;
  if (table_->currentRow() != row) {
    const QSignalBlocker quiet(table_);
    table_->selectRow(row);
  }
  const plan::Estimate& e = result_.plans[static_cast<size_t>(row)];
  open_job_button_->setEnabled(true);
  drawMemory(e);
  drawTime(e);
  const QString executed =
      e.layout.recompute == plan::Recompute::none
          ? QString()
          : tr(" (%1 executed, recomputation included)").arg(e.hw_tflops_per_gpu, 0, 'f', 1);
  mfu_->setText(tr("Plan #%1: %2 s a step; %3 TFLOP/s per GPU of model FLOPs%4; MFU %5%; %6 "
                   "micro-batches per replica; fullest stage %7: %8 of %9 GiB usable")
                    .arg(row + 1)
                    .arg(e.step_seconds, 0, 'f', 2)
                    .arg(e.tflops_per_gpu, 0, 'f', 1)
                    .arg(executed)
                    .arg(e.mfu * 100, 0, 'f', 0)
                    .arg(e.micro_batches)
                    .arg(e.fullest_stage)
                    .arg(e.memory.total() / kGiB, 0, 'f', 1)
                    .arg(e.usable_bytes / kGiB, 0, 'f', 1));
  const QString why = QString::fromStdString(result_.why[static_cast<size_t>(row)]);
  why_->setText(row == 0 ? tr("Best: %1").arg(why) : tr("#%1: %2").arg(row + 1).arg(why));
  left_out_->setText(QString::fromLatin1(plan::left_out_text()));
}

std::optional<plan::LayoutAsJob> PlanView::shownAsJob() const {
  if (shown_ < 0 || shown_ >= static_cast<int>(result_.plans.size())) return std::nullopt;
  const plan::Estimate& e = result_.plans[static_cast<size_t>(shown_)];
  return plan::layout_as_job(e.layout, e.micro_batches);
}

void PlanView::clearAnswer() {
  inputs_.reset();
  result_ = {};
  shown_ = -1;
  open_job_button_->setEnabled(false);
  {
    const QSignalBlocker quiet(table_);
    table_->setRowCount(0);
  }
  message_->clear();
  message_->hide();
  mfu_->clear();
  why_->clear();
  left_out_->clear();
  drawMemory({});
  drawTime({});
}

QString PlanView::message() const {
  return message_->text();
}
QString PlanView::summaryText() const {
  return summary_->text();
}
QString PlanView::mfuText() const {
  return mfu_->text();
}
QString PlanView::whyText() const {
  return why_->text();
}
QString PlanView::leftOutText() const {
  return left_out_->text();
}

}  // namespace shardlab::gui
