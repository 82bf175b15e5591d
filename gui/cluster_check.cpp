#include "gui/cluster_check.h"

#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QSet>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <vector>

#include "engine/doctor/cluster_checks.h"

namespace shardlab::gui {
namespace {

QString bandwidth(double gb_per_s) {
  return QString::fromStdString(doctor::bandwidth_text(gb_per_s));
}

QString latency(double us) {
  return QString::fromStdString(doctor::latency_text(us));
}

// The cell colour of a pair at `ratio` of the median pair, 0 for a pair the rules named.
QColor pair_colour(double ratio) {
  if (ratio <= 0) return QColor(220, 80, 70);
  if (ratio < 0.8) return QColor(240, 190, 80);
  return QColor(120, 190, 120);
}

}  // namespace

ClusterCheckDialog::ClusterCheckDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Cluster check"));
  status_ = new QLabel(tr("Not run yet"), this);
  status_->setWordWrap(true);
  hosts_ = new QTableWidget(this);
  hosts_->setObjectName("clusterHosts");
  hosts_->setColumnCount(5);
  hosts_->setHorizontalHeaderLabels(
      {tr("Host"), tr("GEMM GFLOP/s"), tr("Memory"), tr("Links (median)"), tr("Latency")});
  hosts_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  hosts_->verticalHeader()->setVisible(false);  // the Host column names each row
  matrix_ = new QTableWidget(this);
  matrix_->setObjectName("clusterMatrix");
  matrix_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  matrix_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  findings_ = new QListWidget(this);
  findings_->setObjectName("clusterFindings");
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(status_);
  layout->addWidget(hosts_);
  layout->addWidget(new QLabel(tr("Pair bandwidth (4 MiB ping-pong, best of 3)"), this));
  layout->addWidget(matrix_, 1);
  layout->addWidget(findings_);
  resize(760, 620);
  process_.setProcessChannelMode(QProcess::SeparateChannels);
  connect(&process_, &QProcess::finished, this, &ClusterCheckDialog::onExited);
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    status_->setText(tr("Cannot start %1: %2").arg(process_.program(), process_.errorString()));
    emit finished(false);
  });
}

ClusterCheckDialog::~ClusterCheckDialog() {
  if (process_.state() != QProcess::NotRunning) {
    process_.kill();
    process_.waitForFinished(5000);
  }
}

QString ClusterCheckDialog::status() const {
  return status_->text();
}

void ClusterCheckDialog::run(const QString& shardlab, const QString& hosts) {
  if (process_.state() != QProcess::NotRunning) return;
  status_->setText(tr("Checking %1 …").arg(hosts));
  process_.start(shardlab, {"doctor", "--hosts", hosts, "--json"});
}

void ClusterCheckDialog::onExited(int code, QProcess::ExitStatus status) {
  const QByteArray out = process_.readAllStandardOutput();
  const QString err = QString::fromUtf8(process_.readAllStandardError()).trimmed();
  // Exit 1 with a document: findings; anything else without one: the command's own error line.
  if (status == QProcess::NormalExit && (code == 0 || code == 1) && showReport(out)) {
    emit finished(true);
    return;
  }
  QString why;
  for (const QString& line : err.split('\n'))
    if (line.startsWith("shardlab: ")) why = line;  // the command's one line, not mpirun's banner
  status_->setText(
      tr("The check failed (exit %1): %2").arg(code).arg(why.isEmpty() ? err.right(300) : why));
  emit finished(false);
}

bool ClusterCheckDialog::showReport(const QByteArray& json) {
  const QJsonObject doc = QJsonDocument::fromJson(json).object();
  const QJsonArray hosts = doc["hosts"].toArray();
  const QJsonArray pairs = doc["pairs"].toArray();
  if (hosts.isEmpty()) {
    status_->setText(tr("Not a `doctor --cluster --json` document"));
    return false;
  }
  const int n = static_cast<int>(hosts.size());
  QStringList names;
  hosts_->setRowCount(n);
  for (int r = 0; r < n; ++r) {
    const QJsonObject h = hosts[r].toObject();
    names << h["host"].toString();
    const QStringList cells{
        h["host"].toString(), QString::number(h["gemm_gflops"].toDouble(), 'f', 1),
        bandwidth(h["memory_gb_per_second"].toDouble()),
        bandwidth(h["link_gb_per_second"].toDouble()), latency(h["latency_us"].toDouble())};
    for (int c = 0; c < cells.size(); ++c) hosts_->setItem(r, c, new QTableWidgetItem(cells[c]));
  }
  matrix_->clear();
  matrix_->setRowCount(n);
  matrix_->setColumnCount(n);
  matrix_->setHorizontalHeaderLabels(names);
  matrix_->setVerticalHeaderLabels(names);
  // What the command's rules named (one source: engine/doctor/cluster_checks.h): a host whose
  // network is slow ("h1", its finding about the network) or one link ("h1-h2").
  const QJsonArray named = doc["named"].toArray(), found = doc["findings"].toArray();
  QSet<QString> slow_hosts, slow_links;
  for (qsizetype i = 0; i < named.size() && i < found.size(); ++i) {
    const QString who = named[i].toString();
    if (who.contains('-'))
      slow_links.insert(who);
    else if (found[i].toString().contains("network"))
      slow_hosts.insert(who);
  }
  auto slow_pair = [&](int a, int b) {
    return slow_hosts.contains(names[a]) || slow_hosts.contains(names[b]) ||
           slow_links.contains(names[a] + "-" + names[b]) ||
           slow_links.contains(names[b] + "-" + names[a]);
  };
  // The others are coloured against their own median.
  std::vector<double> others;
  for (const QJsonValue& v : pairs) {
    const QJsonObject p = v.toObject();
    const int a = p["a"].toInt(), b = p["b"].toInt();
    if (a >= 0 && b >= 0 && a < n && b < n && !slow_pair(a, b))
      others.push_back(p["gb_per_second"].toDouble());
  }
  std::sort(others.begin(), others.end());
  const double median = others.empty() ? 0 : others[others.size() / 2];
  for (int r = 0; r < n; ++r) {
    auto* self = new QTableWidgetItem(QStringLiteral("-"));
    self->setTextAlignment(Qt::AlignCenter);
    matrix_->setItem(r, r, self);
  }
  for (const QJsonValue& v : pairs) {
    const QJsonObject p = v.toObject();
    const int a = p["a"].toInt(), b = p["b"].toInt();
    if (a < 0 || b < 0 || a >= n || b >= n) continue;
    const double gbps = p["gb_per_second"].toDouble();
    for (const auto& [row, col] : {std::pair{a, b}, std::pair{b, a}}) {
      auto* cell = new QTableWidgetItem(bandwidth(gbps));
      cell->setTextAlignment(Qt::AlignCenter);
      cell->setBackground(slow_pair(a, b) ? pair_colour(0)
                                          : pair_colour(median > 0 ? gbps / median : 1));
      cell->setToolTip(
          tr("%1 and %2: %3, latency %4")
              .arg(names[row], names[col], bandwidth(gbps), latency(p["latency_us"].toDouble())));
      matrix_->setItem(row, col, cell);
    }
  }
  findings_->clear();
  for (const QJsonValue& f : doc["findings"].toArray()) findings_->addItem(f.toString());
  for (const QJsonValue& f : doc["notes"].toArray())
    findings_->addItem(tr("note: ") + f.toString());
  status_->setText(found.isEmpty()
                       ? tr("%1 hosts checked: no host or link out of line").arg(n)
                       : tr("%1 hosts checked: %2 finding(s)").arg(n).arg(found.size()));
  return true;
}

}  // namespace shardlab::gui
