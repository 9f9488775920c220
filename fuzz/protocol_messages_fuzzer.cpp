// What gpulimitd does with one packet from its socket, before anything is
// trusted: protocol::check on the raw bytes, then for a Hello the field
// checks of validate_hello (the kernel's pid is the one it claims, and once
// one it does not). Asserts that a message check() passes has the size its
// header says and re-encodes to the same bytes, that a refusal is one
// readable line, and that an accepted Hello, written back from what was
// accepted, is accepted as the same request.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_check.h"
#include "gpulimit/options/values.h"
#include "gpulimit/protocol/messages.h"
#include "gpulimit/server/loop/hello_validation.h"

namespace {

using namespace gpulimit;
using gpulimit::fuzz::one_readable_line;

// A fixed-size message read as the server reads it (memcpy into the
// struct) and written back gives the bytes received.
template <typename Message>
void check_reencodes(const uint8_t* data, std::size_t size) {
  FUZZ_CHECK(size == sizeof(Message));
  Message message;
  std::memcpy(&message, data, sizeof message);
  unsigned char again[sizeof(Message)];
  std::memcpy(again, &message, sizeof message);
  FUZZ_CHECK(std::memcmp(again, data, size) == 0);
}

// The Hello a client would send for `request`.
protocol::Hello hello_for(const server::TenantRequest& request, const protocol::Hello& sent) {
  auto hello = protocol::make<protocol::Hello>();
  std::memcpy(hello.tenant, request.tenant.data(), request.tenant.size());
  hello.claimed_pid = sent.claimed_pid;
  hello.sm_percent = request.share.sm_percent;
  hello.weight = request.share.weight;
  hello.priority = request.share.priority;
  std::memcpy(hello.ledger_dir, request.ledger_dir.data(), request.ledger_dir.size());
  hello.device_count = static_cast<uint32_t>(request.uuids.size());
  for (std::size_t i = 0; i < request.uuids.size(); ++i)
    std::memcpy(hello.uuids[i], request.uuids[i].data(), request.uuids[i].size());
  return hello;
}

void check_hello(const protocol::Hello& hello) {
  // From a process that is not the one the Hello names: always refused.
  const pid_t other = hello.claimed_pid == 1 ? 2 : 1;
  const server::Result<server::TenantRequest> impostor = server::validate_hello(hello, other);
  FUZZ_CHECK(!impostor.ok());
  FUZZ_CHECK(one_readable_line(impostor.error()));

  const server::Result<server::TenantRequest> request =
      server::validate_hello(hello, hello.claimed_pid);
  if (!request.ok()) {
    FUZZ_CHECK(one_readable_line(request.error()));
    return;
  }
  std::string reason;
  FUZZ_CHECK(options::parse_tenant_id(request->tenant, reason));
  FUZZ_CHECK(request->tenant.size() < sizeof hello.tenant);
  FUZZ_CHECK(request->ledger_dir.starts_with('/'));
  FUZZ_CHECK(request->ledger_dir.size() < sizeof hello.ledger_dir);
  FUZZ_CHECK(request->uuids.size() == hello.device_count);
  FUZZ_CHECK(request->uuids.size() <= shm::kBoardDevices);
  FUZZ_CHECK(request->share.sm_percent <= 100);
  FUZZ_CHECK(request->share.weight >= 1 && request->share.weight <= protocol::kMaxWeight);

  const server::Result<server::TenantRequest> again =
      server::validate_hello(hello_for(*request, hello), hello.claimed_pid);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->tenant == request->tenant);
  FUZZ_CHECK(again->share == request->share);
  FUZZ_CHECK(again->ledger_dir == request->ledger_dir);
  FUZZ_CHECK(again->uuids == request->uuids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const protocol::Problem problem = protocol::check(data, size);
  FUZZ_CHECK(one_readable_line(protocol::describe(problem)));
  if (problem != protocol::Problem::kNone) return 0;

  protocol::Header header;
  std::memcpy(&header, data, sizeof header);
  FUZZ_CHECK(header.magic == protocol::kMagic && header.version == protocol::kVersion);
  FUZZ_CHECK(header.size == size);
  switch (header.type) {
    case protocol::Type::kHello: {
      check_reencodes<protocol::Hello>(data, size);
      protocol::Hello hello;
      std::memcpy(&hello, data, sizeof hello);
      check_hello(hello);
      break;
    }
    case protocol::Type::kWelcome:
      check_reencodes<protocol::Welcome>(data, size);
      break;
    case protocol::Type::kRefused:
      check_reencodes<protocol::Refused>(data, size);
      break;
    case protocol::Type::kWant:
      check_reencodes<protocol::Want>(data, size);
      break;
    case protocol::Type::kIdle:
      check_reencodes<protocol::Idle>(data, size);
      break;
    case protocol::Type::kAck:
      check_reencodes<protocol::Ack>(data, size);
      break;
    case protocol::Type::kStatusRequest:
      check_reencodes<protocol::StatusRequest>(data, size);
      break;
    case protocol::Type::kStatusReply:
      FUZZ_CHECK(size >= sizeof(protocol::StatusReply));
      break;
    case protocol::Type::kLeaseRequest:
      check_reencodes<protocol::LeaseRequest>(data, size);
      break;
    default:
      FUZZ_CHECK(!"check() passed a message of an unknown type");
  }
  return 0;
}
