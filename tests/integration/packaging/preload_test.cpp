// `gpulimit preload enable|disable|status`, run as an administrator runs it,
// against a file in the test's own directory (GPULIMIT_PRELOAD_FILE), never
// the machine's /etc/ld.so.preload. Every refusal must leave the file
// byte for byte as it was, and no temporary file behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_process.h"
#include "gpulimit/testing/process.h"
#include "gpulimit/testing/temporary_directory.h"

namespace {

namespace fs = std::filesystem;
using integration::CliRun;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::size_t count_lines(const std::string& text) {
  std::size_t lines = 0;
  for (const char c : text)
    lines += c == '\n';
  return lines;
}

class PreloadCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    // The library must be root's, in directories only root can write:
    // only root can pass the checks, as only root may change the file.
    if (geteuid() != 0) GTEST_SKIP() << "gpulimit preload enable and disable are for root only";
    ASSERT_FALSE(dir_.path().empty());
    fs::create_directory(work_);
    fs::create_directory(output_);
    ::chmod(work_.c_str(), 0755);
    // A copy of the real interposer, so that the build tree's directories
    // (whoever owns them) play no part.
    fs::copy_file(GPULIMIT_LIBRARY_PATH, library_);
    ::chmod(library_.c_str(), 0755);
  }

  CliRun preload(const std::string& action, const std::string& library) {
    return integration::run_program(
        GPULIMIT_CLI_PATH, {"preload", action},
        {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GPULIMIT_PRELOAD_FILE=" + preload_file_,
         "GPULIMIT_LIBRARY=" + library},
        output_);
  }

  // What is in the directory of the preload file: nothing left behind.
  std::vector<std::string> files_beside() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(work_))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  // A refusal: status 1, one line on stderr naming `reason`, nothing on
  // stdout, the file as it was and no temporary file.
  void expect_refused(const CliRun& run, const std::string& reason, const std::string& before,
                      bool existed) {
    EXPECT_TRUE(run.exited_with(1)) << run.describe();
    EXPECT_EQ(count_lines(run.err), 1u) << run.describe();
    EXPECT_NE(run.err.find(reason), std::string::npos) << run.describe();
    EXPECT_EQ(run.out, "") << run.describe();
    EXPECT_EQ(fs::exists(preload_file_), existed);
    if (existed) {
      EXPECT_EQ(read_file(preload_file_), before);
    }
  }

  gpulimit::testing::TemporaryDirectory dir_;
  const std::string work_ = dir_.path() + "/etc";
  const std::string output_ = dir_.path() + "/output";
  const std::string preload_file_ = work_ + "/ld.so.preload";
  const std::string library_ = work_ + "/libgpulimit.so";
  const std::string others_ = "# site hooks\n/opt/a/liba.so:/opt/b/libb.so\n";
};

TEST_F(PreloadCommand, EnableOnNoFileWritesTheLibraryAndDisableRemovesTheFile) {
  // Act
  const CliRun enabled = preload("enable", library_);
  const std::string written = read_file(preload_file_);
  const CliRun disabled = preload("disable", library_);

  // Assert
  EXPECT_TRUE(enabled.exited_with(0)) << enabled.describe();
  EXPECT_EQ(written, library_ + "\n");
  EXPECT_TRUE(disabled.exited_with(0)) << disabled.describe();
  EXPECT_FALSE(fs::exists(preload_file_));
  EXPECT_EQ(files_beside(), std::vector<std::string>{"libgpulimit.so"});
}

TEST_F(PreloadCommand, EnableKeepsOtherEntriesAndDisableGivesBackTheSameBytes) {
  // Arrange
  write_file(preload_file_, others_);
  ::chmod(preload_file_.c_str(), 0640);

  // Act
  const CliRun enabled = preload("enable", library_);
  const std::string written = read_file(preload_file_);
  struct stat status {};
  ::stat(preload_file_.c_str(), &status);
  const CliRun disabled = preload("disable", library_);

  // Assert
  EXPECT_TRUE(enabled.exited_with(0)) << enabled.describe();
  EXPECT_EQ(written, library_ + "\n" + others_);
  EXPECT_EQ(status.st_mode & 07777, 0640u) << "the replaced file's mode is kept";
  EXPECT_TRUE(disabled.exited_with(0)) << disabled.describe();
  EXPECT_EQ(read_file(preload_file_), others_);
  EXPECT_EQ(files_beside(), (std::vector<std::string>{"ld.so.preload", "libgpulimit.so"}));
}

TEST_F(PreloadCommand, EnableTwiceWritesOnce) {
  // Arrange
  write_file(preload_file_, others_);
  ASSERT_TRUE(preload("enable", library_).exited_with(0));
  struct stat first {};
  ::stat(preload_file_.c_str(), &first);

  // Act
  const CliRun again = preload("enable", library_);

  // Assert
  struct stat second {};
  ::stat(preload_file_.c_str(), &second);
  EXPECT_TRUE(again.exited_with(0)) << again.describe();
  EXPECT_NE(again.out.find("already"), std::string::npos) << again.describe();
  EXPECT_EQ(first.st_ino, second.st_ino) << "the file was written again";
  EXPECT_EQ(read_file(preload_file_), library_ + "\n" + others_);
}

TEST_F(PreloadCommand, DisableWithoutTheLibraryChangesNothing) {
  // Arrange
  write_file(preload_file_, others_);

  // Act
  const CliRun disabled = preload("disable", library_);

  // Assert
  EXPECT_TRUE(disabled.exited_with(0)) << disabled.describe();
  EXPECT_EQ(read_file(preload_file_), others_);
}

TEST_F(PreloadCommand, DisableRemovesALineWhoseLibraryIsGone) {
  // Arrange: enabled, then the library deleted (a package removed by hand).
  write_file(preload_file_, others_);
  ASSERT_TRUE(preload("enable", library_).exited_with(0));
  fs::remove(library_);

  // Act
  const CliRun disabled = preload("disable", library_);

  // Assert
  EXPECT_TRUE(disabled.exited_with(0)) << disabled.describe();
  EXPECT_EQ(read_file(preload_file_), others_);
}

TEST_F(PreloadCommand, StatusSaysWhetherTheLibraryIsPreloaded) {
  // Arrange
  write_file(preload_file_, others_);

  // Act
  const CliRun before = preload("status", library_);
  ASSERT_TRUE(preload("enable", library_).exited_with(0));
  const CliRun after = preload("status", library_);

  // Assert
  EXPECT_TRUE(before.exited_with(0)) << before.describe();
  EXPECT_NE(before.out.find("disabled"), std::string::npos) << before.describe();
  EXPECT_TRUE(after.exited_with(0)) << after.describe();
  EXPECT_NE(after.out.find("enabled"), std::string::npos) << after.describe();
  EXPECT_NE(after.out.find(library_), std::string::npos) << after.describe();
}

TEST_F(PreloadCommand, RefusesALibraryThatIsNotThere) {
  // Arrange
  write_file(preload_file_, others_);

  // Act
  const CliRun run = preload("enable", work_ + "/missing.so");

  // Assert
  expect_refused(run, "missing.so", others_, true);
}

TEST_F(PreloadCommand, RefusesAFileThatIsNotElf) {
  // Arrange
  const std::string text_file = work_ + "/libnotelf.so";
  write_file(text_file, "this is not a shared object\n");

  // Act
  const CliRun run = preload("enable", text_file);

  // Assert
  expect_refused(run, "not an ELF file", "", false);
}

TEST_F(PreloadCommand, RefusesAProgramInPlaceOfALibrary) {
  // Arrange: an ELF file for this machine, but an executable.
  const std::string program = work_ + "/true.so";
  fs::copy_file("/bin/true", program);

  // Act
  const CliRun run = preload("enable", program);

  // Assert
  expect_refused(run, "true.so", "", false);
}

TEST_F(PreloadCommand, RefusesALibraryThatMakesProgramsFail) {
  // Arrange
  write_file(preload_file_, others_);
  const std::string failing = work_ + "/libexit_on_load.so";
  fs::copy_file(EXIT_ON_LOAD_PATH, failing);

  // Act
  const CliRun run = preload("enable", failing);

  // Assert
  expect_refused(run, "exited with status 7", others_, true);
}

TEST_F(PreloadCommand, RefusesALibraryEveryUserCanWrite) {
  // Arrange
  ::chmod(library_.c_str(), 0757);

  // Act
  const CliRun run = preload("enable", library_);

  // Assert
  expect_refused(run, "writable by every user", "", false);
}

TEST_F(PreloadCommand, RefusesALibraryInADirectoryEveryUserCanWrite) {
  // Arrange
  const std::string open_dir = dir_.path() + "/open";
  fs::create_directory(open_dir);
  ::chmod(open_dir.c_str(), 0777);
  fs::copy_file(library_, open_dir + "/libgpulimit.so");

  // Act
  const CliRun run = preload("enable", open_dir + "/libgpulimit.so");

  // Assert
  expect_refused(run, "writable by every user", "", false);
}

TEST_F(PreloadCommand, RefusesASecondCopyOfTheInterposer) {
  // Arrange
  const std::string listed = others_ + "/usr/local/lib/libgpulimit.so\n";
  write_file(preload_file_, listed);

  // Act
  const CliRun run = preload("enable", library_);

  // Assert
  expect_refused(run, "another copy", listed, true);
}

TEST_F(PreloadCommand, RefusesAPreloadFileThatIsASymlink) {
  // Arrange
  const std::string target = work_ + "/real-preload";
  write_file(target, others_);
  fs::create_symlink(target, preload_file_);

  // Act
  const CliRun run = preload("enable", library_);

  // Assert
  EXPECT_TRUE(run.exited_with(1)) << run.describe();
  EXPECT_NE(run.err.find("symlink"), std::string::npos) << run.describe();
  EXPECT_TRUE(fs::is_symlink(preload_file_));
  EXPECT_EQ(read_file(target), others_);
}

TEST_F(PreloadCommand, EnablesAtTheSameTimeLoseNoEntry) {
  // Arrange: two libraries, each enabled by its own gpulimit, both at once.
  // Each reads the file, checks its library (which takes a while) and
  // writes: unserialised, the second write would drop the first's line.
  const std::string first = work_ + "/libfirst.so";
  const std::string second = work_ + "/libsecond.so";
  fs::copy_file(library_, first);
  fs::copy_file(library_, second);
  std::vector<gpulimit::testing::Process> children;

  // Act
  for (const std::string& library : {first, second, first, second}) {
    gpulimit::testing::Launch launch;
    launch.argv = {GPULIMIT_CLI_PATH, "preload", "enable"};
    launch.environment = {"GPULIMIT_PRELOAD_FILE=" + preload_file_, "GPULIMIT_LIBRARY=" + library};
    launch.in = gpulimit::testing::Stream::inherit();
    launch.out = gpulimit::testing::Stream::inherit();
    children.emplace_back(launch);
  }
  std::vector<int> statuses;
  for (gpulimit::testing::Process& child : children)
    statuses.push_back(child.wait().wait_status);

  // Assert
  EXPECT_EQ(statuses, std::vector<int>(children.size(), 0));
  const std::string text = read_file(preload_file_);
  EXPECT_TRUE(text == first + "\n" + second + "\n" || text == second + "\n" + first + "\n") << text;
}

TEST_F(PreloadCommand, AnUnknownActionIsAUsageError) {
  // Act
  const CliRun run = preload("on", library_);

  // Assert
  EXPECT_TRUE(run.exited_with(2)) << run.describe();
  EXPECT_EQ(count_lines(run.err), 1u) << run.describe();
  EXPECT_FALSE(fs::exists(preload_file_));
}

}  // namespace
