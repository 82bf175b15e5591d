// JobForm's construction: which widget edits which job key, grouped in sections, and how the
// sections are arranged (one or two columns). Editing, the document and validation are in
// job_form.cpp.
#include "gui/job_form.h"

#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <set>

#include "engine/job/job_spec.h"

namespace shardlab::gui {

using nlohmann::ordered_json;

namespace {

const char* const kErrorStyle = "color: #b71c1c;";

QLabel* makeErrorLabel(const QString& path, QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setObjectName("error:" + path);
  label->setStyleSheet(kErrorStyle);
  label->setWordWrap(true);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  label->hide();
  return label;
}

}  // namespace

JobForm::JobForm(QWidget* parent) : QWidget(parent) {
  defaults_ = job_to_json(JobSpec{});
  fields_.reserve(80);

  general_ = makeErrorLabel("", this);
  auto* top = makeGrid();
  addRow(top, tr("Name"), {{"name", Kind::text}});

  auto section = [this](const QString& title, const QString& path) {
    auto* group = new QGroupBox(title, this);
    groups_.push_back(group);
    auto* v = new QVBoxLayout(group);
    v->setContentsMargins(8, 4, 8, 6);
    v->setSpacing(2);
    if (!path.isEmpty()) {  // errors of the section's fields that have no field shown
      Field f;
      f.path = path;
      f.kind = Kind::section;
      f.editor = f.box = f.row = group;
      f.error = makeErrorLabel(path, group);
      v->addWidget(f.error);
      fields_.push_back(f);
    }
    auto* form = makeGrid();
    v->addLayout(form);
    return std::pair{group, form};
  };
  auto is = [this](const QString& path, std::set<std::string> values) {
    return [this, path, values] { return values.count(str(path)) > 0; };
  };

  // --- Model
  auto [model_box, model] = section(tr("Model"), "model");
  const auto mlp = is("model.kind", {"mlp"});
  const auto gpt = is("model.kind", {"gpt"});
  addRow(
      model, tr("Kind"),
      {{"model.kind", Kind::choice, {}, {"mlp", "gpt"}}, {"model.seed", Kind::seed, tr("seed")}});
  addRow(model, tr("Hidden sizes"), {{"model.mlp.hidden", Kind::int_list, {}, {}, mlp}});
  addRow(model, tr("Activation"),
         {{"model.mlp.activation", Kind::choice, {}, {"relu", "gelu"}, mlp}});
  addRow(model, tr("Context"),
         {{"model.gpt.context", Kind::integer, {}, {}, gpt},
          {"model.gpt.width", Kind::integer, tr("width"), {}, gpt}});
  addRow(model, tr("Layers"),
         {{"model.gpt.layers", Kind::integer, {}, {}, gpt},
          {"model.gpt.heads", Kind::integer, tr("heads"), {}, gpt}});
  addRow(model, tr("MLP ratio"), {{"model.gpt.mlp_ratio", Kind::integer, {}, {}, gpt}});

  // --- Data
  auto [data_box, data] = section(tr("Data"), "data");
  const auto fashion = is("data.dataset", {"fashion-mnist"});
  const auto chars = is("data.dataset", {"chars"});
  addRow(data, tr("Dataset"), {{"data.dataset", Kind::choice, {}, {"fashion-mnist", "chars"}}});
  addRow(data, tr("Directory"), {{"data.path", Kind::text, {}, {}, fashion}});
  addRow(data, tr("Corpus files"), {{"data.corpus", Kind::text_list, {}, {}, chars}});
  addRow(data, tr("Eval fraction"), {{"data.eval_fraction", Kind::number, {}, {}, chars}});
  addRow(data, tr("Limit train"),
         {{"data.train_limit", Kind::integer}, {"data.eval_limit", Kind::integer, tr("eval")}});

  // --- Optimizer (each hyper-parameter shown for the optimizers that read it)
  auto [optim_box, optim] = section(tr("Optimizer"), "optimizer");
  addRow(optim, tr("Name"),
         {{"optimizer.name", Kind::choice, {}, {"sgd", "adam", "adamw", "rmsprop", "adagrad"}}});
  addRow(optim, tr("Learning rate"),
         {{"optimizer.lr", Kind::number},
          {"optimizer.weight_decay", Kind::number, tr("weight decay")}});
  addRow(optim, tr("Momentum"),
         {{"optimizer.momentum", Kind::number, {}, {}, is("optimizer.name", {"sgd", "rmsprop"})},
          {"optimizer.nesterov", Kind::check, tr("Nesterov"), {}, is("optimizer.name", {"sgd"})}});
  const auto adam = is("optimizer.name", {"adam", "adamw"});
  addRow(optim, tr("Betas"),
         {{"optimizer.beta1", Kind::number, {}, {}, adam},
          {"optimizer.beta2", Kind::number, {}, {}, adam}});
  addRow(optim, tr("Eps"),
         {{"optimizer.eps",
           Kind::number,
           {},
           {},
           is("optimizer.name", {"adam", "adamw", "rmsprop", "adagrad"})},
          {"optimizer.alpha", Kind::number, tr("alpha"), {}, is("optimizer.name", {"rmsprop"})},
          {"optimizer.initial_accumulator",
           Kind::number,
           tr("initial acc."),
           {},
           is("optimizer.name", {"adagrad"})}});

  // --- Training
  auto [train_box, train] = section(tr("Training"), "train");
  addRow(train, tr("Steps"),
         {{"train.steps", Kind::integer}, {"train.epochs", Kind::integer, tr("epochs")}});
  addRow(train, tr("Batch size"),
         {{"train.batch_size", Kind::integer},
          {"train.accumulation_steps", Kind::integer, tr("accum.")}});
  addRow(train, tr("Log every"),
         {{"train.log_every", Kind::integer}, {"train.seed", Kind::seed, tr("seed")}});
  addRow(
      train, tr("Eval every"),
      {{"train.eval_every", Kind::integer}, {"train.eval_batches", Kind::integer, tr("batches")}});
  addRow(train, tr("Grad clip"), {{"train.clip_grad_norm", Kind::number}});
  addRow(train, tr("LR schedule"),
         {{"train.schedule.kind", Kind::choice, {}, {"constant", "warmup_cosine"}}});
  const auto cosine = is("train.schedule.kind", {"warmup_cosine"});
  addRow(train, tr("Warmup"),
         {{"train.schedule.warmup_steps", Kind::integer, {}, {}, cosine},
          {"train.schedule.min_lr_ratio", Kind::number, tr("min ratio"), {}, cosine}});
  const auto checkpoints = [this] { return str("train.checkpoint_dir") != ""; };
  addRow(train, tr("Checkpoints"),
         {{"train.checkpoint_dir", Kind::text},
          {"train.checkpoint_every", Kind::integer, tr("every"), {}, checkpoints},
          {"train.keep_checkpoints", Kind::integer, tr("keep"), {}, checkpoints}});
  addRow(train, tr("Start from"), {{"train.init_model", Kind::text}});
  addRow(train, tr("Patience"),
         {{"train.early_stopping.patience", Kind::integer},
          {"train.early_stopping.min_delta", Kind::number, tr("min delta"), {}, [this] {
             return num("train.early_stopping.patience") > 0;
           }}});

  // --- Parallelism (fields that do not apply are disabled, not hidden: the layout stays put)
  auto [par_box, par] = section(tr("Parallelism"), {});
  const auto parallel = [this] { return str("parallel.strategy") != "none"; };
  const auto pipeline = [this] { return num("parallel.pp") > 1; };
  addRow(par, tr("Layout"),
         {{"parallel",
           Kind::layout,
           {},
           {tr("Single process"), tr("DDP"), tr("ZeRO-1"), tr("ZeRO-2"), tr("FSDP (ZeRO-3)"),
            tr("Tensor parallel"), tr("Pipeline parallel"), tr("Hybrid 3D")}}},
         false);
  addRow(par, tr("World size"), {{"parallel.world_size", Kind::integer}}, false);
  addRow(par, tr("pp × tp × dp"),
         {{"parallel.pp", Kind::integer},
          {"parallel.tp", Kind::integer, "×"},
          {"parallel.dp", Kind::integer, "×"}},
         false);
  addRow(par, tr("DP strategy"),
         {{"parallel.strategy", Kind::choice, {}, {"ddp", "zero1", "zero2"}}}, false);
  addRow(par, tr("Micro-batches"),
         {{"parallel.micro_batches",
           Kind::integer,
           {},
           {},
           [this] { return num("parallel.pp") > 1 || num("parallel.tp") > 1; }}},
         false);
  addRow(par, tr("Pipeline"),
         {{"parallel.schedule", Kind::choice, {}, {"1f1b", "gpipe"}, pipeline},
          {"parallel.pp_partition", Kind::choice, {}, {"uniform", "balanced"}, pipeline}},
         false);
  addRow(par, tr("Bucket MiB"),
         {{"parallel.bucket_mb",
           Kind::number,
           {},
           {},
           [this] {
             return str("parallel.strategy") != "none" && str("parallel.strategy") != "fsdp";
           }},
          {"parallel.timeout_s", Kind::number, tr("timeout s"), {}, parallel}},
         false);
  addRow(par, tr("Overlap"),
         {{"parallel.overlap", Kind::check, {}, {}, parallel},
          {"parallel.fsdp_keep_params",
           Kind::check,
           tr("FSDP keep params"),
           {},
           is("parallel.strategy", {"fsdp"})}},
         false);

  // --- Launch
  auto [launch_box, launch] = section(tr("Launch"), {});
  addRow(launch, tr("Backend"),
         {{"parallel.backend",
           Kind::launch,
           {},
           {tr("In-process threads"), tr("Local processes (mpirun)"), tr("Remote workers")},
           parallel}},
         false);
  listen_ = new QLineEdit("0.0.0.0:0", this);
  listen_->setObjectName("listenAddress");
  listen_->setToolTip(tr("HOST:PORT the app listens on for remote workers (port 0: any free)"));
  const int listen_row = launch->property("rows").toInt();
  launch->addWidget(new QLabel(tr("Listen on"), this), listen_row, 0,
                    Qt::AlignRight | Qt::AlignVCenter);
  launch->addWidget(listen_, listen_row, 1);

  left_ = new QVBoxLayout;
  right_ = new QVBoxLayout;
  columns_layout_ = new QHBoxLayout;
  columns_layout_->addLayout(left_, 1);
  columns_layout_->addLayout(right_, 1);
  auto* outer = new QVBoxLayout(this);
  outer->addWidget(general_);
  outer->addLayout(top);
  outer->addLayout(columns_layout_, 1);
  arrange(2);

  // One label width for every section, so the fields line up from one box to the next.
  int label_width = 0;
  for (const Field& f : fields_)
    if (f.row_label) label_width = std::max(label_width, f.row_label->sizeHint().width());
  for (QGridLayout* grid : grids_) grid->setColumnMinimumWidth(0, label_width);

  setDocument(nlohmann::json::object());
}

// Two columns (model, data, optimizer | training, parallelism, launch) or, in a narrow pane, one.
void JobForm::arrange(int columns) {
  columns_ = columns;
  for (QVBoxLayout* column : {left_, right_})
    while (QLayoutItem* item = column->takeAt(0)) delete item;  // the widgets stay
  for (size_t i = 0; i < groups_.size(); ++i)
    (columns == 2 && i >= 3 ? right_ : left_)->addWidget(groups_[i]);
  left_->addStretch(1);
  if (columns == 2) right_->addStretch(1);
  columns_layout_->setStretchFactor(right_, columns == 2 ? 1 : 0);  // else it halves the width
}

void JobForm::fitWidth(int width) {
  // The two-column minimum, measured from the sections whichever way they are arranged now.
  int left = 0, right = 0;
  for (size_t i = 0; i < groups_.size(); ++i)
    (i < 3 ? left : right) = std::max(i < 3 ? left : right, groups_[i]->minimumSizeHint().width());
  const QMargins m = layout()->contentsMargins();
  const int two = left + right + layout()->spacing() + m.left() + m.right();
  // A margin against flipping back and forth as a vertical scroll bar comes and goes.
  if (columns_ == 2 && width < two)
    arrange(1);
  else if (columns_ == 1 && width >= two + 24)
    arrange(2);
}

// Label | field grids (a QFormLayout's height-for-width goes wrong in Qt 6.4 when rows are hidden
// and shown again while a word-wrapped label sits in the form: shown rows got no height).
QGridLayout* JobForm::makeGrid() {
  auto* grid = new QGridLayout;
  grid->setHorizontalSpacing(6);
  grid->setVerticalSpacing(4);
  grid->setColumnStretch(1, 1);
  grids_.push_back(grid);
  return grid;
}

// A form row: one field, or several side by side. Each field has its own error label; they sit
// below the row, full width, those of a second or third field prefixed with its key.
void JobForm::addRow(QGridLayout* grid, const QString& label, std::vector<Spec> specs,
                     bool hide_unused) {
  const bool single = specs.size() == 1;
  QWidget* row = new QWidget(this);
  auto* h = new QHBoxLayout(row);
  h->setContentsMargins(0, 0, 0, 0);
  h->setSpacing(6);
  std::vector<QLabel*> errors;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    Field f;
    f.path = s.path;
    f.kind = s.kind;
    f.used = s.used;
    f.hide_unused = hide_unused;
    f.row = row;
    f.box = single ? row : new QWidget(row);
    if (i > 0) f.error_prefix = s.path.mid(s.path.lastIndexOf('.') + 1) + ": ";
    auto* inner = single ? h : new QHBoxLayout(f.box);
    if (!single) {
      inner->setContentsMargins(0, 0, 0, 0);
      inner->setSpacing(4);
      h->addWidget(f.box, 1);
    }
    if (!s.inline_label.isEmpty() && s.kind != Kind::check)
      inner->addWidget(new QLabel(s.inline_label, f.box));
    inner->addWidget(makeEditor(f, s), 1);
    f.error = makeErrorLabel(s.path, this);
    errors.push_back(f.error);
    const size_t index = fields_.size();
    fields_.push_back(f);
    QWidget* e = fields_.back().editor;
    if (auto* le = qobject_cast<QLineEdit*>(e))
      connect(le, &QLineEdit::textChanged, this, [this, index] { onEdited(index); });
    else if (auto* sb = qobject_cast<QSpinBox*>(e))
      connect(sb, &QSpinBox::valueChanged, this, [this, index] { onEdited(index); });
    else if (auto* cb = qobject_cast<QComboBox*>(e))
      connect(cb, &QComboBox::currentIndexChanged, this, [this, index] { onEdited(index); });
    else if (auto* ch = qobject_cast<QCheckBox*>(e))
      connect(ch, &QCheckBox::toggled, this, [this, index] { onEdited(index); });
  }
  int r = grid->property("rows").toInt();
  auto* row_label = new QLabel(label, this);
  grid->addWidget(row_label, r, 0, Qt::AlignRight | Qt::AlignVCenter);
  grid->addWidget(row, r++, 1);
  for (QLabel* error : errors) grid->addWidget(error, r++, 1);  // under the row, full width
  grid->setProperty("rows", r);
  for (size_t i = fields_.size() - specs.size(); i < fields_.size(); ++i)
    fields_[i].row_label = row_label;
}

QWidget* JobForm::makeEditor(Field& f, const Spec& s) {
  QWidget* e = nullptr;
  switch (s.kind) {
    case Kind::integer: {
      auto* sb = new QSpinBox(f.box);
      // Wide, so the form shows what the document says; the engine says what is out of range.
      sb->setRange(-999999999, 999999999);
      if (s.path == "parallel.dp") {
        sb->setRange(-1, 1024);
        sb->setSpecialValueText(tr("auto"));
      }
      e = sb;
      break;
    }
    case Kind::choice:
    case Kind::layout:
    case Kind::launch: {
      auto* cb = new QComboBox(f.box);
      cb->addItems(s.choices);
      f.base_items = cb->count();
      e = cb;
      break;
    }
    case Kind::check:
      e = new QCheckBox(s.inline_label, f.box);
      break;
    default: {
      auto* le = new QLineEdit(f.box);
      if (s.kind == Kind::int_list) le->setPlaceholderText("256, 128");
      if (s.kind == Kind::text_list)
        le->setPlaceholderText(tr("file or directory, …  (empty: built-in corpus)"));
      e = le;
    }
  }
  // Narrow minimums: the form shares the window with the views and the fields grow into the room.
  if (auto* cb = qobject_cast<QComboBox*>(e)) {
    cb->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    cb->setMinimumContentsLength(5);
  } else if (s.kind != Kind::check) {
    e->setMinimumWidth(44);
  }
  e->setObjectName("field:" + s.path);
  e->setToolTip(s.path);  // the key in the JSON tab
  f.editor = e;
  return e;
}

}  // namespace shardlab::gui
