#include "help_text.h"

#include <string_view>

#include "gpulimit/options/limits.h"
#include "gpulimit/options/option_table.h"

namespace gpulimit::cli {
namespace {

using options::OptionId;
using options::OptionSpec;
using options::ValueKind;

constexpr std::string_view kDescription = R"(NAME
    gpulimit - run a command as a tenant with a GPU memory cap

SYNOPSIS
    gpulimit [--mem SIZE] [--device-mem LIST] [--] COMMAND [ARGUMENT...]
    gpulimit --help | --version

DESCRIPTION
    Runs COMMAND as a new tenant, with libgpulimit.so preloaded to hook the
    CUDA driver. A tenant is one job: COMMAND and every process it starts
    (shells, DataLoader workers, torchrun ranks), which inherit the tenant
    through the environment. A cap is the tenant's as a whole: its
    processes together never allocate more of a device's memory. An
    allocation past the cap fails as the device being full would fail it
    (CUDA_ERROR_OUT_OF_MEMORY), and the driver and NVML report the cap as
    the device's total memory (cuMemGetInfo, cuDeviceTotalMem,
    nvmlDeviceGetMemoryInfo).

    Counted today: linear, pitched and managed memory, stream-ordered
    allocations, VMM physical allocations (cuMemCreate) and arrays. Not yet:
    graph memory, context and module overhead, and memory a pool keeps after
    its allocations are freed.

    gpulimit checks everything first; on any mistake it prints one line and
    runs nothing. Then it becomes COMMAND (exec): COMMAND keeps gpulimit's
    process id, and its exit status and signals are COMMAND's own.

    Device indices are CUDA device ordinals as the job sees them, after
    CUDA_VISIBLE_DEVICES: with CUDA_VISIBLE_DEVICES=2,3, device 0 is the
    machine's GPU 2.

OPTIONS
)";

constexpr std::string_view kExitStatus = R"(
    -h, --help
        Print this page and exit.

    --version
        Print gpulimit's version and exit.

EXIT STATUS
    COMMAND's own status once it runs; a COMMAND killed by a signal is seen
    by the caller as killed by that signal. Before that:
    2      a malformed option or value, an unknown device, conflicting
           limits, or libgpulimit.so not found; nothing was run
    126    COMMAND was found but could not be run
    127    COMMAND was not found

ENVIRONMENT
    gpulimit sets these for COMMAND, and libgpulimit.so reads them in every
    process of the job. Set already (by an enclosing gpulimit or a
    container), they are the starting point: a flag replaces the variable
    it sets, and what gpulimit passes on is checked and normalised
    (10240M is written 10G). An empty variable counts as unset.
)";

constexpr std::string_view kOtherVariables = R"(
    GPULIMIT_LIBRARY=PATH
        The libgpulimit.so to preload, instead of the one installed beside
        gpulimit (<bin>/../lib/libgpulimit.so).

    CUDA_VISIBLE_DEVICES
        Read as the CUDA driver reads it (indices, GPU UUIDs or unique
        prefixes of them; the first invalid entry ends the list) to know
        which devices the job sees. To check --device-mem, gpulimit asks
        NVML (libnvidia-ml.so.1) for the machine's GPUs.

    LD_PRELOAD
        gpulimit puts libgpulimit.so first and keeps the other entries, less
        any other copy of libgpulimit.so.
)";

constexpr std::string_view kExamples = R"(
EXAMPLES
    gpulimit --mem 10G -- python train.py
        PyTorch in train.py, and every worker it starts, see GPUs of 10 GiB.

    gpulimit --mem 50% -- torchrun --nproc-per-node 2 train.py
        Both ranks together hold at most half of each device.

    gpulimit --mem 8G --device-mem 1=20G -- ./solver
        8 GiB on every device but device 1, which gets 20 GiB.

    CUDA_VISIBLE_DEVICES=2,3 gpulimit --device-mem 0=10G,1=30% -- ./job
        10 GiB of the machine's GPU 2 and 30% of its GPU 3.
)";

// What a value of each kind is: the grammar of gpulimit/options/values.h.
std::string grammar(ValueKind kind) {
  switch (kind) {
    case ValueKind::kAmount:
      return "SIZE is a number of bytes, optionally followed by K, M, G or T\n"
             "(binary units, either case: 10G is 10 GiB), or a whole percentage\n"
             "from 1% to 100% of each device's memory, such as 50%.";
    case ValueKind::kDeviceAmounts:
      return "LIST is INDEX=SIZE entries separated by commas, each device at\n"
             "most once; INDEX is a device index from 0 to " +
             std::to_string(options::kMaxDeviceIndex) + ", SIZE as for --mem.";
    case ValueKind::kTenantId:
      return "ID is 1 to 64 characters of A-Z a-z 0-9 . _ -";
    case ValueKind::kAbsolutePath:
      return "DIR is an absolute path.";
  }
  return "";
}

// What the page says of a variable beyond its row's line and grammar.
std::string variable_details(const OptionSpec& spec) {
  switch (spec.id) {
    case OptionId::kMem:
      return "HAMi's name for it, " + std::string(spec.hami_alias) +
             ", is read too (values\n"
             "such as 2048m, 10g or plain bytes); the two must agree.";
    case OptionId::kDeviceMem:
      return "HAMi's " + std::string(spec.hami_alias) +
             "<INDEX> is read too, as the\n"
             "entry for device INDEX; the two must agree.";
    case OptionId::kTenant:
      return "Set already, it is kept and the job joins that tenant; otherwise\n"
             "gpulimit makes a new id, <uid>-<pid>-<16 hex digits>.";
    case OptionId::kLedgerDir:
      return "Every process of a tenant must see the same one.";
  }
  return "";
}

void append_paragraph(std::string& page, std::string_view text) {
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    page += "        ";
    page += text.substr(0, newline);
    page += '\n';
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
  }
}

}  // namespace

std::string help_text() {
  std::string page(kDescription);
  const char* separator = "";
  for (const OptionSpec& spec : options::kOptionTable) {
    if (spec.flag.empty()) continue;
    page += separator;
    separator = "\n";
    page += "    " + std::string(spec.flag) + " " + std::string(spec.metavar) + "\n";
    append_paragraph(page, std::string(spec.help) + ".");
    append_paragraph(page, grammar(spec.kind));
    append_paragraph(page, "Examples: " + std::string(spec.examples) + ".");
  }
  page += kExitStatus;
  for (const OptionSpec& spec : options::kOptionTable) {
    page += "\n    " + std::string(spec.variable) + "=" + std::string(spec.metavar) + "\n";
    if (spec.flag.empty()) {
      append_paragraph(page, std::string(spec.help) + ".");
      append_paragraph(page, grammar(spec.kind));
    } else {
      append_paragraph(page, "What " + std::string(spec.flag) + " sets.");
    }
    append_paragraph(page, variable_details(spec));
  }
  page += kOtherVariables;
  page += kExamples;
  return page;
}

}  // namespace gpulimit::cli
