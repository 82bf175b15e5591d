// JobForm: the job document as grouped fields (model, data, optimizer, training, parallelism,
// launch). The form holds labels and layout only: each field's type, choices, default and when it
// is used come from the engine's job field table (engine/job/job_fields.h). It edits a JSON
// document in place: keys it has no field for stay as they are, and a field hidden because the
// chosen kind does not use it is taken out of the document (and put back if the kind comes back).
// After every change the document goes through the engine's own check_job_json and each FieldError
// appears beside the field its dotted path names (or the nearest enclosing one shown, or the
// general label at the top). The form never checks values itself.
#pragma once

#include <QString>
#include <QWidget>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

class QGridLayout;
class QHBoxLayout;
class QGroupBox;
class QLabel;
class QLineEdit;
class QVBoxLayout;

namespace shardlab::gui {

// How the app runs a job's ranks. The document only says parallel.backend ("threads" or "mpi");
// mpirun and remote workers both run "mpi" ranks, started by the app or by the user.
enum class LaunchChoice { threads, mpirun, remote };

// The parallel layouts the form offers; choosing one sets parallel.strategy, pp, tp, dp and
// world_size: single is strategy none on one rank; ddp..fsdp that strategy with pp = tp = 1;
// tensor pp = dp = 1 and world = tp (the current tp if > 1, else the world); tensor_data pp = 1,
// tp the current tp if > 1 else 2, dp the current dp if > 1 else world / tp (at least 2), so a
// 4-rank job becomes 2 x 2 keeping its data-parallel strategy (the teaching comparison of ddp,
// zero1, zero2, fsdp and tp x dp on the same job); pipeline pp = world likewise; hybrid pp x tp x
// dp = world (dp -1, "auto", lets the world size be set instead). With pp or tp > 1 the strategy
// combo picks the data-parallel dimension's strategy (ddp, zero1, zero2).
enum class ParallelLayout {
  single,
  ddp,
  zero1,
  zero2,
  fsdp,
  tensor,
  tensor_data,
  pipeline,
  hybrid
};

class JobForm : public QWidget {
  Q_OBJECT
 public:
  explicit JobForm(QWidget* parent = nullptr);

  // Fills the fields from `doc` (any JSON; not validated first) and validates it. Emits nothing.
  void setDocument(const nlohmann::json& doc);
  // The same, keeping the key order of `doc` in orderedDocument().
  void setOrderedDocument(const nlohmann::ordered_json& doc);
  nlohmann::json document() const;
  // The document with the key order it was given in (keys the form adds go last in their object).
  const nlohmann::ordered_json& orderedDocument() const { return doc_; }

  // Shows why the job text is not JSON in the general error label and locks the fields (so an edit
  // cannot replace text the user is still fixing); an empty message clears it. setDocument clears
  // it too.
  void setParseError(const QString& message);
  bool hasParseError() const { return !parse_error_.isEmpty(); }

  // The errors shown for the field at dotted `path` ("" : the general label), one per line;
  // empty when none.
  QString fieldError(const QString& path) const;
  // The editing widget for `path` (a section's group box for "model", "data", "optimizer",
  // "train"; the layout combo for "parallel"); null when the form has none.
  QWidget* fieldWidget(const QString& path) const;

  LaunchChoice launchChoice() const;
  // HOST:PORT the app listens on for remote workers (default "0.0.0.0:0").
  QString listenAddress() const;
  // mpirun: the hosts the ranks run on, "h1:2,h2:2" ("" this machine).
  QString hosts() const;
  ParallelLayout parallelLayout() const { return layout_; }

  // Lays the sections out in two columns when `width` (the room the form has) fits them, else in
  // one; columns() says which.
  void fitWidth(int width);
  int columns() const { return columns_; }

 signals:
  // After every edit made in the form (not after setDocument).
  void documentChanged();

 private:
  enum class Kind {
    section,
    text,
    number,
    integer,
    seed,
    choice,
    check,
    int_list,
    text_list,
    layout,
    launch
  };
  struct Field {
    QString path;
    Kind kind;
    QWidget* editor = nullptr;
    QWidget* box = nullptr;  // editor + error label
    QLabel* error = nullptr;
    QString error_prefix;    // "width: " for a field after the first of its row
    QWidget* row = nullptr;  // the form row's field widget (shared by the fields of one row)
    QLabel* row_label = nullptr;
    std::function<bool()> used;  // null: always used
    bool hide_unused = true;     // hide when not used (else disable)
    int base_items = 0;          // combos: items beyond these show an unlisted document value
    bool shown = true;
  };
  struct Spec;     // one field of a form row: its path and layout (job_form_layout.cpp)
  struct Section;  // a group box of rows

  QGridLayout* makeGrid();
  void addSection(const Section& section);
  void addRow(QGridLayout* grid, const QString& label, const std::vector<Spec>& specs,
              bool hide_unused = true);
  static Kind kindOf(const char* path);
  static QStringList choicesOf(const Spec& s);
  QWidget* makeEditor(Field& f, const Spec& s);

  void arrange(int columns);
  void onEdited(size_t index);
  void applyLayout(ParallelLayout layout);
  void followWorld();
  void fill(const Field* except);
  void fillField(Field& f);
  void updateStates();
  bool layoutAllows(const Field& f) const;
  void validate();
  ParallelLayout deriveLayout() const;

  // Document access by dotted path ("model.gpt.heads"); missing or mistyped values read as the
  // default job's.
  const nlohmann::ordered_json* find(const QString& path) const;
  const nlohmann::ordered_json* defaultAt(const QString& path) const;
  std::string str(const QString& path) const;
  int64_t num(const QString& path) const;
  // Sets a value: an existing key is overwritten; a missing one is added unless `value` is the
  // default (so untouched defaults do not appear in the text).
  void put(const QString& path, const nlohmann::ordered_json& value, bool force = false);
  void erase(const QString& path);

  Field* field(const QString& path);
  const Field* field(const QString& path) const;

  nlohmann::ordered_json doc_ = nlohmann::ordered_json::object();
  nlohmann::ordered_json defaults_;
  std::map<QString, nlohmann::ordered_json> stash_;  // values taken out when a field went unused
  std::vector<Field> fields_;
  std::vector<QGroupBox*> groups_;
  std::vector<QGridLayout*> grids_;
  QLabel* general_ = nullptr;
  QHBoxLayout* columns_layout_ = nullptr;
  QVBoxLayout* left_ = nullptr;
  QVBoxLayout* right_ = nullptr;
  int columns_ = 2;
  QLineEdit* listen_ = nullptr;
  QLineEdit* hosts_ = nullptr;
  ParallelLayout layout_ = ParallelLayout::single;
  bool remote_preferred_ = false;
  bool filling_ = false;
  QString parse_error_;
  QStringList general_errors_;
};

}  // namespace shardlab::gui
