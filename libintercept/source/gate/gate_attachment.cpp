#include "gate/gate_attachment.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>

#include "gate/connection_watcher.h"
#include "gate/drain_thread.h"
#include "gate/enforcement.h"
#include "gate/gate_connection.h"
#include "gate/gate_session.h"
#include "gate/launch_gate.h"
#include "gate/launching_threads.h"
#include "gpulimit/options/limits.h"
#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/job_leader.h"
#include "gpulimit/protocol/priority.h"
#include "lookup/real_driver.h"
#include "memory/tenant.h"

extern char** environ;

namespace gpulimit::gate {
namespace {

enum class State {
  kOff,        // no server configured, or not attached yet
  kAttaching,  // one thread is attaching
  kAttached,   // a session is current
  kUngated,    // the server cannot be reached or has gone; the watcher waits for it
  kRefused,    // the server refused the process: ungated for good
  kForked,     // a forked child that has not attached yet
};

std::atomic<State> state{State::kOff};
std::atomic<GateSession*> session{nullptr};

// What the process says to every server it meets; fixed at the first
// attach, never freed.
struct Config {
  std::string socket_path;
  std::string socket_directory;  // where the watcher looks for it to come back
  std::string socket_name;
  // The compute limits asked for, as the user wrote them ("--sm 30"): named
  // when they cannot be enforced. Empty when none was asked for.
  std::string asked;
  std::string not_enforced;  // "; --sm 30 is not enforced", or empty
  // The administrator enforces (enforcement.h): a first attach that fails
  // refuses the process CUDA.
  bool enforced = false;
  protocol::Hello hello;
};
std::atomic<const Config*> config{nullptr};
std::atomic<bool> enforcement_refused{false};

constexpr const char* kRefusedCuda =
    "; the administrator enforces gpulimit on this machine, so CUDA is refused";

pthread_mutex_t configure_mu = PTHREAD_MUTEX_INITIALIZER;

// The memory caps the server granted in its last Welcome, by CUDA ordinal
// (0: none). Written by the thread attaching (one at a time): the first
// attach, or the watcher's reattach once a server is back, while
// Tenant::attach may read them on another thread (join_for_memory). The
// caps are stored before the flag (release): a reader that sees the flag
// reads for each device a cap that a Welcome to this process carried (two
// reattaches in a row may mix them). A forked child inherits them.
std::atomic<bool> memory_granted{false};
std::array<std::atomic<uint64_t>, kMaxDevices> memory_grant{};

// The last session the process attached under (sessions are never freed):
// its server's leases bind while no server does.
std::atomic<GateSession*> last_session{nullptr};

// The views without a session (launch_gate.h).
GateView open_view;
GateView detached_view;
const std::atomic<uint32_t> never_held{0};

// One line on stderr. Pieces rather than a built string: nothing to
// allocate when memory is what ran out.
void say(const char* first, const char* second = "", const char* third = "") {
  std::fprintf(stderr, "gpulimit: %s%s%s\n", first, second, third);
}

std::string asked_limits(const options::ComputeLimits& compute) {
  std::string text;
  const auto add = [&text](const std::string& flag) {
    text += text.empty() ? "" : " ";
    text += flag;
  };
  if (compute.sm_percent != 0) add("--sm " + std::to_string(compute.sm_percent));
  if (compute.weight != 1) add("--weight " + std::to_string(compute.weight));
  if (compute.priority == options::Priority::kHigh) add("--priority high");
  if (compute.priority == options::Priority::kLow) add("--priority low");
  return text;
}

void copy_text(char* out, size_t capacity, const std::string& text) {
  if (text.size() < capacity) std::memcpy(out, text.data(), text.size());
}

// The devices this process sees, in ordinal order, named by UUID, with the
// memory cap asked for on each and its size (for the server's policy).
void list_devices(protocol::Hello& hello, const options::MemoryLimits& memory) {
  int count = 0;
  auto get_count = real_function(real::cuDeviceGetCount);
  auto get_uuid = real_function(real::cuDeviceGetUuid_v2);
  auto total_mem = real_function(real::cuDeviceTotalMem_v2);
  if (!get_count || !get_uuid || get_count(&count) != CUDA_SUCCESS) count = 0;
  hello.device_count = static_cast<uint32_t>(std::clamp(count, 0, kMaxDevices));
  for (uint32_t ordinal = 0; ordinal < hello.device_count; ++ordinal) {
    CUuuid uuid{};
    // A device without its UUID cannot be matched: the server leaves it be.
    const bool named = get_uuid(&uuid, static_cast<CUdevice>(ordinal)) == CUDA_SUCCESS;
    if (named) std::memcpy(hello.uuids[ordinal], uuid.bytes, sizeof hello.uuids[ordinal]);
    size_t total = 0;
    if (!total_mem || total_mem(&total, static_cast<CUdevice>(ordinal)) != CUDA_SUCCESS) total = 0;
    hello.memory_total[ordinal] = total;
    options::DeviceUuid gpu{};
    if (named) std::memcpy(gpu.data(), uuid.bytes, gpu.size());
    const std::optional<options::Amount> amount =
        named ? memory.for_gpu(gpu, ordinal) : memory.for_device(ordinal);
    if (amount) hello.memory_requested[ordinal] = amount->resolve(total);
  }
}

const Config* make_config(const options::Limits& limits) {
  auto* made = new (std::nothrow) Config();
  if (!made) return nullptr;
  try {
    made->socket_path = limits.socket;
    const size_t slash = made->socket_path.rfind('/');  // an absolute path
    made->socket_directory = slash == 0 ? "/" : made->socket_path.substr(0, slash);
    made->socket_name = made->socket_path.substr(slash + 1);
    made->asked = asked_limits(limits.compute);
    made->enforced = limits.socket == protocol::kSystemSocketPath && administrator_enforces();
    if (made->enforced) {
      made->not_enforced = kRefusedCuda;
    } else if (!made->asked.empty()) {
      made->not_enforced = "; " + made->asked + " is not enforced";
    }
  } catch (...) {
    delete made;
    return nullptr;
  }
  protocol::Hello& hello = made->hello;
  hello = protocol::make<protocol::Hello>();
  copy_text(hello.tenant, sizeof hello.tenant, limits.tenant);
  copy_text(hello.ledger_dir, sizeof hello.ledger_dir, limits.ledger_dir);
  hello.sm_percent = limits.compute.sm_percent;
  hello.weight = limits.compute.weight;
  hello.priority = protocol::to_protocol(limits.compute.priority);
  const protocol::JobLeader leader = protocol::job_leader_in(environ);
  hello.leader_pid = leader.pid;
  hello.leader_start_ticks = leader.start_ticks;
  list_devices(hello, limits.memory);
  return made;
}

void init_view(GateView& view, uint32_t held, const std::atomic<uint32_t>* word) {
  view.held = held;
  view.always_held.store(held, std::memory_order_relaxed);
  for (const std::atomic<uint32_t>*& token : view.token)
    token = word ? word : &view.always_held;
}

void init_static_views() {
  // Open: every launch passes without a lookup. Detached: none does, so the
  // slow path runs and attaches.
  init_view(open_view, shm::token_held(1), nullptr);
  open_view.single_device = 0;
  init_view(detached_view, shm::token_held(1), &never_held);
  detached_view.single_device = 0;
  detached_view.detached = true;
}

const GateView* make_view(GateSession& attached, uint32_t device_count) {
  auto* view = new (std::nothrow) GateView();
  if (!view) return nullptr;
  init_view(*view, attached.held(), nullptr);
  view->session = &attached;
  for (int ordinal = 0; ordinal < kMaxDevices; ++ordinal)
    if (const shm::BoardDevice* device = attached.device(ordinal))
      view->token[ordinal] = &device->token;
  view->single_device = device_count == 1 ? 0 : -1;
  return view;
}

// Session views replaced by another, with their sessions: never freed (a
// launch may still read one), and kept in a list so that they stay reachable
// (a leak checker sees them held, not lost). Changed by one thread at a time,
// as the state is; no allocation, so a forked child may retire too.
const GateView* retired = nullptr;

void retire_current_view() {
  const GateView* view = current_view.load(std::memory_order_relaxed);
  if (!view || !view->session) return;  // the open and detached views are static
  view->retired_next = retired;
  retired = view;
}

// Ungated until a server is back (or for good once refused): launches pass.
void go_ungated(State next) {
  // A process that never attached stays without a view: nothing to gate.
  if (current_view.load(std::memory_order_relaxed) != nullptr || next == State::kUngated) {
    retire_current_view();
    current_view.store(&open_view, std::memory_order_release);
  }
  state.store(next, std::memory_order_release);
}

// Joins the server; called by one thread at a time (the state is
// kAttaching). `quiet`: a retry of the watcher, which says nothing more.
Reattach attach_now(const Config& c, bool quiet) {
  protocol::Hello hello = c.hello;
  hello.claimed_pid = getpid();
  JoinResult joined = join_server(c.socket_path, hello);
  const char* not_enforced = c.not_enforced.c_str();

  // Under enforcement a first attach either joins or refuses the process
  // CUDA; later ones (the server went and comes back) retry as anywhere.
  if (c.enforced && !quiet && joined.outcome != JoinResult::Outcome::kWelcome) {
    say(joined.reason.c_str(), not_enforced);
    enforcement_refused.store(true, std::memory_order_release);
    go_ungated(State::kRefused);
    return Reattach::kRefused;
  }
  switch (joined.outcome) {
    case JoinResult::Outcome::kRefused:
      say(joined.reason.c_str(), not_enforced);
      go_ungated(State::kRefused);
      return Reattach::kRefused;
    case JoinResult::Outcome::kUnreachable:
    case JoinResult::Outcome::kNoAnswer:
      if (!quiet && !c.asked.empty())
        say(joined.reason.c_str(), not_enforced, " until gpulimitd is up");
      go_ungated(State::kUngated);
      return joined.outcome == JoinResult::Outcome::kNoAnswer ? Reattach::kNoAnswer
                                                              : Reattach::kUnreachable;
    case JoinResult::Outcome::kWelcome:
      break;
  }
  for (uint32_t ordinal = 0; ordinal < hello.device_count; ++ordinal)
    memory_grant[ordinal].store(joined.welcome.memory_cap[ordinal], std::memory_order_relaxed);
  memory_granted.store(true, std::memory_order_release);
  // What the policy lowered, said once: by the job's first process (the
  // server sends it to the tenant's first only), not again on a reattach.
  if (!quiet && joined.welcome.notice[0] != '\0') {
    joined.welcome.notice[sizeof joined.welcome.notice - 1] = '\0';
    say(joined.welcome.notice);
  }
  prepare_launch_barrier();
  auto* attached = new (std::nothrow) GateSession(std::move(joined), hello);
  const GateView* view = attached ? make_view(*attached, hello.device_count) : nullptr;
  if (view) {
    session.store(attached, std::memory_order_release);
    last_session.store(attached, std::memory_order_release);
    current_view.store(view, std::memory_order_release);
    state.store(State::kAttached, std::memory_order_release);
    // Started once the view is out: the first Ack proves the process gated.
    if (start_drain_threads(*attached)) return Reattach::kAttached;
    session.store(nullptr, std::memory_order_release);
  }
  // Without its drain threads the process could not give a device back:
  // leave the server rather than hold it up.
  go_ungated(State::kRefused);
  if (attached) {
    attached->close();
    attached->connection().close();
  }
  say("cannot start the launch gate (out of memory or threads)", not_enforced);
  return Reattach::kRefused;
}

// Attaches, then makes sure somebody watches the connection (or waits for
// the server): without that, a server that goes would leave launches waiting.
void attach_and_watch(const Config& c) {
  const Reattach outcome = attach_now(c, false);
  if (outcome == Reattach::kRefused || ensure_connection_watcher()) return;
  if (GateSession* attached = session.exchange(nullptr, std::memory_order_acq_rel)) {
    go_ungated(State::kRefused);
    attached->close();
    attached->connection().close();
  } else {
    go_ungated(State::kRefused);
  }
  say("cannot start the launch gate's watcher thread; launches are not time-sliced");
}

void after_fork_in_child() {
  const Config* c = config.load(std::memory_order_acquire);
  if (!c) return;
  // A parent thread may have held it while attaching.
  const pthread_mutex_t unlocked = PTHREAD_MUTEX_INITIALIZER;
  std::memcpy(static_cast<void*>(&configure_mu), &unlocked, sizeof unlocked);
  forget_other_threads_after_fork();
  forget_connection_watcher_after_fork();
  if (GateSession* inherited = session.exchange(nullptr, std::memory_order_relaxed))
    inherited->connection().close_in_forked_child();
  // Refused at the first attach: the child would be refused too.
  if (current_view.load(std::memory_order_relaxed) == nullptr) return;
  state.store(State::kForked, std::memory_order_relaxed);
  retire_current_view();
  current_view.store(&detached_view, std::memory_order_relaxed);
}

}  // namespace

GateSession* current_session() noexcept {
  return session.load(std::memory_order_acquire);
}

LeaseView lease_for(int ordinal) noexcept {
  GateSession* current = session.load(std::memory_order_acquire);
  if (!current) current = last_session.load(std::memory_order_acquire);
  if (!current) return {};
  return {current, current->lease(ordinal)};
}

const std::string& server_socket_directory() noexcept {
  return config.load(std::memory_order_acquire)->socket_directory;
}

const std::string& server_socket_name() noexcept {
  return config.load(std::memory_order_acquire)->socket_name;
}

void server_gone(GateSession& gone) noexcept {
  GateSession* expected = &gone;
  if (!session.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel)) return;
  // Launches pass from here on; then every thread waiting in the session
  // (launches, drain threads) wakes and sees it.
  go_ungated(State::kUngated);
  gone.close();
  gone.connection().close();
  const Config& c = *config.load(std::memory_order_acquire);
  if (!c.asked.empty())
    say("gpulimitd has gone; ", c.asked.c_str(), " is not enforced until it is back");
}

Reattach attach_again() noexcept {
  State expected = State::kUngated;
  if (!state.compare_exchange_strong(expected, State::kAttaching, std::memory_order_acq_rel))
    return expected == State::kAttached ? Reattach::kAttached : Reattach::kRefused;
  return attach_now(*config.load(std::memory_order_acquire), true);
}

void attach_in_forked_child() noexcept {
  State expected = State::kForked;
  if (!state.compare_exchange_strong(expected, State::kAttaching, std::memory_order_acq_rel))
    return;
  attach_and_watch(*config.load(std::memory_order_acquire));
}

namespace {

// The first attach: fixes what the process says to every server, and joins.
void configure_and_attach(const options::Limits& limits) {
  static std::atomic<bool> without_server{false};
  if (without_server.load(std::memory_order_relaxed)) return;
  pthread_mutex_lock(&configure_mu);
  if (!config.load(std::memory_order_relaxed) && !without_server.load(std::memory_order_relaxed)) {
    if (limits.socket.empty()) {
      without_server.store(true, std::memory_order_relaxed);
    } else if (const Config* c = make_config(limits)) {
      init_static_views();
      static bool registered = false;
      if (!registered) registered = pthread_atfork(nullptr, nullptr, after_fork_in_child) == 0;
      config.store(c, std::memory_order_release);
      state.store(State::kAttaching, std::memory_order_relaxed);
      attach_and_watch(*c);
    }
  }
  pthread_mutex_unlock(&configure_mu);
}

}  // namespace

void attach_after_init() noexcept {
  if (config.load(std::memory_order_acquire)) {
    attach_in_forked_child();  // nothing to do unless this is a forked child
    return;
  }
  // Read before configure_mu: Tenant::attach holds its lock while it takes
  // configure_mu (join_for_memory), never the other way round.
  options::Limits limits;
  try {
    limits = Tenant::read_limits();
  } catch (...) {
  }
  configure_and_attach(limits);
}

bool refused_under_enforcement() noexcept {
  return enforcement_refused.load(std::memory_order_acquire);
}

bool join_for_memory(const options::Limits& limits, uint64_t* caps, int count) noexcept {
  if (!config.load(std::memory_order_acquire)) configure_and_attach(limits);
  if (!memory_granted.load(std::memory_order_acquire)) return false;
  for (int ordinal = 0; ordinal < count; ++ordinal)
    caps[ordinal] = ordinal < kMaxDevices
                        ? memory_grant[static_cast<size_t>(ordinal)].load(std::memory_order_relaxed)
                        : 0;
  return true;
}

}  // namespace gpulimit::gate
