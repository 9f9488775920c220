#include "preload/preload_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace gpulimit::cli {
namespace {

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t wrote = ::write(fd, text.data() + done, text.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;
    done += static_cast<std::size_t>(wrote);
  }
  return true;
}

// A rename or unlink lasts only once its directory is on disk too.
bool sync_directory(const std::string& path, std::string& error) {
  const std::string directory = directory_of(path);
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    error = directory + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

}  // namespace

std::string preload_file_path() {
  const char* given = std::getenv("GPULIMIT_PRELOAD_FILE");
  return given && *given ? std::string(given) : std::string(kPreloadFilePath);
}

bool read_preload_file(const std::string& path, PreloadFile& file, std::string& error) {
  file = PreloadFile{};
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return true;
    error = path + ": " +
            (errno == ELOOP ? std::string("a symlink; edit the file it points to")
                            : std::string(std::strerror(errno)));
    return false;
  }
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    error = path + ": not a regular file";
    ::close(fd);
    return false;
  }
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      error = path + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (got == 0) break;
    file.text.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  file.exists = true;
  return true;
}

bool replace_preload_file(const std::string& path, const std::string& text, std::string& error) {
  std::string pattern = directory_of(path) + "/." + name_of(path) + ".XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    error = "cannot write beside " + path + ": " + std::strerror(errno);
    return false;
  }
  const std::string temporary(name.data());
  const auto fail = [&](const std::string& why) {
    error = why;
    ::close(fd);
    ::unlink(temporary.c_str());
    return false;
  };

  struct stat old {};
  mode_t mode = 0644;
  if (::lstat(path.c_str(), &old) == 0) {
    mode = old.st_mode & 07777;
    if (::fchown(fd, old.st_uid, old.st_gid) != 0)
      return fail(temporary + ": cannot give it " + path + "'s owner: " + std::strerror(errno));
  }
  if (::fchmod(fd, mode) != 0) return fail(temporary + ": " + std::strerror(errno));
  if (!write_all(fd, text) || ::fsync(fd) != 0)
    return fail(temporary + ": " + std::strerror(errno));
  if (::close(fd) != 0) {
    error = temporary + ": " + std::strerror(errno);
    ::unlink(temporary.c_str());
    return false;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot replace " + path + ": " + std::strerror(errno);
    ::unlink(temporary.c_str());
    return false;
  }
  // The new file is in place: a directory that cannot be flushed is a
  // warning's worth, not a failure to undo.
  std::string ignored;
  sync_directory(path, ignored);
  return true;
}

bool remove_preload_file(const std::string& path, std::string& error) {
  if (::unlink(path.c_str()) != 0) {
    error = "cannot remove " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string ignored;
  sync_directory(path, ignored);
  return true;
}

PreloadFileLock::~PreloadFileLock() {
  if (fd_ >= 0) ::close(fd_);
}

bool PreloadFileLock::acquire(const std::string& path, std::string& error) {
  const std::string directory = directory_of(path);
  fd_ = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    error = directory + ": " + std::strerror(errno);
    return false;
  }
  int locked;
  do {
    locked = ::flock(fd_, LOCK_EX);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    error = "cannot lock " + directory + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace gpulimit::cli
