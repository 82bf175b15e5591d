// Helpers for the data suites: writing small IDX files (plain or gzip) and raw byte files, and
// checking the type and message of an expected exception (through tests/common/caught.h).
#pragma once

#include <zlib.h>

#include <QtTest>

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "tests/common/caught.h"
#include "tests/common/files.h"

namespace shardlab::testing {

// Header bytes of an unsigned-byte IDX file with the given dims.
inline std::vector<uint8_t> idx_header(const std::vector<uint32_t>& dims, uint8_t type = 0x08) {
  std::vector<uint8_t> h = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) h.push_back(static_cast<uint8_t>(d >> s));
  }
  return h;
}

inline std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  QVERIFY2(out.good(), path.c_str());
}

inline void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  QVERIFY2(f != nullptr, path.c_str());
  if (!bytes.empty()) {
    QCOMPARE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
             static_cast<int>(bytes.size()));
  }
  QCOMPARE(gzclose(f), Z_OK);
}

using test::read_bytes;

// Runs f and checks that it throws an E (or subclass) whose message contains every needle. Another
// exception, or none, fails the test with what happened instead (error_of's line).
template <typename E, typename F>
void expect_error(F&& f, std::initializer_list<QString> needles) {
  const std::string what = test::error_of<E>(std::forward<F>(f));
  const QString msg = QString::fromStdString(what);
  QVERIFY2(!msg.startsWith("(no exception)") && !msg.startsWith("(wrong exception type) "),
           qPrintable(QString("expected %1, got: %2").arg(typeid(E).name(), msg)));
  for (const QString& n : needles) {
    QVERIFY2(msg.contains(n), qPrintable(QString("message \"%1\" lacks \"%2\"").arg(msg, n)));
  }
}

}  // namespace shardlab::testing
