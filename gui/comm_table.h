// CommTable: the run's communication by (collective, group), read from net::CommStats
// (RunModel::comm()).
//
// The upper table has one row per CommStats::by_key() entry: op, group, count, failed, total time
// (s), mean time (ms), bytes (human units; the exact figure in the tooltip) and the time-weighted
// mean bus bandwidth (GB/s). It sorts by any column (click a header): numbers by value, groups
// naturally ("dp[2]" before "dp[10]"); initially by op, then group.
// The lower table sums the same columns per group kind (CommStats::by_group_kind(): tp, pp, dp,
// world, in that order, then any other kind) and ends with a "total" row over every operation; its
// op column reads "all".
//
// Each update() replaces the rows at once (one model reset per table), so a live refresh costs one
// re-sort and one repaint, not a signal per cell.
#pragma once

#include <QString>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QSortFilterProxyModel;
class QTableView;
QT_END_NAMESPACE

namespace shardlab::net {
class RunModel;
}

namespace shardlab::gui {

class CommTable : public QWidget {
  Q_OBJECT
 public:
  enum Column { Op, Group, Count, Failed, TotalSeconds, MeanMs, Bytes, BusBw, ColumnCount };

  explicit CommTable(QWidget* parent = nullptr);

  using QWidget::update;  // repaint, still reachable beside the model overload
  // Replaces both tables' rows with run.comm()'s figures.
  void update(const net::RunModel& run);

  // The (op, group) table, as displayed: rows in the current sort order, cells as shown.
  int rowCount() const;
  QString cell(int row, int column) const;
  // The per-kind table (the last row is "total").
  int summaryRowCount() const;
  QString summaryCell(int row, int column) const;
  // Sorts the (op, group) table as a click on the header would.
  void sortBy(int column, Qt::SortOrder order = Qt::AscendingOrder);

  QTableView* table() const { return table_; }
  QTableView* summaryTable() const { return summary_; }

  // "op,group,count,failed,total_seconds,mean_ms,bytes,mean_busbw_gbps", then the (op, group)
  // rows in display order, then the per-kind rows with op "all"; exact figures, no units.
  QString csv() const;

 private:
  class Model;
  Model* model_;
  Model* summary_model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QTableView* summary_;
};

}  // namespace shardlab::gui
