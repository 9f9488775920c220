// Peer access between contexts of different devices. Every device's memory
// is host address space here, so access needs no mapping; what is simulated
// is the bookkeeping and its errors, as the real driver reports them.
#include <algorithm>

#include "context.h"

using namespace fakecuda;

namespace {

// The peer context named by `peer` and the current one; the real driver's
// error when either is missing (caller holds Driver::mu).
CUresult peer_pair_locked(CUcontext peer, CUctx_st** current) {
  if (CUresult r = current_context_checked(current); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(live_context(peer), CUDA_ERROR_INVALID_CONTEXT);
  return CUDA_SUCCESS;
}

}  // namespace

FAKECUDA_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = peer_pair_locked(peerContext, &ctx); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(ctx != peerContext, CUDA_ERROR_INVALID_CONTEXT);
  FAKECUDA_REQUIRE(Flags == 0, CUDA_ERROR_INVALID_VALUE);
  // cuDeviceCanAccessPeer: any two distinct devices, never a device itself.
  FAKECUDA_REQUIRE(ctx->physical != peerContext->physical, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  auto& peers = ctx->peers;
  FAKECUDA_REQUIRE(std::find(peers.begin(), peers.end(), peerContext->id) == peers.end(),
                   CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  peers.push_back(peerContext->id);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peerContext) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = peer_pair_locked(peerContext, &ctx); r != CUDA_SUCCESS) return r;
  auto& peers = ctx->peers;
  auto it = std::find(peers.begin(), peers.end(), peerContext->id);
  FAKECUDA_REQUIRE(it != peers.end(), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  peers.erase(it);
  return CUDA_SUCCESS;
}
