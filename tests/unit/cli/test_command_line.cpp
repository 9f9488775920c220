#include <gtest/gtest.h>

#include <initializer_list>

#include "command_line.h"
#include "help_text.h"

namespace gpulimit::cli {
namespace {

constexpr std::size_t kMem = static_cast<std::size_t>(options::OptionId::kMem);
constexpr std::size_t kDeviceMem = static_cast<std::size_t>(options::OptionId::kDeviceMem);

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

TEST(CommandLine, HelpAndVersionNeedNoCommand) {
  for (const char* flag : {"--help", "-h", "--version"}) {
    Invocation sut;
    std::string error;
    ASSERT_TRUE(parse({flag}, sut, error)) << error;
    EXPECT_TRUE(sut.help || sut.version);
  }
}

TEST(CommandLine, RefusesMistakesInOneLine) {
  EXPECT_EQ(error_of({"--mem", "1G"}),
            "no command to run (usage: gpulimit [--mem SIZE] [--device-mem LIST] -- COMMAND "
            "[ARGUMENT...]; see gpulimit --help)");
  EXPECT_EQ(error_of({"--mem", "1G", "--"}).substr(0, 17), "no command to run");
  EXPECT_EQ(error_of({"--memm", "1G", "--", "x"}).substr(0, 21), "unknown option --memm");
  EXPECT_EQ(error_of({"--mem", "1G", "--mem", "1G", "--", "x"}), "--mem is given twice");
  EXPECT_EQ(error_of({"--mem", "--", "x"}), "--mem needs a value (SIZE)");
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
