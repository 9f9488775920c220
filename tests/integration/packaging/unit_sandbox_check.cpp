// unit_sandbox_check: runs gpulimitd under the sandboxing its systemd unit
// declares, applied the way systemd applies it, and checks that the server
// starts, serves its socket and its metrics, and stops cleanly on SIGTERM.
// The machines that build and test gpulimit run no systemd, so the settings
// are modelled here, each with the kernel mechanism systemd uses for it:
//
//   RestrictAddressFamilies  seccomp: socket() of any other family fails
//                            with EAFNOSUPPORT
//   ProtectSystem=full       /usr, /boot, /efi and /etc read-only
//   ProtectKernelTunables    /proc/sys, /sys and their kin read-only
//   ProtectControlGroups     /sys/fs/cgroup read-only
//   LockPersonality          seccomp: personality() may not change it
//   LimitNOFILE              setrlimit(RLIMIT_NOFILE)
//   RuntimeDirectory[Mode]   the directory under /run, with its mode
//   StateDirectory[Mode]     the directory under /var/lib, with its mode
//
// A [Service] setting this file does not know fails the check, so a unit
// that gains a restriction gains its model here too. Everything happens in
// private mount and network namespaces (a tmpfs on /run and one on
// /var/lib, a loopback of its own), so the host's /run and /var/lib, its
// port 9401 and a system gpulimitd that may be running are never touched. Needs root (namespaces,
// mounts); prints "SKIPPED:" without it.
//
//   unit_sandbox_check UNIT_FILE GPULIMITD [--set KEY=VALUE]... [--expect-refusal]
//
// --set changes one [Service] setting of the unit as read. With
// --expect-refusal the server must fail to start under the unit: the check's
// own proof that the sandbox bites (the unit as it once was, with
// RestrictAddressFamilies=AF_UNIX, stopped the server's metrics). Exit status 0 when the
// expectation holds, 1 when it does not, 2 for a unit it cannot model.
#include <fcntl.h>
#include <linux/personality.h>
#include <net/if.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "httplib.h"

namespace {

using Clock = std::chrono::steady_clock;
using Settings = std::map<std::string, std::string>;

// Set in the service's process between fork and exec, where a failure of
// the sandbox must not pass for the server's own exit status.
bool in_service_process = false;
constexpr int kSandboxFailed = 126;

[[noreturn]] void fail(int status, const std::string& message) {
  std::fprintf(stderr, "unit_sandbox_check: %s\n", message.c_str());
  if (in_service_process) _exit(kSandboxFailed);
  std::exit(status);
}

[[noreturn]] void fail_errno(const std::string& what) {
  fail(1, what + ": " + std::strerror(errno));
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;)
    out.push_back(word);
  return out;
}

// The [Service] section's settings (a later assignment of a key wins, as
// systemd's do for these single-valued settings).
Settings service_settings(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(2, "cannot read " + path);
  Settings settings;
  std::string section;
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      section = line;
      continue;
    }
    const auto equals = line.find('=');
    if (section != "[Service]" || equals == std::string::npos) continue;
    settings[trim(line.substr(0, equals))] = trim(line.substr(equals + 1));
  }
  return settings;
}

// Settings that restrict nothing the server does at start: how it is
// started, restarted and stopped.
const std::set<std::string> kNotSandboxing = {"Type",       "ExecStart",  "Restart",
                                              "RestartSec", "KillSignal", "TimeoutStopSec"};
const std::set<std::string> kModelled = {
    "RestrictAddressFamilies", "ProtectSystem",     "ProtectKernelTunables", "ProtectControlGroups",
    "LockPersonality",         "LimitNOFILE",       "RuntimeDirectory",      "RuntimeDirectoryMode",
    "StateDirectory",          "StateDirectoryMode"};

bool enabled(const Settings& settings, const std::string& key) {
  const auto it = settings.find(key);
  return it != settings.end() && (it->second == "yes" || it->second == "true" || it->second == "1");
}

int address_family(const std::string& name) {
  static const std::map<std::string, int> kFamilies = {{"AF_UNIX", AF_UNIX},
                                                       {"AF_INET", AF_INET},
                                                       {"AF_INET6", AF_INET6},
                                                       {"AF_NETLINK", AF_NETLINK},
                                                       {"AF_PACKET", AF_PACKET}};
  const auto it = kFamilies.find(name);
  if (it == kFamilies.end()) fail(2, "RestrictAddressFamilies names " + name + ", not modelled");
  return it->second;
}

// Every mount point at or below `top`, from the mount table.
std::vector<std::string> mounts_under(const std::string& top) {
  std::ifstream in("/proc/self/mountinfo");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    const auto fields = words(line);
    if (fields.size() < 5) continue;
    const std::string& point = fields[4];
    if (point == top || point.rfind(top + "/", 0) == 0) out.push_back(point);
  }
  return out;
}

// Makes `path` and every mount below it read-only, as systemd's
// ReadOnlyPaths= does (a bind mount of itself, remounted read-only).
void make_read_only(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return;  // systemd skips what is absent too
  if (mount(path.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    fail_errno("bind " + path);
  for (const auto& point : mounts_under(path)) {
    if (mount(nullptr, point.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0 &&
        errno != EACCES && errno != EPERM)  // a locked mount stays as it is, as under systemd
      fail_errno("remount read-only " + point);
  }
}

void bring_up_loopback() {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) fail_errno("socket for loopback");
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &request) != 0) fail_errno("SIOCGIFFLAGS lo");
  request.ifr_flags |= IFF_UP;
  if (ioctl(fd, SIOCSIFFLAGS, &request) != 0) fail_errno("SIOCSIFFLAGS lo");
  close(fd);
}

// The namespaces and file-system view the unit gives its service.
void enter_service_namespaces(const Settings& settings) {
  if (unshare(CLONE_NEWNS | CLONE_NEWNET) != 0) fail_errno("unshare");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail_errno("make / private");
  bring_up_loopback();
  if (mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
    fail_errno("tmpfs on /run");
  if (settings.count("RuntimeDirectory")) {
    const std::string dir = "/run/" + settings.at("RuntimeDirectory");
    const auto mode = settings.count("RuntimeDirectoryMode")
                          ? std::stoul(settings.at("RuntimeDirectoryMode"), nullptr, 8)
                          : 0755;
    if (mkdir(dir.c_str(), mode) != 0 || chmod(dir.c_str(), mode) != 0)
      fail_errno("RuntimeDirectory " + dir);
  }
  if (settings.count("StateDirectory")) {
    if (mount("tmpfs", "/var/lib", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
      fail_errno("tmpfs on /var/lib");
    const std::string dir = "/var/lib/" + settings.at("StateDirectory");
    const auto mode = settings.count("StateDirectoryMode")
                          ? std::stoul(settings.at("StateDirectoryMode"), nullptr, 8)
                          : 0755;
    if (mkdir(dir.c_str(), mode) != 0 || chmod(dir.c_str(), mode) != 0)
      fail_errno("StateDirectory " + dir);
  }
  if (settings.count("ProtectSystem")) {
    const std::string& value = settings.at("ProtectSystem");
    if (value == "strict") fail(2, "ProtectSystem=strict is not modelled");
    if (value != "no") {
      for (const char* path : {"/usr", "/boot", "/efi"})
        make_read_only(path);
      if (value == "full") make_read_only("/etc");
    }
  }
  if (enabled(settings, "ProtectKernelTunables")) {
    for (const char* path :
         {"/proc/sys", "/proc/sysrq-trigger", "/proc/latency_stats", "/proc/acpi",
          "/proc/timer_stats", "/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/sys"})
      make_read_only(path);
  }
  if (enabled(settings, "ProtectControlGroups")) make_read_only("/sys/fs/cgroup");
}

// What the unit applies to the service's own process, just before exec.
void apply_process_restrictions(const Settings& settings) {
  if (settings.count("LimitNOFILE")) {
    const rlim_t limit = std::stoull(settings.at("LimitNOFILE"));
    rlimit wanted{limit, limit};
    if (setrlimit(RLIMIT_NOFILE, &wanted) != 0) {
      // systemd holds CAP_SYS_RESOURCE; a container that runs this check may
      // not, and then the hard limit it was given is the most it can have.
      rlimit current{};
      getrlimit(RLIMIT_NOFILE, &current);
      wanted.rlim_cur = wanted.rlim_max = std::min(limit, current.rlim_max);
      if (setrlimit(RLIMIT_NOFILE, &wanted) != 0) fail_errno("LimitNOFILE");
      std::fprintf(stderr,
                   "unit_sandbox_check: LimitNOFILE=%llu is above this machine's hard "
                   "limit; the server runs with %llu\n",
                   static_cast<unsigned long long>(limit),
                   static_cast<unsigned long long>(wanted.rlim_cur));
    }
  }
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_ALLOW);
  if (!filter) fail(1, "seccomp_init failed");
  if (settings.count("RestrictAddressFamilies")) {
    std::set<int> allowed;
    for (const auto& name : words(settings.at("RestrictAddressFamilies")))
      allowed.insert(address_family(name));
    for (int family = 0; family < AF_MAX; ++family) {
      if (allowed.count(family)) continue;
      if (seccomp_rule_add(filter, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                           SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(family))) != 0)
        fail(1, "seccomp rule for socket()");
    }
  }
  if (enabled(settings, "LockPersonality")) {
    // Only the persona it has (PER_LINUX) passes; this refuses a query
    // (0xffffffff) too, which is stricter than systemd, never kinder.
    if (seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                         SCMP_A0(SCMP_CMP_NE, static_cast<scmp_datum_t>(PER_LINUX))) != 0)
      fail(1, "seccomp rule for personality()");
  }
  if (seccomp_load(filter) != 0) fail(1, "seccomp_load failed");
  seccomp_release(filter);
}

bool socket_answers(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

// Waits for `pid` up to `limit`; its exit status, or -1 while it runs.
int wait_for(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  do {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (Clock::now() < deadline);
  return -1;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended oddly";
}

}  // namespace

int main(int argc, char** argv) {
  const char* kUsage =
      "usage: unit_sandbox_check UNIT_FILE GPULIMITD [--set KEY=VALUE]... [--expect-refusal]";
  if (argc < 3) fail(2, kUsage);
  Settings settings = service_settings(argv[1]);
  bool expect_refusal = false;
  for (int i = 3; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "--expect-refusal") {
      expect_refusal = true;
    } else if (option == "--set" && i + 1 < argc && std::strchr(argv[i + 1], '=')) {
      const std::string assignment = argv[++i];
      const auto equals = assignment.find('=');
      settings[assignment.substr(0, equals)] = assignment.substr(equals + 1);
    } else {
      fail(2, kUsage);
    }
  }
  if (geteuid() != 0) {
    std::printf("SKIPPED: needs root for the unit's namespaces and mounts\n");
    return 0;
  }
  for (const auto& [key, value] : settings) {
    if (!kNotSandboxing.count(key) && !kModelled.count(key))
      fail(2, "the unit sets " + key + "=" + value + ", which this check does not model");
  }
  if (!settings.count("ExecStart")) fail(2, "the unit has no ExecStart");
  std::vector<std::string> command = words(settings.at("ExecStart"));
  command[0] = argv[2];  // the build's gpulimitd in place of the installed one

  enter_service_namespaces(settings);
  const pid_t server = fork();
  if (server < 0) fail_errno("fork");
  if (server == 0) {
    in_service_process = true;
    apply_process_restrictions(settings);
    std::vector<char*> arguments;
    for (auto& word : command)
      arguments.push_back(word.data());
    arguments.push_back(nullptr);
    char path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    char* environment[] = {path, nullptr};  // systemd's, not this process's
    execve(arguments[0], arguments.data(), environment);
    std::perror("execve gpulimitd");
    _exit(kSandboxFailed);
  }

  const std::string socket_path = "/run/gpulimit/gpulimitd.sock";
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  int ended = -1;
  while (!socket_answers(socket_path) && Clock::now() < deadline) {
    ended = wait_for(server, std::chrono::milliseconds(50));
    if (ended != -1) break;
  }
  if (expect_refusal) {
    // It may bind its socket before it finds it cannot serve the rest.
    if (ended == -1) ended = wait_for(server, std::chrono::seconds(10));
    if (ended == -1) {
      kill(server, SIGKILL);
      waitpid(server, nullptr, 0);
      fail(1, "gpulimitd started under the unit, which was expected to refuse it");
    }
    // gpulimitd's own "cannot start" (1), not the sandbox failing to be set up.
    if (!WIFEXITED(ended) || WEXITSTATUS(ended) != 1)
      fail(1, "expected gpulimitd to refuse to start (status 1), but it " + describe(ended));
    std::printf("gpulimitd could not start under this unit, as expected (it %s)\n",
                describe(ended).c_str());
    return 0;
  }
  if (ended != -1) fail(1, "gpulimitd did not start under the unit: it " + describe(ended));
  if (!socket_answers(socket_path)) {
    kill(server, SIGKILL);
    fail(1, "gpulimitd never served " + socket_path);
  }

  httplib::Client metrics("127.0.0.1", 9401);
  metrics.set_connection_timeout(10);
  metrics.set_read_timeout(10);
  const auto response = metrics.Get("/metrics");
  const bool scraped =
      response && response->status == 200 && response->body.find("gpulimit_") != std::string::npos;

  kill(server, SIGTERM);
  const int stopped = wait_for(server, std::chrono::seconds(10));  // TimeoutStopSec
  if (stopped == -1) {
    kill(server, SIGKILL);
    fail(1, "gpulimitd did not stop within 10 s of SIGTERM");
  }
  if (!scraped) fail(1, "gpulimitd served no metrics at 127.0.0.1:9401 under the unit");
  if (!WIFEXITED(stopped) || WEXITSTATUS(stopped) != 0)
    fail(1, "gpulimitd " + describe(stopped) + " after SIGTERM, not 0");
  std::printf("gpulimitd served %s and its metrics under the unit, and stopped cleanly\n",
              socket_path.c_str());
  return 0;
}
