#include "allocation_path.h"

namespace workloads {
namespace {

struct KindName {
  AllocationKind kind;
  std::string_view name;
};

constexpr KindName kKindNames[] = {
    {AllocationKind::linear, "linear"},   {AllocationKind::pitch, "pitch"},
    {AllocationKind::managed, "managed"}, {AllocationKind::async, "async"},
    {AllocationKind::pool, "pool"},       {AllocationKind::vmm, "vmm"},
    {AllocationKind::array, "array"},     {AllocationKind::array3d, "array3d"},
    {AllocationKind::mipmap, "mipmap"},
};

}  // namespace

std::string_view to_string(AllocationKind kind) {
  for (const KindName& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "?";
}

std::optional<AllocationKind> parse_allocation_kind(std::string_view text) {
  for (const KindName& entry : kKindNames) {
    if (entry.name == text) return entry.kind;
  }
  return std::nullopt;
}

std::unique_ptr<AllocationPath> make_allocation_path(AllocationKind kind, CUdevice device) {
  switch (kind) {
    case AllocationKind::linear:
      return make_linear_path();
    case AllocationKind::pitch:
      return make_pitch_path();
    case AllocationKind::managed:
      return make_managed_path();
    case AllocationKind::async:
      return make_async_path();
    case AllocationKind::pool:
      return make_pool_path(device);
    case AllocationKind::vmm:
      return make_vmm_path(device);
    case AllocationKind::array:
      return make_array_path();
    case AllocationKind::array3d:
      return make_array3d_path();
    case AllocationKind::mipmap:
      return make_mipmap_path();
  }
  return nullptr;
}

}  // namespace workloads
