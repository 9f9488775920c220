// Tenants keyed by (uid, id), their processes, and numbers never reused.
#include <gtest/gtest.h>

#include "gpulimit/server/loop/tenant_registry.h"

namespace gpulimit::server {
namespace {

JoiningProcess process(ConnectionId connection, uid_t uid, const std::string& tenant,
                       std::vector<DeviceIndex> devices = {0}) {
  JoiningProcess joining;
  joining.connection = connection;
  joining.pid = static_cast<pid_t>(1000 + connection);
  joining.uid = uid;
  joining.tenant_id = tenant;
  joining.devices = std::move(devices);
  joining.ledger_path = "/dev/shm/x";
  return joining;
}

TEST(TenantRegistry, ProcessesOfOneUserAndIdShareATenant) {
  TenantRegistry sut;

  const auto first = sut.join(process(1, 1000, "job"));
  const auto second = sut.join(process(2, 1000, "job"));
  const auto other_user = sut.join(process(3, 1001, "job"));

  ASSERT_TRUE(first && second && other_user);
  EXPECT_TRUE(first->new_tenant);
  EXPECT_FALSE(second->new_tenant);
  EXPECT_EQ(first->tenant, second->tenant);
  EXPECT_NE(first->tenant, other_user->tenant);
  EXPECT_EQ(sut.tenant(first->tenant)->processes.size(), 2u);
}

TEST(TenantRegistry, TheFirstProcessesShareIsTheTenants) {
  TenantRegistry sut;
  JoiningProcess first = process(1, 1000, "job");
  first.share.weight = 4;
  JoiningProcess second = process(2, 1000, "job");
  second.share.weight = 9;

  sut.join(first);
  const auto joined = sut.join(second);

  EXPECT_TRUE(joined->share_differs);
  EXPECT_EQ(sut.tenant(joined->tenant)->share.weight, 4u);
}

TEST(TenantRegistry, NumbersAreNeverReused) {
  TenantRegistry sut;
  const auto first = sut.join(process(1, 1000, "job"));
  sut.leave(1);

  const auto again = sut.join(process(2, 1000, "job"));

  EXPECT_TRUE(again->new_tenant);
  EXPECT_GT(again->tenant, first->tenant);
}

TEST(TenantRegistry, LeavingSaysWhatTheTenantNoLongerSeesOrWants) {
  TenantRegistry sut;
  const TenantNumber t = sut.join(process(1, 1000, "job", {0, 1}))->tenant;
  sut.join(process(2, 1000, "job", {1}));
  sut.process(1)->wants.set(1);

  const auto left = sut.leave(1);

  ASSERT_TRUE(left);
  EXPECT_EQ(left->tenant, t);
  EXPECT_EQ(left->tenant_id, "job");
  EXPECT_EQ(left->devices_left, std::vector<DeviceIndex>{0});
  EXPECT_EQ(left->wants_dropped, std::vector<DeviceIndex>{1});
  EXPECT_FALSE(left->tenant_gone);
  EXPECT_TRUE(sut.leave(2)->tenant_gone);
  EXPECT_FALSE(sut.find(1000, "job"));
  EXPECT_FALSE(sut.leave(2)) << "once";
}

TEST(TenantRegistry, OnlyProcessesSeeingADeviceCanAcknowledgeIt) {
  TenantRegistry sut;
  const TenantNumber t = sut.join(process(1, 1000, "job", {0}))->tenant;
  sut.join(process(2, 1000, "job", {1, 0, 1}));
  sut.join(process(3, 1000, "job", {1}));

  EXPECT_EQ(sut.processes_seeing(t, 0), (std::vector<ConnectionId>{1, 2}));
  EXPECT_EQ(sut.devices_of(t), (std::vector<DeviceIndex>{0, 1}));
  EXPECT_EQ(sut.process(2)->devices, (std::vector<DeviceIndex>{0, 1})) << "sorted, unique";
}

TEST(TenantRegistry, AGrantMeetsEveryProcesssWant) {
  TenantRegistry sut;
  const TenantNumber t = sut.join(process(1, 1000, "job"))->tenant;
  sut.join(process(2, 1000, "job"));
  sut.process(1)->wants.set(0);
  sut.process(2)->wants.set(0);

  ASSERT_TRUE(sut.wants(t, 0));

  sut.clear_wants(t, 0);

  EXPECT_FALSE(sut.process(1)->wants.test(0));
  EXPECT_FALSE(sut.process(2)->wants.test(0));
  EXPECT_FALSE(sut.wants(t, 0));
}

}  // namespace
}  // namespace gpulimit::server
