// Substring checks on messages and outputs, with a failure line that shows the whole text.
#pragma once

#include <QtTest>

#include <string>

namespace shardlab::test {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace shardlab::test

// QVERIFY that std::string `text` contains `part`; the failure names both.
#define VERIFY_CONTAINS(text, part)                    \
  QVERIFY2(::shardlab::test::contains((text), (part)), \
           (std::string("expected \"") + (part) + "\" in: " + (text)).c_str())
