// The Qt suites that run `shardlab doctor`'s checks (engine/doctor): one data row per check, the
// wording of a check in a failure message, and the one skip a node without a GPU gives.
#pragma once

#include <QString>
#include <QtTest>

#include <string>

#include "engine/doctor/check.h"

namespace shardlab::test {

// "FAIL [kernels] adam_update fp32 n=1000: max rel err 3e-06 (bound 1e-06) -- detail"
inline QString describe_check(const doctor::CheckResult& c) {
  QString s = QStringLiteral("%1 [%2] %3")
                  .arg(QString::fromLatin1(doctor::status_name(c.status)),
                       QString::fromStdString(c.group), QString::fromStdString(c.name));
  if (!c.metric.empty())
    s += QStringLiteral(": %1 %2 (bound %3)")
             .arg(QString::fromStdString(c.metric))
             .arg(c.figure, 0, 'g', 3)
             .arg(c.bound, 0, 'g', 3);
  if (!c.detail.empty()) s += QStringLiteral(" -- ") + QString::fromStdString(c.detail);
  return s;
}

// The reason when `checks` is the single skip of a node (or build) that cannot run them, else "".
inline QString whole_group_skipped(const doctor::CheckList& checks) {
  if (checks.size() != 1 || checks.front().status != doctor::CheckStatus::kSkip) return {};
  return QString::fromStdString(checks.front().detail);
}

// A data column "index" and one row per check, named by the check.
inline void add_check_rows(const doctor::CheckList& checks) {
  QTest::addColumn<int>("index");
  for (size_t i = 0; i < checks.size(); ++i)
    QTest::addRow("%s", checks[i].name.c_str()) << static_cast<int>(i);
}

}  // namespace shardlab::test
