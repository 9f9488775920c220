// GPULIMIT_SHM_SEAM(point): a test seam (gpulimit/shm/test_seams.h) in the
// test build of the ledger; in the real one it only names the point, so that
// a misspelt point fails to compile in both.
#pragma once

#include "gpulimit/shm/test_seams.h"

#if defined(GPULIMIT_SHM_TEST_SEAMS)
#define GPULIMIT_SHM_SEAM(point) \
  ::gpulimit::shm::test_seams::reached(::gpulimit::shm::test_seams::Point::point)
#else
#define GPULIMIT_SHM_SEAM(point) static_cast<void>(::gpulimit::shm::test_seams::Point::point)
#endif
