// JobForm at work: the document it edits, what a user's edit changes in it (layouts, fields that
// become unused), filling the widgets from it, and the engine's validation beside each field. The
// widgets themselves are built in job_form_layout.cpp.
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
#include <cstdint>
#include <limits>

#include "engine/job/job_fields.h"
#include "engine/job/job_spec.h"

namespace shardlab::gui {

using nlohmann::ordered_json;

namespace {

// "model.mlp.hidden[1]" -> "model.mlp.hidden" -> "model.mlp" -> "model" -> "". Always shorter, so
// a walk up ends, whatever the keys hold (an unknown key "a]" has no '[' to cut at).
QString parentPath(const QString& path) {
  const int bracket = path.endsWith(']') ? static_cast<int>(path.lastIndexOf('[')) : -1;
  if (bracket >= 0) return path.left(bracket);
  const int dot = static_cast<int>(path.lastIndexOf('.'));
  return dot < 0 ? QString() : path.left(dot);
}

// The value at dotted `path` in `root`, or null.
const ordered_json* valueAt(const ordered_json& root, const QString& path) {
  const ordered_json* j = &root;
  for (const QString& part : path.split('.')) {
    if (!j->is_object()) return nullptr;
    const auto it = j->find(part.toStdString());
    if (it == j->end()) return nullptr;
    j = &*it;
  }
  return j;
}

QString dumpValue(const ordered_json& v) {
  return QString::fromStdString(v.is_string() ? v.get<std::string>() : v.dump());
}

// a x b, clamped to int64's range instead of overflowing: a document may hold any integers
// (parallel.pp = parallel.tp = 2^32 made pp x tp wrap to 0 and the division by it trap).
int64_t mulClamped(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min()
                            : std::numeric_limits<int64_t>::max();
}

bool isModelParallel(ParallelLayout l) {
  return l == ParallelLayout::tensor || l == ParallelLayout::tensor_data ||
         l == ParallelLayout::pipeline || l == ParallelLayout::hybrid;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Document access.

const ordered_json* JobForm::find(const QString& path) const {
  return valueAt(doc_, path);
}

const ordered_json* JobForm::defaultAt(const QString& path) const {
  return valueAt(defaults_, path);
}

std::string JobForm::str(const QString& path) const {
  const ordered_json* v = find(path);
  if (!v || !v->is_string()) v = defaultAt(path);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

int64_t JobForm::num(const QString& path) const {
  const ordered_json* v = find(path);
  if (!v || !v->is_number()) v = defaultAt(path);
  if (!v || !v->is_number()) return 0;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (v->is_number_unsigned())
    return static_cast<int64_t>(std::min<uint64_t>(v->get<uint64_t>(), kMax));
  if (v->is_number_integer()) return v->get<int64_t>();
  // Clamped first: a double beyond int64's range has no int64 value (converting it is undefined).
  const double x = v->get<double>();
  return std::isfinite(x) ? static_cast<int64_t>(std::clamp(x, -9.2e18, 9.2e18)) : 0;
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

QString JobForm::hosts() const {
  return hosts_->text().trimmed();
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
  const int64_t dp = layout_ == ParallelLayout::hybrid || layout_ == ParallelLayout::tensor_data
                         ? num("parallel.dp")
                         : 1;
  if (dp >= 1)
    put("parallel.world_size", mulClamped(mulClamped(num("parallel.pp"), num("parallel.tp")), dp));
}

void JobForm::applyLayout(ParallelLayout layout) {
  layout_ = layout;
  int64_t pp = std::max<int64_t>(1, num("parallel.pp"));
  int64_t tp = std::max<int64_t>(1, num("parallel.tp"));
  int64_t dp = num("parallel.dp");
  const int64_t world = std::max<int64_t>(1, num("parallel.world_size"));
  const std::string strategy = str("parallel.strategy");
  // With pp or tp > 1 the strategy names the data-parallel dimension's: keep one that can.
  const auto& dp_strategies = data_parallel_strategies();
  const bool dp_strategy =
      std::find(dp_strategies.begin(), dp_strategies.end(), strategy) != dp_strategies.end();
  const auto model_parallel = [&](int64_t pp_, int64_t tp_, int64_t dp_) {
    put("parallel.pp", pp_);
    put("parallel.tp", tp_);
    put("parallel.dp", dp_);
    put("parallel.world_size", mulClamped(mulClamped(pp_, tp_), dp_));
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
    case ParallelLayout::tensor_data: {  // tp x dp: 2 x 2 from a 4-rank job
      const int64_t t = tp > 1 ? tp : 2;
      model_parallel(1, t, dp > 1 ? dp : std::max<int64_t>(2, world / t));
      break;
    }
    case ParallelLayout::pipeline:
      model_parallel(pp > 1 ? pp : std::max<int64_t>(world, 2), 1, 1);
      break;
    case ParallelLayout::hybrid:
      if (pp == 1 && tp == 1) pp = 2;
      if (dp < 1) dp = std::max<int64_t>(1, world / mulClamped(pp, tp));  // pp, tp >= 1
      model_parallel(pp, tp, dp);
      break;
  }
}

ParallelLayout JobForm::deriveLayout() const {
  const int64_t pp = num("parallel.pp"), tp = num("parallel.tp"), dp = num("parallel.dp");
  const int64_t world = num("parallel.world_size");
  const int64_t dp_eff = dp >= 1 ? dp : (pp >= 1 && tp >= 1 ? world / mulClamped(pp, tp) : 1);
  if (pp > 1 && (tp > 1 || dp_eff > 1)) return ParallelLayout::hybrid;
  if (tp > 1 && dp_eff > 1) return ParallelLayout::tensor_data;
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
  if (f.path == "parallel.tp")
    return l == ParallelLayout::tensor || l == ParallelLayout::tensor_data ||
           l == ParallelLayout::hybrid;
  if (f.path == "parallel.dp")
    return l == ParallelLayout::hybrid || l == ParallelLayout::tensor_data;
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
  hosts_->setEnabled(launchChoice() == LaunchChoice::mpirun);
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
