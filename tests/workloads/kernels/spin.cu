// The one kernel every workload launches. It does no useful work: it occupies
// the GPU for a duration chosen at launch, so that tests can reason about GPU
// time exactly (N launches of D ns are N*D ns of GPU time).
//
// The simulated driver recognises it by contract, not by reading the code:
// an entry whose name starts with "spin" and whose first parameter is a .u64
// occupies the simulated device for that many nanoseconds. Keep the name and
// the parameter order.

// %globaltimer is the GPU's nanosecond wall clock; unlike clock64() it does not
// depend on the SM clock, which boosts and throttles.
__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

// Spins until duration_ns have passed, then counts one execution in *counter
// (when given) so that a real-GPU run can prove every launched kernel ran.
extern "C" __global__ void spin(unsigned long long duration_ns, unsigned long long* counter) {
  const unsigned long long start = global_timer_ns();
  while (global_timer_ns() - start < duration_ns) {
  }
  if (counter != nullptr && blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(counter, 1ull);
}
