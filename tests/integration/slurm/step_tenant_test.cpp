// Tenant ids of job steps.
#include "step_tenant.h"

#include <gtest/gtest.h>

#include "gpulimit/options/values.h"

namespace gpulimit::slurm {
namespace {

TEST(StepTenant, NamesNumberedAndNamedSteps) {
  // Arrange, Act, Assert: one call each.
  EXPECT_EQ(step_tenant_id(42, 0), "slurm-42.0");
  EXPECT_EQ(step_tenant_id(42, 7), "slurm-42.7");
  EXPECT_EQ(step_tenant_id(42, kBatchStep), "slurm-42.batch");
  EXPECT_EQ(step_tenant_id(42, kExternStep), "slurm-42.extern");
  EXPECT_EQ(step_tenant_id(42, kInteractiveStep), "slurm-42.interactive");
}

TEST(StepTenant, LongestIdIsAValidTenantId) {
  // Arrange
  const std::string sut = step_tenant_id(0xffffffffu, 0xfffffff0u);
  std::string reason;

  // Act
  const bool valid = options::parse_tenant_id(sut, reason);

  // Assert
  EXPECT_TRUE(valid) << sut << ": " << reason;
}

}  // namespace
}  // namespace gpulimit::slurm
