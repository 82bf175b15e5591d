#include "engine/launch/process_tree.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

namespace shardlab::launch {

namespace {

// The numeric entries of /proc.
std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    char* end = nullptr;
    const long pid = std::strtol(name.c_str(), &end, 10);
    if (!name.empty() && *end == '\0' && pid > 0) out.push_back(static_cast<pid_t>(pid));
  }
  return out;
}

// What can be read of a /proc file ("" when none). Plain read(): a process that exits while its
// file is read makes read() fail with ESRCH, on which an ifstream's buffer throws.
std::string read_all(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  for (pid_t pid : all_pids()) {
    const std::string text = read_all("/proc/" + std::to_string(pid) + "/stat");
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; ppid follows the last ')'.
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (fields >> state >> ppid) parent_of.emplace_back(pid, static_cast<pid_t>(ppid));
  }
  std::vector<pid_t> out{root};
  for (size_t i = 0; i < out.size(); ++i)
    for (const auto& [pid, ppid] : parent_of)
      if (ppid == out[i]) out.push_back(pid);
  out.erase(out.begin());
  return out;
}

std::vector<pid_t> workers_of(const std::string& job_file) {
  std::vector<pid_t> out;
  if (job_file.empty()) return out;
  const pid_t self = getpid();
  for (pid_t pid : all_pids()) {
    if (pid == self) continue;
    std::string text = read_all("/proc/" + std::to_string(pid) + "/cmdline");
    for (char& c : text)
      if (c == '\0') c = ' ';
    if (text.find(job_file) != std::string::npos && text.find(" worker ") != std::string::npos)
      out.push_back(pid);
  }
  return out;
}

void kill_run_processes(pid_t group, const std::string& job_file) {
  if (group <= 0) return;
  std::vector<pid_t> victims = descendants(group);
  for (pid_t p : workers_of(job_file)) victims.push_back(p);
  ::kill(-group, SIGKILL);
  for (pid_t p : victims) ::kill(p, SIGKILL);
}

}  // namespace shardlab::launch
