// A tenant's "command" in the status: a process's /proc/PID/cmdline, as one
// short line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <string>

#include "gpulimit/server/metrics/process_command.h"

namespace gpulimit::server {
namespace {

using namespace std::string_literals;

TEST(ProcessCommand, JoinsTheArgumentsWithSpaces) {
  EXPECT_EQ(command_from_cmdline("python\0train.py\0--lr\0000.1\0"s), "python train.py --lr 0.1");
}

TEST(ProcessCommand, KeepsAnEmptyArgumentAsASpace) {
  EXPECT_EQ(command_from_cmdline("a\0\0b\0"s), "a  b");
}

TEST(ProcessCommand, CutsALongCommandAt128Bytes) {
  const std::string sut = command_from_cmdline(std::string(500, 'x') + '\0');

  EXPECT_EQ(sut, std::string(kMaxCommandLength, 'x'));
}

TEST(ProcessCommand, TurnsControlCharactersIntoQuestionMarks) {
  EXPECT_EQ(command_from_cmdline("echo\0a\nb\tc\x1b[0m\0"s), "echo a?b?c?[0m");
}

TEST(ProcessCommand, ReadsThisProcesssCommandLine) {
  char self[PATH_MAX] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof self - 1), 0);
  const std::string program = std::string(self).substr(std::string(self).rfind('/') + 1);

  const std::string sut = process_command(getpid());

  EXPECT_NE(sut.find(program), std::string::npos) << sut;
  EXPECT_LE(sut.size(), kMaxCommandLength);
}

TEST(ProcessCommand, IsEmptyForAProcessThatDoesNotExist) {
  EXPECT_EQ(process_command(INT_MAX), "");
}

}  // namespace
}  // namespace gpulimit::server
