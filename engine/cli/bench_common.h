// What the `shardlab bench` subcommands share in reading their flags. (What they share in
// measuring is engine/bench/harness.h.)
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace shardlab::cli {

// "a,b,,c" -> {"a", "b", "c"}: a comma-separated flag value (--optimizers, --strategies), empty
// items dropped.
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace shardlab::cli
