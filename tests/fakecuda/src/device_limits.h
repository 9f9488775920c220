// The fixed limits of the simulated GPU, an H100/H200 SXM (compute
// capability 9.0): what cuDeviceGetAttribute reports and what the occupancy
// calculator and launches check against. The configurable numbers (SMs,
// clocks, bus width, compute capability) are in DeviceConfig.
#pragma once

#include <cstdint>

namespace fakecuda {

inline constexpr int kWarpSize = 32;
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr int kMaxThreadsPerSm = 2048;
inline constexpr int kMaxBlocksPerSm = 32;
inline constexpr int kRegistersPerSm = 64 * 1024;
inline constexpr int kRegistersPerBlock = 64 * 1024;
inline constexpr int kMaxRegistersPerThread = 255;
// Registers are allocated per warp in units of 256 (8 per thread).
inline constexpr int kRegisterAllocationUnit = 256;
// Shared memory: 228 KiB per SM, of which a block may opt in to 227 KiB; the
// driver reserves 1 KiB of each block's share for itself.
inline constexpr int kSharedPerSm = 228 << 10;
inline constexpr int kSharedPerBlock = 48 << 10;
inline constexpr int kSharedPerBlockOptin = 227 << 10;
inline constexpr int kReservedSharedPerBlock = 1 << 10;
inline constexpr int kSharedAllocationUnit = 128;
inline constexpr int kL2CacheBytes = 50 << 20;
// Three quarters of L2 may be set aside for persisting accesses (as on A100).
inline constexpr int kMaxPersistingL2Bytes = kL2CacheBytes / 4 * 3;
// Thread block clusters: 8 blocks portable, 16 with the non-portable opt-in.
inline constexpr int kPortableClusterSize = 8;
inline constexpr int kMaxClusterSize = 16;
// An H100 SXM5 has 8 GPCs; clusters are placed within one GPC.
inline constexpr int kGpcCount = 8;

// Where the simulated GPUs sit: PCI bus 0x10 + the machine's index, NVIDIA's
// vendor id with a GH100 device id. NVML says the same (nvml/devices.cpp).
inline constexpr int kFirstPciBus = 0x10;
inline constexpr uint32_t kPciDeviceVendorId = 0x2335'10DEu;

}  // namespace fakecuda
