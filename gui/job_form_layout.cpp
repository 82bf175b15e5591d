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
#include <iterator>
#include <string_view>

#include "engine/job/job_fields.h"
#include "engine/job/job_spec.h"

namespace shardlab::gui {

using nlohmann::ordered_json;

// The layout: per section its rows, per row a label and the fields side by side (path, and the
// label before the editor in a row with several fields). Everything else about a field comes from
// the engine's table.
struct JobForm::Spec {
  const char* path;
  const char* inline_label = "";
  // parallel.dp: the spin box takes the table's range and shows its minimum (-1) as "auto".
  bool auto_at_min = false;
  // A choice combo that lists the default first (the pipeline schedule; the table lists the
  // choices in validation's order).
  bool default_first = false;
};

struct JobForm::Section {
  const char* title;
  const char* path;  // "" for a section without an error label of its own
  bool hide_unused;  // hide a field not used (else disable it, so the layout stays put)
  std::vector<std::pair<const char*, std::vector<Spec>>> rows;
};

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

// The display names of the two combos that are not a field's values: the parallel layouts (in
// ParallelLayout's order) and the launch choices (in LaunchChoice's).
QStringList layoutNames() {
  return {JobForm::tr("Single process"),
          JobForm::tr("DDP"),
          JobForm::tr("ZeRO-1"),
          JobForm::tr("ZeRO-2"),
          JobForm::tr("FSDP (ZeRO-3)"),
          JobForm::tr("Tensor parallel"),
          JobForm::tr("Tensor × data parallel"),
          JobForm::tr("Pipeline parallel"),
          JobForm::tr("Hybrid 3D")};
}

QStringList launchNames() {
  return {JobForm::tr("In-process threads"), JobForm::tr("Local processes (mpirun)"),
          JobForm::tr("Remote workers")};
}

QStringList toQStrings(const std::vector<std::string>& v) {
  QStringList out;
  for (const auto& s : v) out << QString::fromStdString(s);
  return out;
}

}  // namespace

JobForm::JobForm(QWidget* parent) : QWidget(parent) {
  defaults_ = job_to_json(JobSpec{});
  fields_.reserve(80);

  general_ = makeErrorLabel("", this);
  auto* top = makeGrid();
  addRow(top, tr("Name"), {{"name"}});

  // Model, data, optimizer | training, parallelism, launch (see arrange()).
  const std::vector<Section> sections = {
      {QT_TR_NOOP("Model"),
       "model",
       true,
       {{QT_TR_NOOP("Kind"), {{"model.kind"}, {"model.seed", QT_TR_NOOP("seed")}}},
        {QT_TR_NOOP("Hidden sizes"), {{"model.mlp.hidden"}}},
        {QT_TR_NOOP("Activation"), {{"model.mlp.activation"}}},
        {QT_TR_NOOP("Context"), {{"model.gpt.context"}, {"model.gpt.width", QT_TR_NOOP("width")}}},
        {QT_TR_NOOP("Layers"), {{"model.gpt.layers"}, {"model.gpt.heads", QT_TR_NOOP("heads")}}},
        {QT_TR_NOOP("MLP ratio"), {{"model.gpt.mlp_ratio"}}}}},
      {QT_TR_NOOP("Data"),
       "data",
       true,
       {{QT_TR_NOOP("Dataset"), {{"data.dataset"}}},
        {QT_TR_NOOP("Directory"), {{"data.path"}}},
        {QT_TR_NOOP("Corpus files"), {{"data.corpus"}}},
        {QT_TR_NOOP("Eval fraction"), {{"data.eval_fraction"}}},
        {QT_TR_NOOP("Limit train"),
         {{"data.train_limit"}, {"data.eval_limit", QT_TR_NOOP("eval")}}}}},
      {QT_TR_NOOP("Optimizer"),
       "optimizer",
       true,
       {{QT_TR_NOOP("Name"), {{"optimizer.name"}}},
        {QT_TR_NOOP("Learning rate"),
         {{"optimizer.lr"}, {"optimizer.weight_decay", QT_TR_NOOP("weight decay")}}},
        {QT_TR_NOOP("Momentum"),
         {{"optimizer.momentum"}, {"optimizer.nesterov", QT_TR_NOOP("Nesterov")}}},
        {QT_TR_NOOP("Betas"), {{"optimizer.beta1"}, {"optimizer.beta2"}}},
        {QT_TR_NOOP("Eps"),
         {{"optimizer.eps"},
          {"optimizer.alpha", QT_TR_NOOP("alpha")},
          {"optimizer.initial_accumulator", QT_TR_NOOP("initial acc.")}}}}},
      {QT_TR_NOOP("Training"),
       "train",
       true,
       {{QT_TR_NOOP("Steps"), {{"train.steps"}, {"train.epochs", QT_TR_NOOP("epochs")}}},
        {QT_TR_NOOP("Batch size"),
         {{"train.batch_size"}, {"train.accumulation_steps", QT_TR_NOOP("accum.")}}},
        {QT_TR_NOOP("Log every"), {{"train.log_every"}, {"train.seed", QT_TR_NOOP("seed")}}},
        {QT_TR_NOOP("Eval every"),
         {{"train.eval_every"}, {"train.eval_batches", QT_TR_NOOP("batches")}}},
        {QT_TR_NOOP("Grad clip"),
         {{"train.clip_grad_norm"}, {"train.threads", QT_TR_NOOP("threads")}}},
        {QT_TR_NOOP("LR schedule"), {{"train.schedule.kind"}}},
        {QT_TR_NOOP("Warmup"),
         {{"train.schedule.warmup_steps"},
          {"train.schedule.min_lr_ratio", QT_TR_NOOP("min ratio")}}},
        {QT_TR_NOOP("Checkpoints"),
         {{"train.checkpoint_dir"},
          {"train.checkpoint_every", QT_TR_NOOP("every")},
          {"train.keep_checkpoints", QT_TR_NOOP("keep")}}},
        {QT_TR_NOOP("Start from"), {{"train.init_model"}}},
        {QT_TR_NOOP("Patience"),
         {{"train.early_stopping.patience"},
          {"train.early_stopping.min_delta", QT_TR_NOOP("min delta")}}}}},
      {QT_TR_NOOP("Parallelism"),
       "",
       false,
       {{QT_TR_NOOP("Layout"), {{"parallel"}}},
        {QT_TR_NOOP("World size"), {{"parallel.world_size"}}},
        {QT_TR_NOOP("pp × tp × dp"),
         {{"parallel.pp"}, {"parallel.tp", "×"}, {"parallel.dp", "×", true}}},
        {QT_TR_NOOP("DP strategy"), {{"parallel.strategy"}}},
        {QT_TR_NOOP("Micro-batches"), {{"parallel.micro_batches"}}},
        {QT_TR_NOOP("Pipeline"),
         {{"parallel.schedule", "", false, true},
          {"parallel.pp_chunks", QT_TR_NOOP("chunks")},
          {"parallel.pp_partition"}}},
        {QT_TR_NOOP("Bucket MiB"),
         {{"parallel.bucket_mb"}, {"parallel.timeout_s", QT_TR_NOOP("timeout s")}}},
        {QT_TR_NOOP("Overlap"),
         {{"parallel.overlap"}, {"parallel.fsdp_keep_params", QT_TR_NOOP("FSDP keep params")}}}}},
      {QT_TR_NOOP("Launch"),
       "",
       false,
       {{QT_TR_NOOP("Backend"), {{"parallel.backend"}}},
        {QT_TR_NOOP("Device"), {{"device"}}},
        {QT_TR_NOOP("Teaching mode"),
         {{"telemetry.teaching"},
          {"telemetry.teaching_timeout_s", QT_TR_NOOP("viewer timeout s")}}}}},
  };
  for (const Section& s : sections) addSection(s);

  QGridLayout* launch = grids_.back();
  listen_ = new QLineEdit("0.0.0.0:0", this);
  listen_->setObjectName("listenAddress");
  listen_->setToolTip(tr("HOST:PORT the app listens on for remote workers (port 0: any free)"));
  const int listen_row = launch->property("rows").toInt();
  launch->addWidget(new QLabel(tr("Listen on"), this), listen_row, 0,
                    Qt::AlignRight | Qt::AlignVCenter);
  launch->addWidget(listen_, listen_row, 1);
  hosts_ = new QLineEdit(this);
  hosts_->setObjectName("hosts");
  hosts_->setPlaceholderText(tr("this machine"));
  hosts_->setToolTip(
      tr("mpirun: run the ranks on these hosts, HOST:SLOTS,... (Open MPI's --host, "
         "started over ssh, as `shardlab run --hosts`); empty: this machine"));
  launch->addWidget(new QLabel(tr("Hosts"), this), listen_row + 1, 0,
                    Qt::AlignRight | Qt::AlignVCenter);
  launch->addWidget(hosts_, listen_row + 1, 1);

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

void JobForm::addSection(const Section& section) {
  auto* group = new QGroupBox(tr(section.title), this);
  groups_.push_back(group);
  auto* v = new QVBoxLayout(group);
  v->setContentsMargins(8, 4, 8, 6);
  v->setSpacing(2);
  if (*section.path) {  // errors of the section's fields that have no field shown
    Field f;
    f.path = section.path;
    f.kind = Kind::section;
    f.editor = f.box = f.row = group;
    f.error = makeErrorLabel(f.path, group);
    v->addWidget(f.error);
    fields_.push_back(f);
  }
  auto* form = makeGrid();
  v->addLayout(form);
  for (const auto& [label, specs] : section.rows)
    addRow(form, tr(label), specs, section.hide_unused);
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
void JobForm::addRow(QGridLayout* grid, const QString& label, const std::vector<Spec>& specs,
                     bool hide_unused) {
  const bool single = specs.size() == 1;
  QWidget* row = new QWidget(this);
  auto* h = new QHBoxLayout(row);
  h->setContentsMargins(0, 0, 0, 0);
  h->setSpacing(6);
  std::vector<QLabel*> errors;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    const QString path = s.path;
    Field f;
    f.path = path;
    f.kind = kindOf(s.path);
    // Hidden or disabled when the engine's table says the job does not use it.
    const JobField* field = find_job_field(s.path);
    if (field && !field->used_when.empty())
      f.used = [this, field] { return field_used(*field, doc_); };
    f.hide_unused = hide_unused;
    f.row = row;
    f.box = single ? row : new QWidget(row);
    if (i > 0) f.error_prefix = path.mid(path.lastIndexOf('.') + 1) + ": ";
    auto* inner = single ? h : new QHBoxLayout(f.box);
    if (!single) {
      inner->setContentsMargins(0, 0, 0, 0);
      inner->setSpacing(4);
      h->addWidget(f.box, 1);
    }
    if (*s.inline_label && f.kind != Kind::check)
      inner->addWidget(new QLabel(tr(s.inline_label), f.box));
    inner->addWidget(makeEditor(f, s), 1);
    f.error = makeErrorLabel(path, this);
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

// The editor a field's table type asks for; the parallel layout and the launch choice are the
// form's own combos.
JobForm::Kind JobForm::kindOf(const char* path) {
  const std::string_view p = path;
  if (p == "parallel") return Kind::layout;
  if (p == "parallel.backend") return Kind::launch;
  const JobField* field = find_job_field(p);
  if (!field) return Kind::text;
  if (field->type == FieldType::string && !field->choices.empty()) return Kind::choice;
  // Indexed by FieldType: string, boolean, number, integer, unsigned_integer, integer_list,
  // string_list.
  static constexpr Kind by_type[] = {Kind::text, Kind::check,    Kind::number,   Kind::integer,
                                     Kind::seed, Kind::int_list, Kind::text_list};
  static_assert(std::size(by_type) == static_cast<size_t>(FieldType::string_list) + 1);
  return by_type[static_cast<size_t>(field->type)];
}

// A combo's items: the table's choices for a field (the DP strategy combo: the strategies that can
// run the data-parallel dimension, since it is only enabled with pp or tp > 1).
QStringList JobForm::choicesOf(const Spec& s) {
  if (std::string_view(s.path) == "parallel") return layoutNames();
  if (std::string_view(s.path) == "parallel.backend") return launchNames();
  if (std::string_view(s.path) == "parallel.strategy")
    return toQStrings(data_parallel_strategies());
  const JobField* field = find_job_field(s.path);
  std::vector<std::string> choices = field ? field->choices : std::vector<std::string>{};
  if (s.default_first && field) {
    const auto it =
        std::find(choices.begin(), choices.end(), field->default_value.get<std::string>());
    if (it != choices.end()) std::rotate(choices.begin(), it, it + 1);
  }
  return toQStrings(choices);
}

QWidget* JobForm::makeEditor(Field& f, const Spec& s) {
  QWidget* e = nullptr;
  switch (f.kind) {
    case Kind::integer: {
      auto* sb = new QSpinBox(f.box);
      // Wide, so the form shows what the document says; the engine says what is out of range.
      sb->setRange(-999999999, 999999999);
      const JobField* field = find_job_field(s.path);
      if (s.auto_at_min && field && field->min && field->max) {
        sb->setRange(static_cast<int>(*field->min), static_cast<int>(*field->max));
        sb->setSpecialValueText(tr("auto"));
      }
      e = sb;
      break;
    }
    case Kind::choice:
    case Kind::layout:
    case Kind::launch: {
      auto* cb = new QComboBox(f.box);
      cb->addItems(choicesOf(s));
      f.base_items = cb->count();
      e = cb;
      break;
    }
    case Kind::check:
      e = new QCheckBox(*s.inline_label ? tr(s.inline_label) : QString(), f.box);
      break;
    default: {
      auto* le = new QLineEdit(f.box);
      if (f.kind == Kind::int_list) le->setPlaceholderText("256, 128");
      if (f.kind == Kind::text_list)
        le->setPlaceholderText(tr("file or directory, …  (empty: built-in corpus)"));
      e = le;
    }
  }
  // Narrow minimums: the form shares the window with the views and the fields grow into the room.
  if (auto* cb = qobject_cast<QComboBox*>(e)) {
    cb->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    cb->setMinimumContentsLength(5);
  } else if (f.kind != Kind::check) {
    e->setMinimumWidth(44);
  }
  e->setObjectName("field:" + f.path);
  e->setToolTip(f.path);  // the key in the JSON tab
  f.editor = e;
  return e;
}

}  // namespace shardlab::gui
