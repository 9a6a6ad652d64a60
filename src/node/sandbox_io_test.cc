// SandboxIo's checks before anything reaches a guest: team isolation, the state a call needs,
// and a running sandbox that is not booted here. A real (SQLite) store, no guest.
#include "node/sandbox_io.h"

#include <gtest/gtest.h>

#include "node/temp_store_test_util.h"

namespace space::node {
namespace {

class SandboxIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(store(), nullptr);
    audit_ = std::make_unique<AuditLog>(store());
    io_ = std::make_unique<SandboxIo>(store(), &live_, audit_.get(), [this] { ++activity_; });
  }

  void Put(const std::string& id, const std::string& team, store::SandboxState state) {
    store::Sandbox s;
    s.id = id;
    s.team = team;
    s.state = state;
    ASSERT_TRUE(store()->PutSandbox(s).ok());
  }

  store::Store* store() const { return temp_.get(); }

  TempStore temp_;
  std::unique_ptr<AuditLog> audit_;
  LiveSandboxes live_;
  std::unique_ptr<SandboxIo> io_;
  int activity_ = 0;
};

TEST_F(SandboxIoTest, AnotherTeamsSandboxIsNotFound) {
  Put("sbx_a", "t1", store::SandboxState::kRunning);
  EXPECT_EQ(io_->Start("t2", "sbx_a", ProcessSpec{}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(io_->List("t2", "sbx_a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(io_->Commands("t2", "sbx_a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(io_->ReadFile("t2", "sbx_a", "/etc/hostname").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(io_->Stat("t2", "sbx_zz", "/").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(activity_, 0);
}

TEST_F(SandboxIoTest, CallsNeedARunningSandbox) {
  for (auto state : {store::SandboxState::kPaused, store::SandboxState::kSuspended, store::SandboxState::kCreating,
                     store::SandboxState::kFailed}) {
    Put("sbx_a", "t1", state);
    EXPECT_EQ(io_->Start("t1", "sbx_a", ProcessSpec{}).status().code(), StatusCode::kConflict) << StateName(state);
    EXPECT_EQ(io_->WriteFile("t1", "sbx_a", "/tmp/x", 0644, "x").code(), StatusCode::kConflict);
    EXPECT_EQ(io_->Remove("t1", "sbx_a", "/tmp/x", false).code(), StatusCode::kConflict);
  }
  // Listing answers in any state: a paused sandbox still has its processes.
  EXPECT_TRUE(io_->List("t1", "sbx_a").ok());
}

TEST_F(SandboxIoTest, ARunningSandboxNotBootedHereIsUnavailable) {
  Put("sbx_a", "t1", store::SandboxState::kRunning);
  EXPECT_EQ(io_->Start("t1", "sbx_a", ProcessSpec{}).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(io_->Get("t1", "sbx_a", "proc_1").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(io_->List("t1", "sbx_a")->empty());
}

}  // namespace
}  // namespace space::node
