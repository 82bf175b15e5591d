// The cluster check in the app: runs `shardlab doctor --hosts HOSTS --json` (the command's own
// measurement and rules, engine/doctor/cluster_checks.h) and shows its pair matrix as a heat map,
// each cell a pair's bandwidth: red where the command's rules named its host's network or the
// link itself, else amber below 80% of the other pairs' median and green above; with the
// per-host figures, the findings in words and the notes.
#pragma once

#include <QByteArray>
#include <QDialog>
#include <QProcess>
#include <QString>

class QLabel;
class QListWidget;
class QTableWidget;

namespace shardlab::gui {

class ClusterCheckDialog : public QDialog {
  Q_OBJECT
 public:
  explicit ClusterCheckDialog(QWidget* parent = nullptr);
  ~ClusterCheckDialog() override;  // kills a check still running

  // Starts `shardlab doctor --hosts hosts --json`; the result shows when it ends (finished()).
  void run(const QString& shardlab, const QString& hosts);
  // Shows a `doctor --cluster --json` document; false (and the reason in status()) when it is not
  // one.
  bool showReport(const QByteArray& json);

  QString status() const;
  QTableWidget* matrix() const { return matrix_; }
  QTableWidget* hostTable() const { return hosts_; }
  QListWidget* findings() const { return findings_; }

 signals:
  // The check ended: ok when it ran and its document was read (findings or not).
  void finished(bool ok);

 private:
  void onExited(int code, QProcess::ExitStatus status);

  QLabel* status_ = nullptr;
  QTableWidget* hosts_ = nullptr;
  QTableWidget* matrix_ = nullptr;
  QListWidget* findings_ = nullptr;
  QProcess process_;
};

}  // namespace shardlab::gui
