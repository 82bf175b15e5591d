#include "gui/comm_table.h"

#include <QAbstractTableModel>
#include <QHeaderView>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "engine/core/human_format.h"
#include "net/run_model.h"

namespace shardlab::gui {

namespace {

constexpr int kColumns = CommTable::ColumnCount;

QString humanBytes(int64_t bytes) {
  return QString::fromStdString(shardlab::human_bytes(bytes, {.gib_decimals = 2}));
}

// "dp[10]" sorts after "dp[2]": the kind, then the index zero-padded.
QString groupSortKey(const std::string& group) {
  const auto open = group.find('[');
  if (open == std::string::npos || group.back() != ']') return QString::fromStdString(group);
  const std::string digits = group.substr(open + 1, group.size() - open - 2);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(),
                                     [](unsigned char c) { return std::isdigit(c) != 0; }))
    return QString::fromStdString(group);
  return QString::fromStdString(group.substr(0, open)) + '[' +
         QString::fromStdString(digits).rightJustified(12, '0');
}

// One table row: display texts, sort keys (Qt::UserRole) and exact CSV figures.
struct TableRow {
  std::array<QString, kColumns> text;
  std::array<QVariant, kColumns> key;
  std::array<QString, kColumns> exact;
  bool failed = false;
};

}  // namespace

// Rows of display texts, sort keys (Qt::UserRole) and exact CSV figures; replaced whole.
class CommTable::Model : public QAbstractTableModel {
 public:
  using Row = TableRow;

  using QAbstractTableModel::QAbstractTableModel;

  void setRows(std::vector<Row> rows) {
    beginResetModel();
    rows_ = std::move(rows);
    endResetModel();
  }
  const std::vector<Row>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = QModelIndex()) const override {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
  }
  int columnCount(const QModelIndex& parent = QModelIndex()) const override {
    return parent.isValid() ? 0 : kColumns;
  }
  QVariant data(const QModelIndex& index, int role) const override {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const Row& r = rows_[static_cast<size_t>(index.row())];
    const auto c = static_cast<size_t>(index.column());
    switch (role) {
      case Qt::DisplayRole:
        return r.text[c];
      case Qt::UserRole:
        return r.key[c];
      case Qt::ToolTipRole:
        return index.column() == Bytes ? QVariant(tr("%1 bytes").arg(r.exact[c])) : QVariant();
      case Qt::TextAlignmentRole:
        return index.column() >= Count
                   ? QVariant(static_cast<int>(Qt::AlignRight | Qt::AlignVCenter))
                   : QVariant(static_cast<int>(Qt::AlignLeft | Qt::AlignVCenter));
      case Qt::ForegroundRole:
        return index.column() == Failed && r.failed ? QVariant(QColor(183, 28, 28)) : QVariant();
      default:
        return {};
    }
  }
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const std::array<const char*, kColumns> names = {
        "op", "group", "count", "failed", "total (s)", "mean (ms)", "bytes", "bus bw (GB/s)"};
    return section >= 0 && section < kColumns ? tr(names[static_cast<size_t>(section)]) : QString();
  }

 private:
  std::vector<Row> rows_;
};

namespace {

TableRow makeRow(const QString& op, const std::string& group, QVariant group_key,
                 const net::CommAggregate& a) {
  TableRow r;
  const QString g = QString::fromStdString(group);
  auto set = [&r](int column, QString text, QVariant key, QString exact) {
    const auto c = static_cast<size_t>(column);
    r.text[c] = std::move(text);
    r.key[c] = std::move(key);
    r.exact[c] = std::move(exact);
  };
  set(CommTable::Op, op, op, op);
  set(CommTable::Group, g, std::move(group_key), g);
  set(CommTable::Count, QString::number(a.count), QVariant::fromValue<qlonglong>(a.count),
      QString::number(a.count));
  set(CommTable::Failed, QString::number(a.failed), QVariant::fromValue<qlonglong>(a.failed),
      QString::number(a.failed));
  set(CommTable::TotalSeconds, QString::number(a.seconds, 'f', 3), a.seconds,
      QString::number(a.seconds, 'g', 12));
  set(CommTable::MeanMs, QString::number(a.mean_seconds() * 1e3, 'f', 3), a.mean_seconds(),
      QString::number(a.mean_seconds() * 1e3, 'g', 12));
  set(CommTable::Bytes, humanBytes(a.bytes), QVariant::fromValue<qlonglong>(a.bytes),
      QString::number(a.bytes));
  set(CommTable::BusBw, QString::number(a.mean_busbw(), 'f', 2), a.mean_busbw(),
      QString::number(a.mean_busbw(), 'g', 12));
  r.failed = a.failed > 0;
  return r;
}

QTableView* makeView(QAbstractItemModel* model, QWidget* parent) {
  auto* v = new QTableView(parent);
  v->setModel(model);
  v->verticalHeader()->hide();
  v->setSelectionBehavior(QAbstractItemView::SelectRows);
  v->setEditTriggers(QAbstractItemView::NoEditTriggers);
  v->setAlternatingRowColors(true);
  v->horizontalHeader()->setStretchLastSection(true);
  v->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  return v;
}

}  // namespace

CommTable::CommTable(QWidget* parent) : QWidget(parent) {
  model_ = new Model(this);
  summary_model_ = new Model(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  table_ = makeView(proxy_, this);
  table_->setSortingEnabled(true);
  table_->sortByColumn(Op, Qt::AscendingOrder);
  summary_ = makeView(summary_model_, this);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(new QLabel(tr("Communication by operation and group"), this));
  layout->addWidget(table_, 3);
  layout->addWidget(new QLabel(tr("By group kind"), this));
  layout->addWidget(summary_, 1);
}

void CommTable::update(const net::RunModel& run) {
  const net::CommStats& comm = run.comm();
  std::vector<TableRow> rows;
  rows.reserve(comm.by_key().size());
  for (const auto& [key, a] : comm.by_key())
    rows.push_back(makeRow(QString::fromStdString(key.op), key.group, groupSortKey(key.group), a));
  // Source order (what ties keep under the proxy's stable sort): op, then the natural group order.
  std::stable_sort(rows.begin(), rows.end(), [](const TableRow& x, const TableRow& y) {
    const QString xo = x.key[Op].toString();
    const QString yo = y.key[Op].toString();
    if (xo != yo) return xo < yo;
    return x.key[Group].toString() < y.key[Group].toString();
  });
  const bool first_fill = model_->rowCount() == 0 && !rows.empty();
  model_->setRows(std::move(rows));

  const std::map<std::string, net::CommAggregate> kinds = comm.by_group_kind();
  std::vector<TableRow> summary;
  net::CommAggregate total;
  int order = 0;
  auto emit_kind = [&](const std::string& kind, const net::CommAggregate& a) {
    summary.push_back(makeRow(QStringLiteral("all"), kind, order++, a));
    total.merge(a);
  };
  static const std::array<const char*, 4> kKnown = {"tp", "pp", "dp", "world"};
  for (const char* k : kKnown)
    if (auto it = kinds.find(k); it != kinds.end()) emit_kind(it->first, it->second);
  for (const auto& [kind, a] : kinds)
    if (std::find_if(kKnown.begin(), kKnown.end(), [&](const char* k) { return kind == k; }) ==
        kKnown.end())
      emit_kind(kind, a);
  if (!summary.empty()) summary.push_back(makeRow(QStringLiteral("all"), "total", order++, total));
  summary_model_->setRows(std::move(summary));

  if (first_fill) {
    table_->resizeColumnsToContents();
    summary_->resizeColumnsToContents();
  }
}

int CommTable::rowCount() const {
  return proxy_->rowCount();
}

QString CommTable::cell(int row, int column) const {
  return proxy_->index(row, column).data(Qt::DisplayRole).toString();
}

int CommTable::summaryRowCount() const {
  return summary_model_->rowCount();
}

QString CommTable::summaryCell(int row, int column) const {
  return summary_model_->index(row, column).data(Qt::DisplayRole).toString();
}

void CommTable::sortBy(int column, Qt::SortOrder order) {
  table_->sortByColumn(column, order);
}

QString CommTable::csv() const {
  QString out =
      QStringLiteral("op,group,count,failed,total_seconds,mean_ms,bytes,mean_busbw_gbps\n");
  auto line = [&out](const TableRow& r) {
    for (int c = 0; c < kColumns; ++c) {
      if (c > 0) out += ',';
      out += r.exact[static_cast<size_t>(c)];
    }
    out += '\n';
  };
  for (int row = 0; row < proxy_->rowCount(); ++row)
    line(model_->rows()[static_cast<size_t>(proxy_->mapToSource(proxy_->index(row, 0)).row())]);
  for (const TableRow& r : summary_model_->rows()) line(r);
  return out;
}

}  // namespace shardlab::gui
