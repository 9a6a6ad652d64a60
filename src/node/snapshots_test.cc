// Snapshots' lookups for a team and the states a snapshot needs, over a real (SQLite) store
// and no pool: nothing here may reach the pool.
#include "node/snapshots.h"

#include <gtest/gtest.h>

#include "node/temp_store_test_util.h"

namespace space::node {
namespace {

class SnapshotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(store(), nullptr);
    audit_ = std::make_unique<AuditLog>(store());
    ops_ = std::make_unique<Operations>(store(), 1);
    snapshots_ =
        std::make_unique<Snapshots>(Snapshots::Deps{.store = store(), .ops = ops_.get(), .audit = audit_.get()});
    store::Sandbox s;
    s.id = "sbx_a";
    s.team = "t1";
    s.state = store::SandboxState::kSuspended;
    ASSERT_TRUE(store()->PutSandbox(s).ok());
    for (auto [id, state] : {std::pair{"snap_1", store::SnapshotState::kRestorable},
                             std::pair{"snap_2", store::SnapshotState::kDeleted}}) {
      store::SnapshotRecord r;
      r.id = id;
      r.team = "t1";
      r.sandbox = "sbx_a";
      r.state = state;
      ASSERT_TRUE(store()->PutSnapshot(r).ok());
    }
  }
  void TearDown() override { ops_->Stop(); }

  store::Store* store() const { return temp_.get(); }

  TempStore temp_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<Operations> ops_;
  std::unique_ptr<Snapshots> snapshots_;
};

TEST_F(SnapshotsTest, ATeamSeesItsOwnLiveSnapshotsOnly) {
  EXPECT_TRUE(snapshots_->Get("t1", "snap_1").ok());
  EXPECT_EQ(snapshots_->Get("t2", "snap_1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(snapshots_->Get("t1", "snap_2").status().code(), StatusCode::kNotFound);  // deleted
  auto list = snapshots_->List("t1", "sbx_a");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "snap_1");
  EXPECT_EQ(snapshots_->List("t2", "sbx_a").status().code(), StatusCode::kNotFound);
}

TEST_F(SnapshotsTest, TakingOneNeedsARunningOrPausedSandbox) {
  auto taken = snapshots_->Take("t1", "sbx_a", "label");
  EXPECT_EQ(taken.status().code(), StatusCode::kConflict);
  EXPECT_NE(taken.status().message().find("suspended"), std::string::npos) << taken.status().message();
  EXPECT_EQ(snapshots_->Take("t2", "sbx_a", "label").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(snapshots_->Diff("t2", "snap_1", "snap_1").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace space::node
