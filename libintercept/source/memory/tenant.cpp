#include "memory/tenant.h"

#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gate/enforcement.h"
#include "gate/gate_attachment.h"
#include "gate/gate_session.h"
#include "gpulimit/options/environment.h"
#include "gpulimit/options/option_table.h"
#include "gpulimit/options/values.h"
#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/job_leader.h"
#include "gpulimit/shm/ledger_inspection.h"
#include "gpulimit/shm/tenant_ledger.h"
#include "lookup/real_driver.h"
#include "memory/graph_books.h"
#include "memory/pool_books.h"

extern char** environ;

namespace gpulimit {

void refuse_cuda();

namespace {

constexpr size_t kShards = 64;

// Allocation pointer -> (ledger device, bytes). Sharded so that threads
// allocating at once rarely meet on a lock.
class AllocationRegistry {
 public:
  bool insert(CUdeviceptr ptr, int device, uint64_t bytes) {
    Shard& s = shard(ptr);
    std::lock_guard<std::mutex> guard(s.mu);
    try {
      s.entries[ptr] = Entry{device, bytes};
    } catch (...) {
      return false;  // out of host memory: the caller undoes the allocation
    }
    return true;
  }
  bool erase(CUdeviceptr ptr, int* device, uint64_t* bytes) {
    Shard& s = shard(ptr);
    std::lock_guard<std::mutex> guard(s.mu);
    auto it = s.entries.find(ptr);
    if (it == s.entries.end()) return false;
    *device = it->second.device;
    *bytes = it->second.bytes;
    s.entries.erase(it);
    return true;
  }

 private:
  struct Entry {
    int device;
    uint64_t bytes;
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<CUdeviceptr, Entry> entries;
  };
  Shard& shard(CUdeviceptr ptr) { return shards_[(ptr >> 12) % kShards]; }
  std::array<Shard, kShards> shards_;
};

// Everything decided at attach, owned by the one Tenant of the process.
struct Attachment {
  options::Limits limits;
  std::unique_ptr<shm::TenantLedger> ledger;
  std::array<int, options::kDeviceOrdinalCount> ledger_device;
  std::array<int, shm::kMaxDevices> ordinal_of;  // of each ledger device; -1: none
  std::array<CUuuid, options::kDeviceOrdinalCount> uuid;
  AllocationRegistry allocations;
  AllocationRegistry handles;
};

std::mutex attach_mu;
bool limits_read = false;  // under attach_mu
CUresult refusal = CUDA_SUCCESS;
options::Limits limits;
Attachment* attachment = nullptr;
// In a child forked after attaching: the parent's attachment, which a fork
// handler may not free (it is not async-signal-safe), kept reachable so that
// leak checkers do not report it (volatile: written, never read, and so
// otherwise optimised away).
Attachment* volatile parent_attachment = nullptr;

void refuse(const std::string& why) {
  std::fprintf(stderr, "gpulimit: %s; CUDA is refused rather than run without the limit\n",
               why.c_str());
  refusal = CUDA_ERROR_NOT_INITIALIZED;
  refuse_cuda();
}

// A tenant started without the CLI (HAMi's variables alone) is this process
// and everything it starts: name it, and let the children inherit the name.
std::string new_tenant_id() {
  unsigned char random[6] = {};
  if (getrandom(random, sizeof(random), 0) != sizeof(random)) random[0] = 0;
  char id[64];
  std::snprintf(id, sizeof(id), "%u-%d-%02x%02x%02x%02x%02x%02x", getuid(), getpid(), random[0],
                random[1], random[2], random[3], random[4], random[5]);
  return id;
}

void child_after_fork();

// The UUIDs of the CUDA devices this process sees, in ordinal order (all of
// them, or none when the driver cannot say).
std::vector<options::DeviceUuid> visible_gpus() {
  std::vector<options::DeviceUuid> uuids;
  int count = 0;
  auto get_count = real_function(real::cuDeviceGetCount);
  auto get_uuid = real_function(real::cuDeviceGetUuid_v2);
  if (!get_count || !get_uuid || get_count(&count) != CUDA_SUCCESS) return uuids;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUuuid uuid{};
    if (get_uuid(&uuid, ordinal) != CUDA_SUCCESS) return {};
    options::DeviceUuid& bytes = uuids.emplace_back();
    std::memcpy(bytes.data(), uuid.bytes, bytes.size());
  }
  return uuids;
}

// Per-device caps given by ordinal are bound to the GPUs they name in this
// process (the first of the tenant to see the GPUs, unless `gpulimit` bound
// them already) and handed on by UUID: the children's ordinals may name other
// GPUs (options/limits.h). The HAMi per-device variables go, lest a child
// read them as ordinals again. False with `error` set when the caps disagree.
bool bind_device_caps(options::MemoryLimits& memory, std::string& error) {
  if (memory.by_device.empty()) return true;
  const std::vector<options::DeviceUuid> visible = visible_gpus();
  if (visible.empty()) return true;  // nothing to bind to: cuInit fails or finds no device
  if (!memory.bind(visible, error)) return false;
  const std::string list = options::format_device_amounts(memory);
  const std::string_view hami_prefix = options::option(options::OptionId::kDeviceMem).hami_alias;
  std::vector<std::string> hami_names;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string_view assignment(*entry);
    if (assignment.starts_with(hami_prefix))
      hami_names.emplace_back(assignment.substr(0, assignment.find('=')));
  }
  for (const std::string& name : hami_names)
    unsetenv(name.c_str());
  const std::string variable(options::option(options::OptionId::kDeviceMem).variable);
  if (list.empty()) {
    unsetenv(variable.c_str());
  } else {
    setenv(variable.c_str(), list.c_str(), 1);
  }
  return true;
}

}  // namespace

std::atomic<Tenant*> Tenant::limited_{nullptr};
std::atomic<bool> Tenant::refused_{false};

void refuse_cuda() {
  Tenant::refused_.store(true, std::memory_order_relaxed);
}

CUresult Tenant::attach(Phase phase) {
  std::lock_guard<std::mutex> guard(attach_mu);
  if (!limits_read) {
    limits_read = true;
    std::string error;
    if (!options::limits_from_environment(environ, limits, error)) {
      refuse(error);
      return refusal;
    }
    if (gate::administrator_enforces() && limits.socket != protocol::kSystemSocketPath) {
      // Every process joins the system server, whatever its environment
      // names (or does not), and its children too.
      limits.socket = protocol::kSystemSocketPath;
      setenv(std::string(options::option(options::OptionId::kSocket).variable).c_str(),
             limits.socket.c_str(), 1);
    }
    if ((!limits.memory.empty() || !limits.socket.empty()) && limits.tenant.empty()) {
      limits.tenant = new_tenant_id();
      setenv("GPULIMIT_TENANT", limits.tenant.c_str(), 1);
      // A job started without `gpulimit`: this process is its leader
      // (protocol/job_leader.h), as `gpulimit` would have named it.
      protocol::JobLeader self;
      char leader[48];
      if (protocol::read_job_leader(getpid(), self) &&
          protocol::format_job_leader(self, leader, sizeof leader))
        setenv(protocol::kJobLeaderVariable, leader, 1);
    }
    static bool registered = false;
    if (!registered) {
      pthread_atfork(nullptr, nullptr, child_after_fork);
      registered = true;
    }
  }
  if (refusal != CUDA_SUCCESS || (limits.memory.empty() && limits.socket.empty())) return refusal;
  if (phase == Phase::kBeforeInit || limited_.load(std::memory_order_relaxed)) return CUDA_SUCCESS;
  if (std::string error; !bind_device_caps(limits.memory, error)) {
    refuse("--device-mem: " + error);
    return refusal;
  }

  // With a server, its answer first: an administrator's policy may cap
  // memory the job did not ask to cap, or cap it lower than it asked.
  std::array<uint64_t, options::kDeviceOrdinalCount> granted{};
  const bool have_grant =
      !limits.socket.empty() &&
      gate::join_for_memory(limits, granted.data(), options::kDeviceOrdinalCount);
  if (gate::refused_under_enforcement()) {
    refusal = CUDA_ERROR_NOT_INITIALIZED;  // the gate said why, in one line
    refuse_cuda();
    return refusal;
  }
  if (limits.memory.empty() && (!have_grant || std::all_of(granted.begin(), granted.end(),
                                                           [](uint64_t c) { return c == 0; })))
    return CUDA_SUCCESS;

  auto* a = new (std::nothrow) Attachment();
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  a->limits = limits;
  a->ledger_device.fill(-1);
  a->ordinal_of.fill(-1);
  std::string error;
  a->ledger = shm::TenantLedger::open(limits.ledger_dir, limits.tenant, error);
  if (!a->ledger) {
    refuse(error);
    delete a;
    return refusal;
  }
  int count = 0;
  auto get_count = real_function(real::cuDeviceGetCount);
  auto get_uuid = real_function(real::cuDeviceGetUuid_v2);
  auto total_mem = real_function(real::cuDeviceTotalMem_v2);
  if (!get_count || !get_uuid || !total_mem || get_count(&count) != CUDA_SUCCESS) count = 0;
  for (int ordinal = 0; ordinal < count && ordinal < options::kDeviceOrdinalCount; ++ordinal) {
    const uint64_t grant = granted[static_cast<size_t>(ordinal)];
    CUuuid uuid{};
    size_t total = 0;
    if (get_uuid(&uuid, ordinal) != CUDA_SUCCESS || total_mem(&total, ordinal) != CUDA_SUCCESS)
      continue;
    options::DeviceUuid gpu;
    std::memcpy(gpu.data(), uuid.bytes, gpu.size());
    const std::optional<options::Amount> amount =
        limits.memory.for_gpu(gpu, static_cast<unsigned>(ordinal));
    if (!amount && grant == 0) continue;
    // The smaller of what the job asked and what the server granted.
    uint64_t cap = amount ? amount->resolve(total) : grant;
    if (grant != 0) cap = std::min(cap, grant);
    const int device = a->ledger->device(reinterpret_cast<const unsigned char*>(uuid.bytes), cap);
    if (device < 0) {
      refuse("the tenant's ledger has no room for another device");
      delete a;
      return refusal;
    }
    a->ledger_device[static_cast<size_t>(ordinal)] = device;
    a->ordinal_of[static_cast<size_t>(device)] = ordinal;
    a->uuid[static_cast<size_t>(ordinal)] = uuid;
  }
  attachment = a;
  static Tenant tenant;
  limited_.store(&tenant, std::memory_order_release);
  return CUDA_SUCCESS;
}

options::Limits Tenant::read_limits() {
  std::lock_guard<std::mutex> guard(attach_mu);
  return refusal == CUDA_SUCCESS ? limits : options::Limits{};
}

namespace {

void child_after_fork() {
  // The child is a new process of the same tenant: it lets go of the
  // parent's slot (without touching it) and attaches afresh at its cuInit.
  if (attachment) attachment->ledger->after_fork_in_child();
  parent_attachment = attachment;
  attachment = nullptr;
  Tenant::detach_after_fork();
}

}  // namespace

int Tenant::ledger_device(CUdevice ordinal) const {
  if (ordinal < 0 || ordinal >= options::kDeviceOrdinalCount || !attachment) return -1;
  return attachment->ledger_device[static_cast<size_t>(ordinal)];
}

int Tenant::current_ledger_device() const {
  CUdevice ordinal = -1;
  auto get_device = real_function(real::cuCtxGetDevice);
  if (!get_device || get_device(&ordinal) != CUDA_SUCCESS) return -1;
  return ledger_device(ordinal);
}

namespace {

// Within the tenant's cap, and within its lease where a group's or user's
// memory total binds the device: past the lease, the server is asked for a
// larger one (it may take back what other tenants under the total do not
// use) and the reservation tried again.
bool take(int device, uint64_t bytes) {
  shm::TenantLedger& ledger = *attachment->ledger;
  const int ordinal = device >= 0 && device < static_cast<int>(shm::kMaxDevices)
                          ? attachment->ordinal_of[static_cast<size_t>(device)]
                          : -1;
  const gate::LeaseView view = gate::lease_for(ordinal);
  if (!view.lease) return ledger.reserve(device, bytes);
  // Three asks at most: another process of the tenant may take what the
  // server granted this one before its retry.
  for (int asked = 0;; ++asked) {
    const uint32_t answers = view.lease->answers.load(std::memory_order_seq_cst);
    uint64_t need = 0;
    switch (ledger.reserve_within(device, bytes, view.lease->lease, &need)) {
      case shm::TenantLedger::Reservation::kTaken:
        return true;
      case shm::TenantLedger::Reservation::kOverCap:
        return false;
      case shm::TenantLedger::Reservation::kOverLease:
        if (asked == 3 || !view.session->ask_for_lease(ordinal, need, answers)) return false;
        break;
    }
  }
}

}  // namespace

bool Tenant::reserve(int device, uint64_t bytes) {
  if (take(device, bytes)) return true;
  // Pools may have given memory back at a synchronisation since their
  // reserve was last read: read it again before refusing.
  pool_books::reclaim();
  graph_books::reclaim();
  return take(device, bytes);
}

void Tenant::release(int device, uint64_t bytes) {
  attachment->ledger->release(device, bytes);
}

bool Tenant::remember(CUdeviceptr ptr, int device, uint64_t bytes) {
  return attachment->allocations.insert(ptr, device, bytes);
}

bool Tenant::forget(CUdeviceptr ptr, int* device, uint64_t* bytes) {
  return attachment->allocations.erase(ptr, device, bytes);
}

bool Tenant::remember_handle(uint64_t handle, int device, uint64_t bytes) {
  return attachment->handles.insert(handle, device, bytes);
}

bool Tenant::forget_handle(uint64_t handle, int* device, uint64_t* bytes) {
  return attachment->handles.erase(handle, device, bytes);
}

bool Tenant::view_uuid(const unsigned char uuid[16], uint64_t* cap, uint64_t* used) {
  for (int ordinal = 0; ordinal < options::kDeviceOrdinalCount; ++ordinal)
    if (attachment->ledger_device[static_cast<size_t>(ordinal)] >= 0 &&
        std::memcmp(attachment->uuid[static_cast<size_t>(ordinal)].bytes, uuid, 16) == 0)
      return view(ordinal, cap, used);
  return false;
}

bool Tenant::view_before_init(const unsigned char uuid[16], uint64_t device_total, uint64_t* cap,
                              uint64_t* used) {
  if (attach(Phase::kBeforeInit) != CUDA_SUCCESS) return false;
  const options::Limits limits = read_limits();
  options::DeviceUuid gpu;
  std::memcpy(gpu.data(), uuid, gpu.size());
  const std::optional<uint64_t> bytes = limits.memory.cap_before_binding(gpu, device_total);
  if (!bytes) return false;
  *cap = *bytes;
  *used = 0;
  if (limits.tenant.empty()) return true;
  std::vector<shm::LedgerDeviceUsage> devices;
  std::string error;
  const std::string path = shm::TenantLedger::path_for(limits.ledger_dir, getuid(), limits.tenant);
  if (!shm::read_ledger_usage(path, getuid(), devices, error)) return true;  // no ledger yet
  for (const shm::LedgerDeviceUsage& device : devices)
    if (std::memcmp(device.uuid.data(), uuid, device.uuid.size()) == 0) *used = device.used;
  return true;
}

bool Tenant::view(CUdevice ordinal, uint64_t* cap, uint64_t* used) {
  const int device = ledger_device(ordinal);
  if (device < 0) return false;
  attachment->ledger->reap();  // what exited processes held is not in use
  pool_books::reclaim();       // nor what this process's pools gave back
  graph_books::reclaim();
  *cap = attachment->ledger->cap(device);
  *used = attachment->ledger->used(device);
  // Under a group's or user's memory total, what the others under it hold
  // is in use too, as on a device the tenant shares: free memory is what
  // the total has left for this tenant, as the server last looked.
  if (const shm::LeaseDevice* lease = gate::lease_for(ordinal).lease) {
    const uint64_t room = lease->room.load(std::memory_order_relaxed);
    if (room < *cap) *used = std::min(*cap, *used + (*cap - room));
  }
  return true;
}

}  // namespace gpulimit
