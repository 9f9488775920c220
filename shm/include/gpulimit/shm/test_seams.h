// Points in the ledger protocol where a test program can stop or kill a
// process deterministically, instead of hoping a signal lands there. They
// exist only in gpulimit::shm_test_seams, a build of the same sources for
// test programs; gpulimit::shm compiles them to nothing.
#pragma once

namespace gpulimit::shm::test_seams {

enum class Point {
  kInFlight,         // reserve or release: held updated, used not yet
  kRecountCounting,  // recount: sequence odd, nobody in flight, used not yet rewritten
  kLeaseCheck,       // reserve within a lease: used raised by the CAS, the lease not read yet
};

using Handler = void (*)(Point);

// Called at every point reached, by the thread that reaches it. nullptr: none.
void set_handler(Handler handler) noexcept;

// Called by the ledger's sources at each point.
void reached(Point point) noexcept;

}  // namespace gpulimit::shm::test_seams
