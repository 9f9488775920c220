// The server's lease book for group and user memory totals: G1-G4 and
// S1-S3 of limiter-server/model/README.md, with the tenants' ledger counts
// and lease pages as fakes a test can race.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "gpulimit/server/quota/lease_book.h"

namespace gpulimit::server {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr DeviceIndex kGpu = 0, kOther = 1;
constexpr uint32_t kMl = 100, kVision = 200;    // gids
constexpr uint32_t kAlice = 1000, kBob = 1001;  // uids
constexpr TenantNumber kA = 1, kB = 2, kC = 3;

// The tenants' side: ledger counts, and lease pages as the server wrote them.
struct Tenants {
  std::map<TenantNumber, uint64_t> used;
  std::map<TenantNumber, uint64_t> page;
  std::vector<std::pair<TenantNumber, uint64_t>> writes;
  // Called after the server stores a lease, with the one it replaced: for a
  // shrink, between its store (S2) and its second read (S3).
  std::function<void(TenantNumber, uint64_t)> after_store;

  LeaseBook::ReadUsed reader() {
    return [this](TenantNumber tenant, DeviceIndex) { return used[tenant]; };
  }
  LeaseBook::WriteLease writer() {
    return [this](TenantNumber tenant, DeviceIndex, uint64_t bytes) {
      const uint64_t replaced = page[tenant];
      page[tenant] = bytes;
      writes.emplace_back(tenant, bytes);
      if (after_store) after_store(tenant, replaced);
    };
  }
};

// Ledger counts and lease pages per device, for totals of every device.
struct DeviceTenants {
  std::map<std::pair<TenantNumber, DeviceIndex>, uint64_t> used, page;
  // As Tenants::after_store, per device.
  std::function<void(TenantNumber, DeviceIndex, uint64_t)> after_store;
  LeaseBook::ReadUsed reader() {
    return [this](TenantNumber tenant, DeviceIndex device) { return used[{tenant, device}]; };
  }
  LeaseBook::WriteLease writer() {
    return [this](TenantNumber tenant, DeviceIndex device, uint64_t bytes) {
      const uint64_t replaced = page[{tenant, device}];
      page[{tenant, device}] = bytes;
      if (after_store) after_store(tenant, device, replaced);
    };
  }
};

class LeaseBookTest : public testing::Test {
 protected:
  LeaseBookTest() {
    book.add_tenant(kA, kMl, kAlice);
    book.add_tenant(kB, kMl, kBob);
    book.add_tenant(kC, kVision, kBob);
  }
  std::optional<uint64_t> ask(TenantNumber tenant, uint64_t need) {
    return book.request(tenant, kGpu, need, tenants.reader(), tenants.writer());
  }
  // The same on `device`, with ledger counts and pages per device (`on`).
  std::optional<uint64_t> ask_on(TenantNumber tenant, DeviceIndex device, uint64_t need) {
    return book.request(tenant, device, need, on.reader(), on.writer());
  }

  LeaseBook book{kGiB};
  Tenants tenants;
  DeviceTenants on;
};

TEST_F(LeaseBookTest, WithoutATotalALeaseIsUnlimited) {
  EXPECT_EQ(ask(kA, 5 * kGiB), kUnlimitedLease);
  EXPECT_EQ(tenants.page[kA], kUnlimitedLease);
  EXPECT_EQ(book.promised(kA, kGpu), kUnlimitedLease);
  EXPECT_EQ(book.group_promised(kMl, kGpu), 0u) << "nothing is counted where nothing binds";
}

TEST_F(LeaseBookTest, LeasesComeInChunksWithinTheTotal) {
  book.set_group_total(kMl, kGpu, 10 * kGiB);

  EXPECT_EQ(ask(kA, kGiB / 2), kGiB);
  EXPECT_EQ(ask(kA, 9 * kGiB + 1), 10 * kGiB) << "rounded up to a chunk, within the total";
  EXPECT_EQ(tenants.page[kA], 10 * kGiB);
  EXPECT_EQ(book.group_promised(kMl, kGpu), 10 * kGiB);
}

TEST_F(LeaseBookTest, AChunkIsCutToTheRoomLeft) {
  book.set_group_total(kMl, kGpu, 3 * kGiB);
  tenants.used[kA] = 2 * kGiB;
  ASSERT_EQ(ask(kA, 2 * kGiB), 2 * kGiB);

  EXPECT_EQ(ask(kB, kGiB / 4), kGiB);
  EXPECT_EQ(ask(kB, kGiB / 4 * 5), std::nullopt) << "alice uses all she was promised";
}

TEST_F(LeaseBookTest, WhatAnotherTenantDoesNotUseIsTakenBackFirst) {
  book.set_group_total(kMl, kGpu, 10 * kGiB);
  ASSERT_EQ(ask(kA, 6 * kGiB), 6 * kGiB);
  tenants.used[kA] = 2 * kGiB;  // alice freed most of it

  EXPECT_EQ(ask(kB, 6 * kGiB), 6 * kGiB);
  EXPECT_EQ(tenants.page[kA], 2 * kGiB) << "alice's lease lowered to what she uses";
  EXPECT_EQ(book.promised(kA, kGpu), 2 * kGiB);
  EXPECT_LE(book.group_promised(kMl, kGpu), 10 * kGiB);
}

TEST_F(LeaseBookTest, AReservationThatSlipsInBeforeTheLowerLeaseCounts) {
  book.set_group_total(kMl, kGpu, 10 * kGiB);
  ASSERT_EQ(ask(kA, 6 * kGiB), 6 * kGiB);
  tenants.used[kA] = 2 * kGiB;
  // Alice's CAS came after the server's first read and before its store:
  // her reservation commits under the old lease.
  tenants.after_store = [&](TenantNumber tenant, uint64_t) {
    if (tenant == kA) tenants.used[kA] = 3 * kGiB;
  };

  EXPECT_EQ(ask(kB, 7 * kGiB), 7 * kGiB);
  EXPECT_EQ(book.promised(kA, kGpu), 3 * kGiB) << "S3 saw it";
  EXPECT_EQ(ask(kC, kGiB), kUnlimitedLease) << "vision has no total";
  EXPECT_EQ(book.group_promised(kMl, kGpu), 10 * kGiB);
}

TEST_F(LeaseBookTest, AShrinkNeverRaisesAPromise) {
  book.set_group_total(kMl, kGpu, 4 * kGiB);
  ASSERT_EQ(ask(kA, 3 * kGiB), 3 * kGiB);
  tenants.used[kA] = kGiB;
  // The second read sees a reservation about to be undone (alice read the
  // lower lease after her CAS): more than she was ever promised.
  tenants.after_store = [&](TenantNumber tenant, uint64_t) {
    if (tenant == kA) tenants.used[kA] = 4 * kGiB;
  };

  EXPECT_EQ(ask(kB, 2 * kGiB), std::nullopt) << "the room is still alice's";
  EXPECT_EQ(book.promised(kA, kGpu), 3 * kGiB) << "the old promise, not 4 GiB";
  EXPECT_LE(book.group_promised(kMl, kGpu), 4 * kGiB);
}

TEST_F(LeaseBookTest, ALeaseAlreadyPromisedIsWrittenAgain) {
  book.set_group_total(kMl, kGpu, 4 * kGiB);
  ASSERT_EQ(ask(kA, 3 * kGiB), 3 * kGiB);
  tenants.page[kA] = kGiB;  // a shrink's lower lease that S3 then overruled

  EXPECT_EQ(ask(kA, 2 * kGiB), 3 * kGiB);
  EXPECT_EQ(tenants.page[kA], 3 * kGiB);
}

TEST_F(LeaseBookTest, ARefusalWritesNothingForTheRequester) {
  book.set_group_total(kMl, kGpu, 2 * kGiB);
  tenants.used[kA] = 2 * kGiB;
  ASSERT_EQ(ask(kA, 2 * kGiB), 2 * kGiB);
  tenants.writes.clear();

  EXPECT_EQ(ask(kB, kGiB), std::nullopt);
  for (const auto& [tenant, bytes] : tenants.writes)
    EXPECT_NE(tenant, kB) << "a refused tenant's page keeps its lease";
  EXPECT_EQ(book.promised(kB, kGpu), 0u);
}

TEST_F(LeaseBookTest, AUsersTotalBindsAcrossItsGroups) {
  book.set_user_total(kBob, kGpu, 3 * kGiB);
  tenants.used[kB] = 2 * kGiB;
  ASSERT_EQ(ask(kB, 2 * kGiB), 2 * kGiB);

  EXPECT_EQ(ask(kC, 2 * kGiB), std::nullopt) << "bob's job in vision shares bob's total";
  EXPECT_EQ(ask(kC, kGiB), kGiB);
  EXPECT_EQ(ask(kA, 8 * kGiB), kUnlimitedLease) << "alice is bound by neither";
}

TEST_F(LeaseBookTest, TheSmallerRoomOfTwoTotalsWins) {
  book.set_group_total(kMl, kGpu, 10 * kGiB);
  book.set_user_total(kBob, kGpu, 2 * kGiB);

  EXPECT_EQ(ask(kB, 3 * kGiB), std::nullopt);
  EXPECT_EQ(ask(kB, 2 * kGiB), 2 * kGiB);
  tenants.used[kB] = 2 * kGiB;
  EXPECT_EQ(ask(kA, 9 * kGiB), std::nullopt) << "ml: 10 GiB less bob's 2";
  EXPECT_EQ(ask(kA, 8 * kGiB), 8 * kGiB);
}

TEST_F(LeaseBookTest, OtherGroupsAreNeverTakenFrom) {
  book.set_group_total(kMl, kGpu, 2 * kGiB);
  book.set_group_total(kVision, kGpu, 2 * kGiB);
  ASSERT_EQ(ask(kC, 2 * kGiB), 2 * kGiB);  // unused, but vision's
  tenants.writes.clear();

  EXPECT_EQ(ask(kA, 2 * kGiB), 2 * kGiB);
  for (const auto& [tenant, bytes] : tenants.writes)
    EXPECT_NE(tenant, kC);
  EXPECT_EQ(book.promised(kC, kGpu), 2 * kGiB);
}

TEST_F(LeaseBookTest, ALowerTotalTakesNothingBackAndRefusesWhatIsNew) {
  book.set_group_total(kMl, kGpu, 8 * kGiB);
  tenants.used[kA] = 6 * kGiB;
  ASSERT_EQ(ask(kA, 6 * kGiB), 6 * kGiB);
  book.set_group_total(kMl, kGpu, 4 * kGiB);

  EXPECT_EQ(book.promised(kA, kGpu), 6 * kGiB);
  EXPECT_EQ(ask(kA, 5 * kGiB), 6 * kGiB) << "within what it holds";
  EXPECT_EQ(ask(kB, kGiB / 2), std::nullopt);
}

TEST_F(LeaseBookTest, WhatATenantHoldsAlreadyIsPromisedToItEvenPastTheTotal) {
  book.set_group_total(kMl, kGpu, 4 * kGiB);
  // A server started anew: alice's tenant reconnects holding 3 GiB, bob's
  // holding 2 GiB, more than the total between them.
  book.adopt(kA, kGpu, 3 * kGiB);
  book.adopt(kB, kGpu, 2 * kGiB);
  tenants.used = {{kA, 3 * kGiB}, {kB, 2 * kGiB}};

  EXPECT_EQ(book.promised(kA, kGpu), 3 * kGiB);
  EXPECT_EQ(book.group_promised(kMl, kGpu), 5 * kGiB) << "nothing held is taken away";
  EXPECT_EQ(ask(kB, 2 * kGiB + 1), std::nullopt) << "and nothing more granted";
  tenants.used[kA] = kGiB;  // alice frees 2 GiB: 1 GiB of it is room again
  EXPECT_EQ(ask(kB, 3 * kGiB), 3 * kGiB);
  EXPECT_EQ(book.group_promised(kMl, kGpu), 4 * kGiB);
  book.adopt(kC, kGpu, kGiB);  // vision has no total: nothing to promise
  EXPECT_EQ(book.promised(kC, kGpu), kUnlimitedLease);
}

TEST_F(LeaseBookTest, ATotalOfAllDevicesCountsTheLeasesOfEveryDevice) {
  book.set_group_total(kMl, kAllDevices, 6 * kGiB);

  EXPECT_EQ(ask_on(kA, kGpu, 4 * kGiB), 4 * kGiB);
  on.used[{kA, kGpu}] = 4 * kGiB;  // and uses it
  EXPECT_EQ(ask_on(kB, kOther, 3 * kGiB), std::nullopt) << "4 GiB of 6 used on the other";
  EXPECT_EQ(ask_on(kA, kOther, 2 * kGiB), 2 * kGiB) << "one tenant, two devices";
  EXPECT_EQ(book.group_promised(kMl, kAllDevices), 6 * kGiB);
  EXPECT_EQ(book.promised(kC, kOther), kUnlimitedLease) << "vision is not bound";

  // Alice uses 1 GiB of her 4 on the first device and none of her 2 on the
  // other: bob's request on the other takes back on both.
  on.used[{kA, kGpu}] = kGiB;
  EXPECT_EQ(ask_on(kB, kOther, 5 * kGiB), 5 * kGiB);
  EXPECT_EQ(on.page[(std::pair{kA, kGpu})], kGiB);
  EXPECT_EQ(on.page[(std::pair{kA, kOther})], 0u);
  EXPECT_EQ(book.group_promised(kMl, kAllDevices), 6 * kGiB);
}

TEST_F(LeaseBookTest, APerDeviceTotalAndOneOfAllDevicesBothHold) {
  book.set_group_total(kMl, kAllDevices, 6 * kGiB);
  book.set_user_total(kAlice, kGpu, 2 * kGiB);

  EXPECT_EQ(ask_on(kA, kGpu, 3 * kGiB), std::nullopt) << "alice's own 2 GiB there";
  EXPECT_EQ(ask_on(kA, kGpu, 2 * kGiB), 2 * kGiB);
  EXPECT_EQ(ask_on(kA, kOther, 5 * kGiB), std::nullopt) << "ml's 6 GiB, 2 leased";
  EXPECT_EQ(ask_on(kA, kOther, 4 * kGiB), 4 * kGiB);
}

TEST_F(LeaseBookTest, AGoneTenantsPromisesComeBack) {
  book.set_group_total(kMl, kGpu, 4 * kGiB);
  tenants.used[kA] = 4 * kGiB;
  ASSERT_EQ(ask(kA, 4 * kGiB), 4 * kGiB);
  ASSERT_EQ(ask(kB, kGiB), std::nullopt);

  book.remove_tenant(kA);

  EXPECT_EQ(ask(kB, kGiB), kGiB);
  EXPECT_EQ(book.group_promised(kMl, kGpu), kGiB);
}

constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t up_to(std::mt19937& random, uint64_t most) {
  return most == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, most)(random);
}

// Random requests, frees and reservations within the lease a tenant sees,
// with reservations slipping in under the old lease whenever a shrink
// stores a lower one: no total is ever passed, by promises or by use.
TEST_F(LeaseBookTest, NoOrderOfEventsPassesATotal) {
  std::mt19937 random(11);
  const auto bytes_up_to = [&](uint64_t most) { return up_to(random, most); };
  book.set_group_total(kMl, kGpu, 8 * kGiB);
  book.set_user_total(kBob, kGpu, 5 * kGiB);
  tenants.after_store = [&](TenantNumber tenant, uint64_t replaced) {
    const uint64_t used = tenants.used[tenant];
    if (replaced != kUnlimitedLease && replaced > used && random() % 2)
      tenants.used[tenant] = used + bytes_up_to(replaced - used);  // committed under the old
  };
  const std::vector<TenantNumber> all = {kA, kB, kC};
  for (int step = 0; step < 20'000; ++step) {
    const TenantNumber tenant = all[random() % all.size()];
    uint64_t& used = tenants.used[tenant];
    switch (random() % 3) {
      case 0:
        ask(tenant, used + bytes_up_to(3 * kGiB / kMiB) * kMiB);
        break;
      case 1:
        used -= bytes_up_to(used);  // frees
        break;
      case 2:
        if (tenants.page[tenant] > used) used += bytes_up_to(tenants.page[tenant] - used);
        break;
    }
    ASSERT_LE(book.group_promised(kMl, kGpu), 8 * kGiB) << "step " << step;
    ASSERT_LE(book.user_promised(kBob, kGpu), 5 * kGiB) << "step " << step;
    ASSERT_LE(tenants.used[kA] + tenants.used[kB], 8 * kGiB) << "ml's use, step " << step;
    ASSERT_LE(tenants.used[kB] + tenants.used[kC], 5 * kGiB) << "bob's use, step " << step;
    for (const TenantNumber t : all)
      ASSERT_LE(tenants.used[t], book.promised(t, kGpu)) << "tenant " << t << ", step " << step;
  }
}

// The same with two devices, a group total of both together and a user
// total of one.
TEST_F(LeaseBookTest, NoOrderOfEventsPassesATotalOfAllDevices) {
  std::mt19937 random(12);
  const auto bytes_up_to = [&](uint64_t most) { return up_to(random, most); };
  book.set_group_total(kMl, kAllDevices, 8 * kGiB);
  book.set_user_total(kBob, kGpu, 3 * kGiB);
  on.after_store = [&](TenantNumber tenant, DeviceIndex device, uint64_t replaced) {
    const uint64_t used = on.used[{tenant, device}];
    if (replaced != kUnlimitedLease && replaced > used && random() % 2)
      on.used[{tenant, device}] = used + bytes_up_to(replaced - used);
  };
  const std::vector<TenantNumber> all = {kA, kB, kC};
  for (int step = 0; step < 20'000; ++step) {
    const TenantNumber tenant = all[random() % all.size()];
    const DeviceIndex device = random() % 2 ? kGpu : kOther;
    uint64_t& used = on.used[std::pair{tenant, device}];
    switch (random() % 3) {
      case 0:
        book.request(tenant, device, used + bytes_up_to(3 * kGiB / kMiB) * kMiB, on.reader(),
                     on.writer());
        break;
      case 1:
        used -= bytes_up_to(used);
        break;
      case 2: {
        const auto page = on.page.find({tenant, device});
        const uint64_t lease = page == on.page.end() ? 0 : page->second;
        if (lease > used) used += bytes_up_to(std::min(lease - used, 4 * kGiB));
        break;
      }
    }
    ASSERT_LE(book.group_promised(kMl, kAllDevices), 8 * kGiB) << "step " << step;
    ASSERT_LE(book.user_promised(kBob, kGpu), 3 * kGiB) << "step " << step;
    uint64_t ml = 0;
    for (const TenantNumber t : {kA, kB})
      for (const DeviceIndex d : {kGpu, kOther})
        ml += on.used[std::pair{t, d}];
    ASSERT_LE(ml, 8 * kGiB) << "ml's use, step " << step;
    ASSERT_LE((on.used[std::pair{kB, kGpu}] + on.used[std::pair{kC, kGpu}]), 3 * kGiB)
        << "bob's, step " << step;
    for (const TenantNumber t : {kA, kB})
      for (const DeviceIndex d : {kGpu, kOther})
        ASSERT_LE(on.used[(std::pair{t, d})], book.promised(t, d))
            << "tenant " << t << ", step " << step;
  }
}

}  // namespace
}  // namespace gpulimit::server
