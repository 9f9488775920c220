#include "common/help_text.h"

#include <string_view>

#include "gpulimit/options/limits.h"
#include "gpulimit/options/option_table.h"
#include "gpulimit/options/values.h"

namespace gpulimit::cli {
namespace {

using options::OptionId;
using options::OptionSpec;
using options::ValueKind;

constexpr std::string_view kDescription = R"(NAME
    gpulimit - run a command as a tenant with GPU memory and time limits

SYNOPSIS
    gpulimit [--mem SIZE] [--device-mem LIST] [--sm PERCENT]
             [--weight WEIGHT] [--priority PRIORITY] [--no-server]
             [--] COMMAND [ARGUMENT...]
    gpulimit status [--json]
    gpulimit top [--interval SECONDS] [--batch] [--iterations N]
    gpulimit usage [--db PATH] [--since WHEN] [--by user|group|tenant]
                   [--json|--csv]
    gpulimit preload enable|disable|status
    gpulimit --help | --version

DESCRIPTION
    Runs COMMAND as a new tenant, with libgpulimit.so preloaded to hook the
    CUDA driver. A tenant is one job: COMMAND and every process it starts
    (shells, DataLoader workers, torchrun ranks), which inherit the tenant
    through the environment. Limits are the tenant's as a whole.

    Memory. The tenant's processes together never allocate more of a
    device's memory than its cap. An allocation past the cap fails as the
    device being full would fail it (CUDA_ERROR_OUT_OF_MEMORY), and the
    driver and NVML report the cap as the device's total memory
    (cuMemGetInfo, cuDeviceTotalMem, nvmlDeviceGetMemoryInfo). Counted:
    linear, pitched and managed memory, stream-ordered allocations, VMM
    physical allocations (cuMemCreate), arrays, what memory pools keep,
    graph memory (from a graph's instantiation until what it allocated is
    freed and trimmed) and contexts. Not counted: module memory and heaps
    grown by cuCtxSetLimit (docs/memory-accounting.md). Memory caps need no
    server. Where the administrator's policy gives the job's user or group
    a memory_total, an allocation also fails once the jobs under that total
    hold all of it on the device together, and the job's cap there is at
    most the total.

    Time-slicing. gpulimitd, a token server, lets one tenant at a time
    launch work on a device, for a quantum of some tens of milliseconds; a
    kernel launch of any other tenant waits for its turn. Work a tenant
    queued before its turn ended is charged to it, so shares hold over
    time. --sm caps a tenant's share of a device's time even when the
    device is otherwise idle; --weight shares the time of a contended
    device in proportion to the weights of the tenants that want it, an
    idle tenant's time going to the others; --priority lets a waiting
    tenant go first when a quantum ends. A tenant alone on a device without
    a cap keeps it and is never slowed.

    The server. gpulimit hands the job GPULIMIT_SOCKET, the socket of the
    gpulimitd it is time-sliced by: the one the caller's GPULIMIT_SOCKET
    names; else the system's, if one listens at
    /run/gpulimit/gpulimitd.sock; else the user's own, at
    $XDG_RUNTIME_DIR/gpulimit/gpulimitd.sock (or
    /tmp/gpulimit-<uid>/gpulimitd.sock without XDG_RUNTIME_DIR), started
    when nobody listens there. That one runs in a session of its own, not
    as a process of the job, writes to gpulimitd.log beside its socket and
    exits after 10 minutes without tenants. With no server to be had, a job
    that asked for GPU time (--sm, --weight, --priority or their variables)
    is not run; any other runs with its memory caps only, and gpulimit says
    so in one line. --no-server runs a job without time-slicing on
    purpose, and without that line.

    gpulimit checks everything first; on any mistake it prints one line and
    runs nothing. Then it becomes COMMAND (exec): COMMAND keeps gpulimit's
    process id, and its exit status and signals are COMMAND's own.

    Device indices are CUDA device ordinals as the job sees them, after
    CUDA_VISIBLE_DEVICES: with CUDA_VISIBLE_DEVICES=2,3, device 0 is the
    machine's GPU 2. Before the job starts, gpulimit asks the driver which
    GPU each index names and hands the caps on by UUID, so that a process
    of the job that narrows CUDA_VISIBLE_DEVICES (a launcher's workers)
    keeps each GPU's cap. --device-mem also takes UUIDs as nvidia-smi -L
    writes them: --device-mem GPU-4f1e...=10G.

COMMANDS
    status [--json]
        Show what the gpulimitd a job would use knows, found as above but
        never started: the server (process id, user or system mode, uptime,
        quantum); each device with the tenant holding it and the number
        waiting; each tenant with its user, processes and limits and, per
        device, its memory used and cap, and the share of GPU time it is to
        get and has had; the fair-share tree, when there is one to show;
        and each group's and user's memory_total with what its tenants use
        and are leased. --json prints the server's answer, a JSON object,
        as it is.

    top [--interval SECONDS] [--batch] [--iterations N]
        A live view of the same server, refreshed every SECONDS (default
        1, from 0.1 to 3600). Per device, a row per tenant: its user,
        process ids, memory used and cap with a bar (all '!' past the
        cap), its share of the device's time over the last 10 s and the
        share it is to get, the time it has spent waiting for its turn, the
        allocations refused at its cap (OOM), and its command; "-" where the
        server does not say. Keys: m, s, w, u and o sort by memory, share,
        wait, user and OOM; q quits. Columns that do not fit the terminal
        are shortened, then left out, and the view follows a resized
        terminal. The terminal is put back as it was on q, Ctrl-C,
        SIGTERM, SIGHUP and errors. A server that is not there, or goes
        away, shows as "no server" and is asked again at each refresh;
        none is started. --batch prints plain text frames, a blank line
        between them, with no terminal needed and no escape sequences;
        lines are cut to COLUMNS if set, else to the terminal's width on a
        terminal, else to 512. --iterations N exits after N frames;
        without it top runs until quit or interrupted.

    usage [--db PATH] [--since WHEN] [--by user|group|tenant] [--json|--csv]
        What the usage database of a gpulimitd run with --usage-db PATH
        (default /var/lib/gpulimit/usage.db, the system server's) says was
        used, a line per user (default), group or tenant: the tenants
        recorded and how many still run, GPU-hours (time holding a device's
        turn, over all devices), GiB-hours (memory its ledger counted over
        time, sampled every --usage-interval-ms of the server), the most
        memory one tenant held on one device, and the allocations refused
        at a cap. A tenant counts whole in every group of its user, and in
        any period it overlaps. --since WHEN keeps the tenants running at
        or after WHEN: YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS] in local time,
        or an age (7d, 12h, 30m). --json prints one JSON object, --csv
        comma-separated values with a header line. It only reads the
        database, and needs read access to it.

    preload enable|disable|status
        Whether every program started on the machine preloads
        libgpulimit.so, the one gpulimit would give a job, through
        /etc/ld.so.preload; then a job needs no gpulimit to be counted, and
        takes its limits from its environment. Opt-in, and enable and
        disable are for root only. enable first checks the library: a
        regular ELF shared object for this machine, owned by root, in
        directories only root can write to, and /bin/true started with it
        preloaded must exit 0 and print nothing. It then writes the file
        anew beside the old one and renames it into place, the library's
        line first and every other entry as it was; nothing is written when
        the library is listed already, and another copy of libgpulimit.so
        listed is refused. disable removes the lines of libgpulimit.so and
        nothing else, even when the library is gone. status says which
        libgpulimit.so the file lists. On any failure the file is left as
        it was and one line says why. Exit status: 0 done or nothing to do,
        1 refused or failed, 2 a malformed command line.

OPTIONS
)";

constexpr std::string_view kOtherOptions = R"(
    --no-server
        Run COMMAND without time-slicing: no gpulimitd is looked for or
        started, and the job is given no GPULIMIT_SOCKET. Memory caps
        still hold. Refused together with a limit of GPU time.

    -h, --help
        Print this page and exit.

    --version
        Print gpulimit's version and exit.

EXIT STATUS
    COMMAND's own status once it runs; a COMMAND killed by a signal is seen
    by the caller as killed by that signal. Before that:
    2      a malformed option or value, an unknown device, conflicting
           limits, libgpulimit.so not found, or a limit of GPU time with
           no gpulimitd to enforce it; nothing was run
    126    COMMAND was found but could not be run
    127    COMMAND was not found
    gpulimit status: 0 once shown, 1 when no gpulimitd runs or it does not
    answer, 2 for a malformed command line or GPULIMIT_SOCKET.
    gpulimit top: 0 on q or once N frames are shown, 1 when the last frame
    of --batch had no server's status or the terminal went away, 2 for a
    malformed command line or GPULIMIT_SOCKET, or no terminal for the
    view.
    gpulimit usage: 0 once shown, 1 when the database is missing,
    unreadable or not a usage database, 2 for a malformed command line.

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

    GPULIMIT_SERVER=PATH
        The gpulimitd to start, instead of the one installed beside
        gpulimit (<bin>/gpulimitd); a name without a '/' is looked up in
        PATH. It is run as PATH --socket SOCKET --idle-exit-s SECONDS, in
        the caller's environment less LD_PRELOAD, CUDA_VISIBLE_DEVICES and
        the variables above.

    XDG_RUNTIME_DIR
        The user's own server keeps its socket and log in
        $XDG_RUNTIME_DIR/gpulimit; without XDG_RUNTIME_DIR, in
        /tmp/gpulimit-<uid>.

    CUDA_VISIBLE_DEVICES
        Read as the CUDA driver reads it (indices, GPU UUIDs or unique
        prefixes of them; the first invalid entry ends the list) to know
        which devices the job sees. To check --device-mem, gpulimit asks
        NVML (libnvidia-ml.so.1) for the machine's GPUs; to bind its
        indices to GPUs, the driver (libcuda.so.1, in a child process).

    LD_PRELOAD
        gpulimit puts libgpulimit.so first and keeps the other entries, less
        any other copy of libgpulimit.so.

    GPULIMIT_PRELOAD_FILE=PATH
        For testing: the file gpulimit preload edits instead of
        /etc/ld.so.preload.

FILES
    /run/gpulimit/gpulimitd.sock
        The system server's socket.

    /etc/ld.so.preload
        What every program preloads; gpulimit preload edits it.

    /var/lib/gpulimit/usage.db
        The system server's usage database, which gpulimit usage reads.

    $XDG_RUNTIME_DIR/gpulimit/, /tmp/gpulimit-<uid>/
        The user's own server: gpulimitd.sock and gpulimitd.log. The
        directory must belong to the user and be writable by nobody else.
)";

constexpr std::string_view kExamples = R"(
EXAMPLES
    gpulimit --mem 10G -- python train.py
        PyTorch in train.py, and every worker it starts, see GPUs of 10 GiB.

    gpulimit --mem 10G --sm 30 -- python train.py
        As above, and at most 30% of each device's time, even when no
        other job wants it.

    gpulimit --weight 3 --priority high -- python serve.py
        Three times the share of a weight-1 job on a contended device, and
        the device first when both wait.

    gpulimit --mem 50% -- torchrun --nproc-per-node 2 train.py
        Both ranks together hold at most half of each device.

    gpulimit --mem 8G --device-mem 1=20G -- ./solver
        8 GiB on every device but device 1, which gets 20 GiB.

    CUDA_VISIBLE_DEVICES=2,3 gpulimit --device-mem 0=10G,1=30% -- ./job
        10 GiB of the machine's GPU 2 and 30% of its GPU 3.

    gpulimit status
        Who holds which device, who waits, and the share each job gets.

    gpulimit top --batch --iterations 1
        The same as one frame of the live view, in plain text.

    gpulimit usage --since 7d --by group
        GPU-hours and GiB-hours of each group's jobs over the last week.
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
    case ValueKind::kPercent:
      return "PERCENT is a whole number from 1 to 100, with or without '%'.";
    case ValueKind::kWeight:
      return "WEIGHT is a whole number from 1 to " + std::to_string(options::kMaxWeight) + ".";
    case ValueKind::kPriority:
      return "PRIORITY is high, normal or low.";
    case ValueKind::kTenantId:
      return "ID is 1 to 64 characters of A-Z a-z 0-9 . _ -";
    case ValueKind::kAbsolutePath:
      return "DIR is an absolute path.";
    case ValueKind::kSocketPath:
      return "PATH is an absolute path of at most " +
             std::to_string(options::kMaxSocketPathLength) + " bytes.";
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
    case OptionId::kSm:
      return "HAMi's name for it, " + std::string(spec.hami_alias) +
             ", is read too (an integer\n"
             "percentage, where 0 means no cap); the two must agree.";
    case OptionId::kWeight:
    case OptionId::kPriority:
      return "";
    case OptionId::kLedgerDir:
      return "Every process of a tenant must see the same one.";
    case OptionId::kSocket:
      return "Set already, it names the server the job uses, which must be\n"
             "listening: gpulimit starts none there. --no-server leaves it out.";
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
  page += kOtherOptions;
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
