#include "engine/launch/hosts.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/core/display_text.h"
#include "engine/core/error.h"

namespace shardlab::launch {
namespace {

// A whole positive number of slots, or -1.
int parse_slots(const std::string& text) {
  if (text.empty() || text.size() > 4) return -1;
  for (char c : text)
    if (c < '0' || c > '9') return -1;
  const int n = std::stoi(text);
  return n >= 1 && n <= 4096 ? n : -1;
}

bool plain_host_name(const std::string& h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'))
      return false;
  return true;
}

// Adds `host`; what is wrong with it ("" when nothing).
std::string add_host(HostList& list, std::set<std::string>& seen, const std::string& host,
                     int slots, const std::string& where) {
  if (!plain_host_name(host))
    return fmt::format("{}: '{}' is not a host name", where, display_text(host, 60));
  if (!seen.insert(host).second) return fmt::format("{}: host {} is named twice", where, host);
  list.hosts.push_back({host, slots});
  return "";
}

// `name = value` lines of an MCA parameter file set `name`.
bool file_sets(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    const size_t eq = line.find('=', start);
    if (eq == std::string::npos) continue;
    std::string key = line.substr(start, eq - start);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (key == name) return true;
  }
  return false;
}

}  // namespace

int HostList::total_slots() const {
  int n = 0;
  for (const HostSlots& h : hosts) n += h.slot_count;
  return n;
}

std::vector<int> HostList::ranks_of(const std::string& host, int world) const {
  std::vector<int> out;
  int next = 0;
  for (const HostSlots& h : hosts) {
    for (int s = 0; s < h.slot_count && next < world; ++s, ++next)
      if (h.host == host) out.push_back(next);
  }
  return out;
}

std::string HostList::text() const {
  std::string out;
  for (const HostSlots& h : hosts)
    out += (out.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slot_count);
  return out;
}

HostList parse_hosts(const std::string& list, const std::string& flag) {
  SL_ENFORCE(!list.empty(), "{}: expected hosts such as h1:2,h2:2 (HOST[:SLOTS],...)", flag);
  HostList out;
  std::set<std::string> seen;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t colon = item.rfind(':');
    const std::string host = item.substr(0, colon);
    int slots = 1;
    if (colon != std::string::npos) {
      slots = parse_slots(item.substr(colon + 1));
      SL_ENFORCE(slots > 0, "{}: '{}' wants HOST:SLOTS with SLOTS from 1 to 4096", flag,
                 display_text(item, 60));
    }
    const std::string wrong = add_host(out, seen, host, slots, flag);
    SL_ENFORCE(wrong.empty(), "{}", wrong);
  }
  SL_ENFORCE(!list.ends_with(','), "{}: a trailing comma in '{}'", flag, display_text(list, 60));
  return out;
}

HostList read_hostfile(const std::string& path) {
  std::ifstream in(path);
  SL_ENFORCE_T(IoError, in.good(), "--hostfile: cannot read {}: {}", path, std::strerror(errno));
  HostList out;
  out.hostfile = path;
  std::set<std::string> seen;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string host, word;
    if (!(words >> host)) continue;
    const std::string where = path + ":" + std::to_string(number);
    int slots = 1;
    while (words >> word) {
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq);
      SL_ENFORCE_T(
          FormatError,
          eq != std::string::npos && (key == "slots" || key == "max_slots" || key == "max-slots"),
          "{}: '{}' is not slots=N or max_slots=N", where, display_text(word, 40));
      const int n = parse_slots(word.substr(eq + 1));
      SL_ENFORCE_T(FormatError, n > 0, "{}: {} wants a number from 1 to 4096", where, key);
      if (key == "slots") slots = n;
    }
    const std::string wrong = add_host(out, seen, host, slots, where);
    SL_ENFORCE_T(FormatError, wrong.empty(), "{}", wrong);
  }
  SL_ENFORCE_T(FormatError, !out.hosts.empty(), "--hostfile {}: no hosts in it", path);
  return out;
}

bool mca_param_set_by_user(const std::string& name) {
  if (std::getenv(("OMPI_MCA_" + name).c_str()) != nullptr) return true;
  std::vector<std::string> files;
  if (const char* home = std::getenv("HOME"))
    files.push_back(std::string(home) + "/.openmpi/mca-params.conf");
  files.push_back("/etc/openmpi/openmpi-mca-params.conf");
  if (const char* more = std::getenv("OMPI_MCA_mca_base_param_files")) {
    std::stringstream in(more);
    std::string f;
    while (std::getline(in, f, ':')) files.push_back(f);
  }
  for (const std::string& f : files)
    if (file_sets(f, name)) return true;
  return false;
}

std::vector<std::string> cluster_mpirun_args(const HostList& hosts, int ranks,
                                             const std::vector<std::string>& forward) {
  std::vector<std::string> args;
  if (hosts.empty()) return args;
  SL_ENFORCE(ranks <= hosts.total_slots(),
             "{} gives {} slots ({}), but the job has {} ranks: name more hosts or slots, or "
             "set parallel.world_size={}",
             hosts.hostfile.empty() ? "--hosts" : "--hostfile " + hosts.hostfile,
             hosts.total_slots(), hosts.text(), ranks, hosts.total_slots());
  if (hosts.hostfile.empty()) {
    args = {"--host", hosts.text()};
  } else {
    args = {"--hostfile", hosts.hostfile};
  }
  const std::pair<const char*, const char*> settings[] = {
      {"oob_tcp_keepalive_time", "5"},
      {"oob_tcp_keepalive_intvl", "2"},
      {"oob_tcp_keepalive_probes", "3"},
      {"btl", "tcp,vader,self"},
  };
  for (const auto& [name, value] : settings)
    if (!mca_param_set_by_user(name)) args.insert(args.end(), {"--mca", name, value});
  for (const std::string& var : forward) args.insert(args.end(), {"-x", var});
  return args;
}

std::string host_port(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}{}{}:{}", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

std::string collector_listen_for(const HostList& hosts) {
  return hosts.empty() ? "127.0.0.1:0"
                       : host_port(local_address_towards(hosts.hosts.front().host), 0);
}

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), "9", &hints, &found);
  SL_ENFORCE_T(IoError, rc == 0 && found != nullptr, "host {}: cannot resolve it ({})", host,
               gai_strerror(rc));
  std::string out, why;
  for (addrinfo* a = found; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // A UDP connect sends nothing: it only asks the kernel for the route and source address.
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* addr =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr;
      if (inet_ntop(local.ss_family, addr, text, sizeof text) != nullptr) out = text;
    } else {
      why = std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  SL_ENFORCE_T(IoError, !out.empty(), "host {}: no route to it from this machine ({})", host,
               why.empty() ? "no address" : why);
  return out;
}

}  // namespace shardlab::launch
