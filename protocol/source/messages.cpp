#include "gpulimit/protocol/messages.h"

#include <cstring>

namespace gpulimit::protocol {

namespace {

// The size of a fixed-size message of `type`; 0 for one that carries a body.
std::size_t fixed_size(Type type) {
  switch (type) {
    case Type::kHello:
      return sizeof(Hello);
    case Type::kWelcome:
      return sizeof(Welcome);
    case Type::kRefused:
      return sizeof(Refused);
    case Type::kWant:
      return sizeof(Want);
    case Type::kIdle:
      return sizeof(Idle);
    case Type::kAck:
      return sizeof(Ack);
    case Type::kStatusRequest:
      return sizeof(StatusRequest);
    case Type::kStatusReply:
      return 0;
    case Type::kLeaseRequest:
      return sizeof(LeaseRequest);
  }
  return 0;
}

bool known(Type type) {
  return type >= Type::kHello && type <= Type::kLeaseRequest;
}

}  // namespace

Problem check(const void* data, std::size_t size) noexcept {
  if (!data || size < sizeof(Header)) return Problem::kTruncated;
  Header header;
  std::memcpy(&header, data, sizeof header);
  if (header.magic != kMagic) return Problem::kBadMagic;
  if (header.version != kVersion) return Problem::kOtherVersion;
  if (!known(header.type)) return Problem::kUnknownType;
  if (header.size != size) return header.size > size ? Problem::kTruncated : Problem::kWrongSize;
  const std::size_t expected = fixed_size(header.type);
  if (expected != 0 && size != expected) return Problem::kWrongSize;
  return Problem::kNone;
}

const char* describe(Problem problem) noexcept {
  switch (problem) {
    case Problem::kNone:
      return "well formed";
    case Problem::kTruncated:
      return "truncated message";
    case Problem::kBadMagic:
      return "not a gpulimit message";
    case Problem::kOtherVersion:
      return "message of another protocol version";
    case Problem::kUnknownType:
      return "unknown message type";
    case Problem::kWrongSize:
      return "message of the wrong size";
  }
  return "unknown problem";
}

}  // namespace gpulimit::protocol
