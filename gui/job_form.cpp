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

// "model.mlp.hidden[1]" -> "model.mlp.hidden" -> "model.mlp" -> "model" -> "".
QString parentPath(const QString& path) {
  if (path.endsWith(']')) return path.left(path.lastIndexOf('['));
  const int dot = path.lastIndexOf('.');
  return dot < 0 ? QString() : path.left(dot);
}

QString dumpValue(const ordered_json& v) {
  return QString::fromStdString(v.is_string() ? v.get<std::string>() : v.dump());
}

bool isModelParallel(ParallelLayout l) {
  return l == ParallelLayout::tensor || l == ParallelLayout::pipeline ||
         l == ParallelLayout::hybrid;
}

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

// ------------------------------------------------------------------------------------------------
// Document access.

const ordered_json* JobForm::find(const QString& path) const {
  const ordered_json* j = &doc_;
  for (const QString& part : path.split('.')) {
    if (!j->is_object()) return nullptr;
    const auto it = j->find(part.toStdString());
    if (it == j->end()) return nullptr;
    j = &*it;
  }
  return j;
}

const ordered_json* JobForm::defaultAt(const QString& path) const {
  const ordered_json* d = &defaults_;
  for (const QString& part : path.split('.')) {
    if (!d->is_object()) return nullptr;
    const auto it = d->find(part.toStdString());
    if (it == d->end()) return nullptr;
    d = &*it;
  }
  return d;
}

std::string JobForm::str(const QString& path) const {
  const ordered_json* v = find(path);
  if (!v || !v->is_string()) v = defaultAt(path);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

int64_t JobForm::num(const QString& path) const {
  const ordered_json* v = find(path);
  if (!v || !v->is_number()) v = defaultAt(path);
  return v && v->is_number() ? static_cast<int64_t>(v->get<double>()) : 0;
}

void JobForm::put(const QString& path, const ordered_json& value, bool force) {
  if (const ordered_json* old = find(path)) {
    const_cast<ordered_json&>(*old) = value;
    return;
  }
  if (!force) {
    const ordered_json* d = defaultAt(path);
    if (d && *d == value) return;
  }
  ordered_json* j = &doc_;
  for (const QString& part : path.split('.')) {
    if (!j->is_object()) *j = ordered_json::object();  // the user's edit replaces a non-object
    j = &(*j)[part.toStdString()];
  }
  *j = value;
}

void JobForm::erase(const QString& path) {
  if (!find(path)) return;
  ordered_json* parent = &doc_;
  const QStringList parts = path.split('.');
  for (int i = 0; i + 1 < parts.size(); ++i) parent = &(*parent)[parts[i].toStdString()];
  parent->erase(parts.back().toStdString());
}

JobForm::Field* JobForm::field(const QString& path) {
  for (Field& f : fields_)
    if (f.path == path) return &f;
  return nullptr;
}

const JobForm::Field* JobForm::field(const QString& path) const {
  return const_cast<JobForm*>(this)->field(path);
}

// ------------------------------------------------------------------------------------------------
// Public API.

void JobForm::setDocument(const nlohmann::json& doc) {
  setOrderedDocument(ordered_json(doc));
}

void JobForm::setOrderedDocument(const ordered_json& doc) {
  doc_ = doc;
  stash_.clear();
  parse_error_.clear();
  layout_ = deriveLayout();
  fill(nullptr);
  validate();
}

nlohmann::json JobForm::document() const {
  return nlohmann::json(doc_);
}

void JobForm::setParseError(const QString& message) {
  if (message == parse_error_) return;
  parse_error_ = message;
  updateStates();
  validate();
}

QString JobForm::fieldError(const QString& path) const {
  if (path.isEmpty()) return general_->text();
  const Field* f = field(path);
  return f ? f->error->text() : QString();
}

QWidget* JobForm::fieldWidget(const QString& path) const {
  const Field* f = field(path);
  return f ? f->editor : nullptr;
}

LaunchChoice JobForm::launchChoice() const {
  if (str("parallel.backend") != "mpi") return LaunchChoice::threads;
  return remote_preferred_ ? LaunchChoice::remote : LaunchChoice::mpirun;
}

QString JobForm::listenAddress() const {
  return listen_->text().trimmed();
}

// ------------------------------------------------------------------------------------------------
// Editing.

void JobForm::onEdited(size_t index) {
  if (filling_) return;
  std::vector<bool> used_before;
  for (const Field& f : fields_) used_before.push_back(!f.used || f.used());

  Field& f = fields_[index];
  const QString& path = f.path;
  auto text = [&] { return static_cast<QLineEdit*>(f.editor)->text(); };
  switch (f.kind) {
    case Kind::section:
      break;
    case Kind::text:
      put(path, text().toStdString());
      break;
    case Kind::number: {
      // A number when it reads as one (an integer stays one: "1" is not shown back as "1.0");
      // otherwise the text itself, for the engine to refuse.
      bool ok = false;
      const QString t = text().trimmed();
      const qlonglong i = t.toLongLong(&ok);
      if (ok) {
        put(path, static_cast<int64_t>(i));
        break;
      }
      const double v = t.toDouble(&ok);
      put(path, ok && std::isfinite(v) ? ordered_json(v) : ordered_json(text().toStdString()));
      break;
    }
    case Kind::seed: {
      bool ok = false;
      const qulonglong v = text().trimmed().toULongLong(&ok);
      put(path, ok ? ordered_json(static_cast<uint64_t>(v)) : ordered_json(text().toStdString()));
      break;
    }
    case Kind::integer:
      put(path, static_cast<int64_t>(static_cast<QSpinBox*>(f.editor)->value()));
      if (path == "parallel.pp" || path == "parallel.tp" || path == "parallel.dp") followWorld();
      break;
    case Kind::int_list:
    case Kind::text_list: {
      ordered_json list = ordered_json::array();
      if (!text().trimmed().isEmpty()) {
        for (const QString& item : text().split(',')) {
          bool ok = false;
          const qlonglong v = item.trimmed().toLongLong(&ok);
          if (f.kind == Kind::int_list && ok)
            list.push_back(static_cast<int64_t>(v));
          else
            list.push_back(item.trimmed().toStdString());
        }
      }
      put(path, list);
      break;
    }
    case Kind::choice:
      put(path, static_cast<QComboBox*>(f.editor)->currentText().toStdString());
      break;
    case Kind::check:
      put(path, static_cast<QCheckBox*>(f.editor)->isChecked());
      break;
    case Kind::layout:
      applyLayout(static_cast<ParallelLayout>(static_cast<QComboBox*>(f.editor)->currentIndex()));
      break;
    case Kind::launch: {
      const auto choice =
          static_cast<LaunchChoice>(static_cast<QComboBox*>(f.editor)->currentIndex());
      remote_preferred_ = choice == LaunchChoice::remote;
      put(path, choice == LaunchChoice::threads ? "threads" : "mpi");
      break;
    }
  }

  // A field the new kinds do not use leaves the document (the engine refuses non-default unused
  // fields); it comes back if a later edit makes it used again.
  for (size_t i = 0; i < fields_.size(); ++i) {
    const Field& g = fields_[i];
    if (g.kind == Kind::section || g.kind == Kind::layout) continue;
    const bool used = !g.used || g.used();
    if (used_before[i] && !used) {
      if (const ordered_json* v = find(g.path)) {
        stash_[g.path] = *v;
        erase(g.path);
      }
    } else if (!used_before[i] && used) {
      const auto it = stash_.find(g.path);
      if (it != stash_.end()) {
        if (!find(g.path)) put(g.path, it->second, true);
        stash_.erase(it);
      }
    }
  }

  fill(&fields_[index]);
  validate();
  emit documentChanged();
}

// In the model-parallel layouts the world is pp x tp x dp.
void JobForm::followWorld() {
  if (!isModelParallel(layout_)) return;
  const int64_t dp = layout_ == ParallelLayout::hybrid ? num("parallel.dp") : 1;
  if (dp >= 1) put("parallel.world_size", num("parallel.pp") * num("parallel.tp") * dp);
}

void JobForm::applyLayout(ParallelLayout layout) {
  layout_ = layout;
  int64_t pp = std::max<int64_t>(1, num("parallel.pp"));
  int64_t tp = std::max<int64_t>(1, num("parallel.tp"));
  int64_t dp = num("parallel.dp");
  const int64_t world = std::max<int64_t>(1, num("parallel.world_size"));
  const std::string strategy = str("parallel.strategy");
  // With pp or tp > 1 the strategy names the data-parallel dimension's: keep one that can.
  const bool dp_strategy = strategy == "ddp" || strategy == "zero1" || strategy == "zero2";
  const auto model_parallel = [&](int64_t pp_, int64_t tp_, int64_t dp_) {
    put("parallel.pp", pp_);
    put("parallel.tp", tp_);
    put("parallel.dp", dp_);
    put("parallel.world_size", pp_ * tp_ * dp_);
    if (!dp_strategy) put("parallel.strategy", "ddp");
  };
  switch (layout) {
    case ParallelLayout::single:
      put("parallel.strategy", "none");
      put("parallel.world_size", 1);
      put("parallel.pp", 1);
      put("parallel.tp", 1);
      put("parallel.dp", -1);
      break;
    case ParallelLayout::ddp:
    case ParallelLayout::zero1:
    case ParallelLayout::zero2:
    case ParallelLayout::fsdp: {
      static const char* const names[] = {"", "ddp", "zero1", "zero2", "fsdp"};
      put("parallel.strategy", names[static_cast<int>(layout)]);
      put("parallel.pp", 1);
      put("parallel.tp", 1);
      put("parallel.dp", -1);
      put("parallel.world_size", std::max<int64_t>(world, 2));
      break;
    }
    case ParallelLayout::tensor:  // tp ranks (the current tp if it has one, else the world)
      model_parallel(1, tp > 1 ? tp : std::max<int64_t>(world, 2), 1);
      break;
    case ParallelLayout::pipeline:
      model_parallel(pp > 1 ? pp : std::max<int64_t>(world, 2), 1, 1);
      break;
    case ParallelLayout::hybrid:
      if (pp == 1 && tp == 1) pp = 2;
      if (dp < 1) dp = std::max<int64_t>(1, world / (pp * tp));
      model_parallel(pp, tp, dp);
      break;
  }
}

ParallelLayout JobForm::deriveLayout() const {
  const int64_t pp = num("parallel.pp"), tp = num("parallel.tp"), dp = num("parallel.dp");
  const int64_t world = num("parallel.world_size");
  const int64_t dp_eff = dp >= 1 ? dp : (pp >= 1 && tp >= 1 ? world / (pp * tp) : 1);
  if ((pp > 1 && tp > 1) || ((pp > 1 || tp > 1) && dp_eff > 1)) return ParallelLayout::hybrid;
  if (tp > 1) return ParallelLayout::tensor;
  if (pp > 1) return ParallelLayout::pipeline;
  const std::string s = str("parallel.strategy");
  if (s == "ddp") return ParallelLayout::ddp;
  if (s == "zero1") return ParallelLayout::zero1;
  if (s == "zero2") return ParallelLayout::zero2;
  if (s == "fsdp") return ParallelLayout::fsdp;
  return ParallelLayout::single;
}

// ------------------------------------------------------------------------------------------------
// Showing.

void JobForm::fill(const Field* except) {
  filling_ = true;
  for (Field& f : fields_)
    if (&f != except) fillField(f);
  updateStates();
  filling_ = false;
}

void JobForm::fillField(Field& f) {
  const ordered_json* v = f.kind == Kind::section ? nullptr : find(f.path);
  const ordered_json null_value;
  if (!v) v = defaultAt(f.path);
  if (!v) v = &null_value;
  switch (f.kind) {
    case Kind::section:
      break;
    case Kind::text:
    case Kind::number:
    case Kind::seed:
      static_cast<QLineEdit*>(f.editor)->setText(dumpValue(*v));
      break;
    case Kind::int_list:
    case Kind::text_list: {
      QStringList items;
      if (v->is_array())
        for (const auto& item : *v) items << dumpValue(item);
      static_cast<QLineEdit*>(f.editor)->setText(v->is_array() ? items.join(", ") : dumpValue(*v));
      break;
    }
    case Kind::integer: {
      const double x = v->is_number() ? v->get<double>() : num(f.path);
      static_cast<QSpinBox*>(f.editor)->setValue(static_cast<int>(std::clamp(x, -2e9, 2e9)));
      break;
    }
    case Kind::choice: {
      auto* cb = static_cast<QComboBox*>(f.editor);
      while (cb->count() > f.base_items) cb->removeItem(cb->count() - 1);
      const QString value = dumpValue(*v);
      int i = cb->findText(value);
      if (i < 0) {  // a value the list does not have: show it (the engine says what is wrong)
        cb->addItem(value);
        i = cb->count() - 1;
      }
      cb->setCurrentIndex(i);
      break;
    }
    case Kind::check:
      static_cast<QCheckBox*>(f.editor)->setChecked(v->is_boolean() && v->get<bool>());
      break;
    case Kind::layout:
      static_cast<QComboBox*>(f.editor)->setCurrentIndex(static_cast<int>(layout_));
      break;
    case Kind::launch:
      static_cast<QComboBox*>(f.editor)->setCurrentIndex(static_cast<int>(launchChoice()));
      break;
  }
}

bool JobForm::layoutAllows(const Field& f) const {
  const ParallelLayout l = layout_;
  if (f.path == "parallel.world_size")
    return (l != ParallelLayout::single && !isModelParallel(l)) ||
           (l == ParallelLayout::hybrid && num("parallel.dp") < 1);
  if (f.path == "parallel.pp") return l == ParallelLayout::pipeline || l == ParallelLayout::hybrid;
  if (f.path == "parallel.tp") return l == ParallelLayout::tensor || l == ParallelLayout::hybrid;
  if (f.path == "parallel.dp") return l == ParallelLayout::hybrid;
  if (f.path == "parallel.strategy") return isModelParallel(l);
  return true;
}

void JobForm::updateStates() {
  std::map<QWidget*, bool> rows;
  for (Field& f : fields_) {
    if (f.kind == Kind::section) continue;
    const bool used = !f.used || f.used();
    if (f.hide_unused) {
      f.shown = used;
      if (f.box != f.row) f.box->setVisible(used);
    } else {
      f.shown = true;
      f.editor->setEnabled(used && layoutAllows(f));
    }
    rows[f.row] = rows[f.row] || f.shown;
  }
  for (const Field& f : fields_)
    if (f.row_label && rows.count(f.row)) {
      f.row->setVisible(rows[f.row]);
      f.row_label->setVisible(rows[f.row]);
    }
  listen_->setEnabled(launchChoice() == LaunchChoice::remote);
  // While the text is not JSON the fields are locked: an edit would overwrite it.
  for (QGroupBox* g : groups_) g->setEnabled(parse_error_.isEmpty());
  field("name")->editor->setEnabled(parse_error_.isEmpty());
}

void JobForm::validate() {
  std::map<const Field*, QStringList> messages;
  QStringList general;
  if (!parse_error_.isEmpty()) {
    general << parse_error_;
  } else {
    for (const FieldError& e : check_job_json(document())) {
      // The field itself, else the nearest enclosing path the form shows, else the top.
      const QString path = QString::fromStdString(e.field);
      QString at = path;
      const Field* target = nullptr;
      while (!at.isEmpty() && !target) {
        const Field* f = field(at);
        if (f && f->shown)
          target = f;
        else
          at = parentPath(at);
      }
      const QString message = QString::fromStdString(e.message);
      if (!target) {
        general << QString::fromStdString(e.to_string());
      } else if (at == path) {
        messages[target] << message;
      } else {
        QString rest = path.mid(at.size());
        if (rest.startsWith('.')) rest.remove(0, 1);
        messages[target] << rest + ": " + message;
      }
    }
  }
  for (const Field& f : fields_) {
    const auto it = messages.find(&f);
    QString text;
    if (it != messages.end())
      for (const QString& m : it->second) text += (text.isEmpty() ? "" : "\n") + f.error_prefix + m;
    f.error->setText(text);
    f.error->setVisible(!text.isEmpty());
  }
  general_->setText(general.join('\n'));
  general_->setVisible(!general.isEmpty());
}

}  // namespace shardlab::gui
