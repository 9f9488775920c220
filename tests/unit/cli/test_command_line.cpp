#include <gtest/gtest.h>

#include <initializer_list>

#include "common/help_text.h"
#include "run/command_line.h"

namespace gpulimit::cli {
namespace {

constexpr std::size_t kMem = static_cast<std::size_t>(options::OptionId::kMem);
constexpr std::size_t kDeviceMem = static_cast<std::size_t>(options::OptionId::kDeviceMem);
constexpr std::size_t kSm = static_cast<std::size_t>(options::OptionId::kSm);
constexpr std::size_t kWeight = static_cast<std::size_t>(options::OptionId::kWeight);
constexpr std::size_t kPriority = static_cast<std::size_t>(options::OptionId::kPriority);
constexpr std::size_t kSocket = static_cast<std::size_t>(options::OptionId::kSocket);

const std::string kUsage =
    "(usage: gpulimit [OPTION...] [--] COMMAND [ARGUMENT...], or gpulimit status [--json]; see "
    "gpulimit --help)";

// argv as main receives it.
class Arguments {
 public:
  Arguments(std::initializer_list<std::string> args) : text_{"gpulimit"} {
    text_.insert(text_.end(), args);
    for (std::string& arg : text_)
      pointers_.push_back(arg.data());
    pointers_.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(text_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> text_;
  std::vector<char*> pointers_;
};

bool parse(Arguments args, Invocation& out, std::string& error) {
  return parse_command_line(args.argc(), args.argv(), out, error);
}

std::string error_of(Arguments args) {
  Invocation invocation;
  std::string error;
  EXPECT_FALSE(parse_command_line(args.argc(), args.argv(), invocation, error));
  return error;
}

TEST(CommandLine, FlagsThenTheCommandAfterTheSeparator) {
  Invocation sut;
  std::string error;
  ASSERT_TRUE(
      parse({"--mem", "10G", "--device-mem=0=1G", "--", "python", "-u", "--mem", "x"}, sut, error))
      << error;
  EXPECT_EQ(sut.flag_text[kMem], "10G");
  EXPECT_EQ(sut.flag_text[kDeviceMem], "0=1G");
  EXPECT_EQ(sut.command, (std::vector<std::string>{"python", "-u", "--mem", "x"}));
  EXPECT_EQ(sut.flag_values()[kMem], "10G");
}

TEST(CommandLine, TheCommandWithoutTheSeparator) {
  Invocation sut;
  std::string error;
  ASSERT_TRUE(parse({"--mem", "1G", "python", "train.py", "--mem", "2G"}, sut, error)) << error;
  EXPECT_EQ(sut.flag_text[kMem], "1G");
  EXPECT_EQ(sut.command, (std::vector<std::string>{"python", "train.py", "--mem", "2G"}));
}

TEST(CommandLine, AFlagNotGivenHasNoText) {
  Invocation sut;
  std::string error;
  ASSERT_TRUE(parse({"--", "true"}, sut, error)) << error;
  EXPECT_FALSE(sut.flag_text[kMem]);
  EXPECT_FALSE(sut.flag_values()[kDeviceMem]);
}

TEST(CommandLine, ComputeFlagsAndNoServer) {
  Invocation sut;
  std::string error;
  ASSERT_TRUE(parse({"--sm", "30", "--weight=2", "--priority", "high", "--mem", "10G",
                     "--no-server", "--", "python", "--sm", "1"},
                    sut, error))
      << error;
  EXPECT_EQ(sut.flag_text[kSm], "30");
  EXPECT_EQ(sut.flag_text[kWeight], "2");
  EXPECT_EQ(sut.flag_text[kPriority], "high");
  EXPECT_EQ(sut.flag_text[kMem], "10G");
  EXPECT_TRUE(sut.no_server);
  EXPECT_EQ(sut.command, (std::vector<std::string>{"python", "--sm", "1"}));

  Invocation plain;
  ASSERT_TRUE(parse({"--", "true"}, plain, error)) << error;
  EXPECT_FALSE(plain.no_server);
  EXPECT_FALSE(plain.flag_text[kSm]);
}

TEST(CommandLine, TheSocketHasNoFlag) {
  EXPECT_EQ(error_of({"--socket", "/s", "--", "x"}).substr(0, 23), "unknown option --socket");
  Invocation sut;
  std::string error;
  ASSERT_TRUE(parse({"--", "x"}, sut, error)) << error;
  EXPECT_FALSE(sut.flag_text[kSocket]);
}

// main.cpp looks for a subcommand in the first argument only; from there
// on, a subcommand's name is the command's.
TEST(CommandLine, StatusAfterTheFirstArgumentIsACommand) {
  Invocation sut;
  std::string error;
  ASSERT_TRUE(parse({"--", "status"}, sut, error)) << error;
  EXPECT_EQ(sut.command, std::vector<std::string>{"status"});

  Invocation after_flag;
  ASSERT_TRUE(parse({"--mem", "1G", "status", "--json"}, after_flag, error)) << error;
  EXPECT_EQ(after_flag.command, (std::vector<std::string>{"status", "--json"}));
}

TEST(CommandLine, HelpAndVersionNeedNoCommand) {
  for (const char* flag : {"--help", "-h", "--version"}) {
    Invocation sut;
    std::string error;
    ASSERT_TRUE(parse({flag}, sut, error)) << error;
    EXPECT_TRUE(sut.help || sut.version);
  }
}

TEST(CommandLine, RefusesMistakesInOneLine) {
  EXPECT_EQ(error_of({"--mem", "1G"}), "no command to run " + kUsage);
  EXPECT_EQ(error_of({"--no-server"}), "no command to run " + kUsage);
  EXPECT_EQ(error_of({"--memm", "1G", "--", "x"}), "unknown option --memm " + kUsage);
  EXPECT_EQ(error_of({"--mem", "1G", "--"}).substr(0, 17), "no command to run");
  EXPECT_EQ(error_of({"--memm", "1G", "--", "x"}).substr(0, 21), "unknown option --memm");
  EXPECT_EQ(error_of({"--mem", "1G", "--mem", "1G", "--", "x"}), "--mem is given twice");
  EXPECT_EQ(error_of({"--mem", "--", "x"}), "--mem needs a value (SIZE)");
  EXPECT_EQ(error_of({"--sm", "--", "x"}), "--sm needs a value (PERCENT)");
  EXPECT_EQ(error_of({"--weight", "1", "--weight", "2", "--", "x"}), "--weight is given twice");
  EXPECT_EQ(error_of({"--priority", "--", "x"}), "--priority needs a value (PRIORITY)");
  const std::string missing_value = error_of({"--mem"});
  EXPECT_NE(missing_value.find("--mem"), std::string::npos) << missing_value;
  EXPECT_EQ(missing_value.find('\n'), std::string::npos) << missing_value;
}

TEST(HelpText, ShowsEveryFlagAndVariableOfTheTable) {
  const std::string page = help_text();
  for (const options::OptionSpec& spec : options::kOptionTable) {
    EXPECT_NE(page.find(spec.variable), std::string::npos) << spec.variable;
    if (!spec.flag.empty()) {
      EXPECT_NE(page.find(std::string(spec.flag) + " " + std::string(spec.metavar)),
                std::string::npos)
          << spec.flag;
    }
    if (!spec.hami_alias.empty()) {
      EXPECT_NE(page.find(spec.hami_alias), std::string::npos) << spec.hami_alias;
    }
  }
}

TEST(HelpText, ShowsTheServerAndStatus) {
  const std::string page = help_text();
  for (const char* text :
       {"gpulimit status [--json]", "--no-server", "Time-slicing", "GPULIMIT_SERVER=PATH",
        "GPULIMIT_SOCKET=PATH", "CUDA_DEVICE_SM_LIMIT", "0 means no cap", "XDG_RUNTIME_DIR",
        "/run/gpulimit/gpulimitd.sock", "gpulimitd.log", "--sm PERCENT", "--weight WEIGHT",
        "--priority PRIORITY", "PRIORITY is high, normal or low", "from 1 to 1000"})
    EXPECT_NE(page.find(text), std::string::npos) << text;
}

TEST(HelpText, FitsAnEightyColumnTerminal) {
  const std::string page = help_text();
  size_t start = 0;
  while (start < page.size()) {
    size_t end = page.find('\n', start);
    if (end == std::string::npos) end = page.size();
    EXPECT_LE(end - start, 80u) << page.substr(start, end - start);
    start = end + 1;
  }
}

}  // namespace
}  // namespace gpulimit::cli
