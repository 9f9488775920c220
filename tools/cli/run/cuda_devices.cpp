#include "run/cuda_devices.h"

#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "gpulimit/options/environment.h"
#include "gpulimit/options/option_table.h"

namespace gpulimit::cli {
namespace {

// What the child writes to the pipe: the count, then each UUID; or, with a
// negative count, one line of error text.
struct Answer {
  int count = 0;
  char text[256] = {};
};

using Init = CUresult (*)(unsigned);
using GetCount = CUresult (*)(int*);
using GetUuid = CUresult (*)(CUuuid*, CUdevice);

bool write_all(int fd, const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

bool read_all(int fd, void* data, size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = read(fd, bytes, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    bytes += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

[[noreturn]] void answer_error(int fd, const std::string& text) {
  Answer answer;
  answer.count = -1;
  std::strncpy(answer.text, text.c_str(), sizeof(answer.text) - 1);
  write_all(fd, &answer, sizeof(answer));
  _exit(0);
}

// HAMi's variables: CUDA_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_SM_LIMIT and the
// per-device CUDA_DEVICE_MEMORY_LIMIT_<i>.
bool is_hami_variable(std::string_view name) {
  using options::OptionId;
  return name == options::option(OptionId::kMem).hami_alias ||
         name == options::option(OptionId::kSm).hami_alias ||
         name.starts_with(options::option(OptionId::kDeviceMem).hami_alias);
}

// Without the limits of an outer job (a gpulimit inside a gpulimit job):
// the driver must answer as it will for the job, and libgpulimit.so, when it
// is preloaded here too, must pass the calls straight through.
void drop_limits_from_environment() {
  std::vector<std::string> names;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string_view assignment(*entry);
    const std::string_view name = options::variable_name(assignment);
    if (options::is_option_variable(name) || is_hami_variable(name)) names.emplace_back(name);
  }
  for (const std::string& name : names)
    unsetenv(name.c_str());
}

[[noreturn]] void ask_driver(int fd) {
  drop_limits_from_environment();
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) answer_error(fd, std::string("cannot load libcuda.so.1: ") + dlerror());
  const auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  const auto get_count = reinterpret_cast<GetCount>(dlsym(driver, "cuDeviceGetCount"));
  auto get_uuid = reinterpret_cast<GetUuid>(dlsym(driver, "cuDeviceGetUuid_v2"));
  if (!get_uuid) get_uuid = reinterpret_cast<GetUuid>(dlsym(driver, "cuDeviceGetUuid"));
  if (!init || !get_count || !get_uuid)
    answer_error(fd, "libcuda.so.1 lacks cuInit, cuDeviceGetCount or cuDeviceGetUuid");
  if (const CUresult r = init(0); r != CUDA_SUCCESS)
    answer_error(fd, "cuInit failed with error " + std::to_string(r));
  Answer answer;
  if (const CUresult r = get_count(&answer.count); r != CUDA_SUCCESS)
    answer_error(fd, "cuDeviceGetCount failed with error " + std::to_string(r));
  std::vector<CUuuid> uuids(static_cast<size_t>(answer.count));
  for (int ordinal = 0; ordinal < answer.count; ++ordinal) {
    if (const CUresult r = get_uuid(&uuids[static_cast<size_t>(ordinal)], ordinal);
        r != CUDA_SUCCESS)
      answer_error(fd, "cuDeviceGetUuid of device " + std::to_string(ordinal) +
                           " failed with error " + std::to_string(r));
  }
  write_all(fd, &answer, sizeof(answer));
  write_all(fd, uuids.data(), uuids.size() * sizeof(CUuuid));
  _exit(0);
}

}  // namespace

bool list_cuda_devices(std::vector<options::DeviceUuid>& uuids, std::string& error) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    error = std::string("cannot ask the driver: pipe: ") + std::strerror(errno);
    return false;
  }
  const pid_t child = fork();
  if (child < 0) {
    error = std::string("cannot ask the driver: fork: ") + std::strerror(errno);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return false;
  }
  if (child == 0) {
    close(pipe_fds[0]);
    ask_driver(pipe_fds[1]);
  }
  close(pipe_fds[1]);
  Answer answer;
  bool answered = read_all(pipe_fds[0], &answer, sizeof(answer));
  std::vector<CUuuid> listed;
  if (answered && answer.count >= 0) {
    listed.resize(static_cast<size_t>(answer.count));
    answered = read_all(pipe_fds[0], listed.data(), listed.size() * sizeof(CUuuid));
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!answered) {
    error = "the driver did not answer (the process that asked it ";
    error += WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                 : "exited with status " + std::to_string(WEXITSTATUS(status));
    error += ")";
    return false;
  }
  if (answer.count < 0) {
    error = answer.text;
    return false;
  }
  uuids.clear();
  for (const CUuuid& uuid : listed) {
    options::DeviceUuid& bytes = uuids.emplace_back();
    std::memcpy(bytes.data(), uuid.bytes, bytes.size());
  }
  return true;
}

bool bind_device_caps(options::MemoryLimits& memory, std::string& error) {
  if (memory.by_device.empty()) return true;
  const std::string flag(options::option(options::OptionId::kDeviceMem).flag);
  std::vector<options::DeviceUuid> uuids;
  std::string why;
  // Where the driver cannot say (none here, or cuInit fails), the job cannot
  // take CUDA either with this environment: the indices stay, for its first
  // process to bind should it get further.
  if (!list_cuda_devices(uuids, why)) return true;
  if (!memory.bind(uuids, why)) {
    error = flag + ": " + why;
    return false;
  }
  return true;
}

}  // namespace gpulimit::cli
