#include "timed_streams.h"

#include <cmath>

#include "cu_check.h"

namespace workloads {

// Blocking synchronisation: the host thread sleeps instead of spinning, which
// matters when several tenants share a small machine.
constexpr unsigned kTimingEventFlags = CU_EVENT_BLOCKING_SYNC;
constexpr unsigned kPacingEventFlags = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING;

TimedStreams::~TimedStreams() {
  for (StreamEvents& events : events_) {
    for (CUevent event : {events.start, events.end}) {
      if (event) CU(cuEventDestroy)(event);
    }
    for (CUevent event : events.rounds) {
      if (event) CU(cuEventDestroy)(event);
    }
  }
  for (CUstream stream : streams_)
    CU(cuStreamDestroy)(stream);
}

CUresult TimedStreams::create(size_t count) {
  for (size_t i = 0; i < count; ++i) {
    CUstream stream = nullptr;
    CU_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    streams_.push_back(stream);
    StreamEvents& events = events_.emplace_back();
    CU_CHECK(cuEventCreate(&events.start, kTimingEventFlags));
    CU_CHECK(cuEventCreate(&events.end, kTimingEventFlags));
    for (CUevent& event : events.rounds)
      CU_CHECK(cuEventCreate(&event, kPacingEventFlags));
  }
  return CUDA_SUCCESS;
}

CUresult TimedStreams::start() {
  for (size_t i = 0; i < streams_.size(); ++i)
    CU_CHECK(cuEventRecord(events_[i].start, streams_[i]));
  return CUDA_SUCCESS;
}

CUresult TimedStreams::wait_for_room(size_t index, uint64_t round) {
  if (round < kRoundsInFlight) return CUDA_SUCCESS;
  CU_CHECK(cuEventSynchronize(events_[index].rounds[round % kRoundsInFlight]));
  return CUDA_SUCCESS;
}

CUresult TimedStreams::end_round(size_t index, uint64_t round) {
  CU_CHECK(cuEventRecord(events_[index].rounds[round % kRoundsInFlight], streams_[index]));
  return CUDA_SUCCESS;
}

CUresult TimedStreams::finish(std::vector<uint64_t>& gpu_ns) {
  for (size_t i = 0; i < streams_.size(); ++i)
    CU_CHECK(cuEventRecord(events_[i].end, streams_[i]));
  gpu_ns.assign(streams_.size(), 0);
  for (size_t i = 0; i < streams_.size(); ++i) {
    CU_CHECK(cuEventSynchronize(events_[i].end));
    float milliseconds = 0;
    CU_CHECK(cuEventElapsedTime(&milliseconds, events_[i].start, events_[i].end));
    gpu_ns[i] = static_cast<uint64_t>(std::llround(static_cast<double>(milliseconds) * 1e6));
  }
  return CUDA_SUCCESS;
}

}  // namespace workloads
