// The spinner's streams, each with the events that measure its GPU time and
// the events that keep its queue short.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

namespace workloads {

class TimedStreams {
 public:
  // Launch rounds a stream may have queued and unfinished. Two keep the GPU
  // busy while the host queues the next round; more would let a time-bounded
  // run queue work far past its end.
  static constexpr uint64_t kRoundsInFlight = 2;

  TimedStreams() = default;
  TimedStreams(const TimedStreams&) = delete;
  TimedStreams& operator=(const TimedStreams&) = delete;
  ~TimedStreams();

  // `count` non-blocking streams with their events.
  CUresult create(size_t count);

  const std::vector<CUstream>& streams() const { return streams_; }

  // Records the start event on every stream.
  CUresult start();

  // Before round `round` on stream `index`: waits until round
  // `round - kRoundsInFlight` has finished on it.
  CUresult wait_for_room(size_t index, uint64_t round);
  // After round `round` on stream `index`.
  CUresult end_round(size_t index, uint64_t round);

  // Records the end event on every stream, waits for them, and returns each
  // stream's GPU time from start to end in nanoseconds.
  CUresult finish(std::vector<uint64_t>& gpu_ns);

 private:
  struct StreamEvents {
    CUevent start = nullptr;
    CUevent end = nullptr;
    CUevent rounds[kRoundsInFlight] = {};
  };

  std::vector<CUstream> streams_;
  std::vector<StreamEvents> events_;
};

}  // namespace workloads
