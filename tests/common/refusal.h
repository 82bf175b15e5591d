// A command that must refuse its input as a user sees it: it ran to the end, exited non-zero, and
// said what is wrong on stderr in one line, with no crash or stack dump. For the suites that run
// `shardlab` as a process (process.h).
#pragma once

#include <QTest>

#include "tests/common/process.h"

namespace shardlab::test {

// `o` is the outcome of `command` (for the failure message); `what` must appear on stderr.
inline void expect_refusal(const ProcessOutcome& o, const QString& command, const QString& what) {
  QVERIFY2(o.finished && o.exit_code != 0, qPrintable(command + "\n" + o.err));
  QVERIFY2(o.err.contains(what), qPrintable(command + "\n" + o.err));
  QVERIFY2(o.err.trimmed().count('\n') <= 1, qPrintable(o.err));
  QVERIFY2(!o.err.contains("terminate") && !o.err.contains("Aborted"), qPrintable(o.err));
}

}  // namespace shardlab::test
