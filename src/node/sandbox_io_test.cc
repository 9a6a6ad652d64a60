// SandboxIo's checks before anything reaches a guest: team isolation, the state a call needs,
// and a running sandbox that is not booted here. A real (SQLite) store, no guest.
#include "node/sandbox_io.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace space::node {
namespace {

class SandboxIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sandbox_io_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = store::OpenSqliteStore(dir_ + "/s.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    audit_ = std::make_unique<AuditLog>(store_.get());
    io_ = std::make_unique<SandboxIo>(store_.get(), &live_, audit_.get(), [this] { ++activity_; });
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }

  void Put(const std::string& id, const std::string& team, store::SandboxState state) {
    store::Sandbox s;
    s.id = id;
    s.team = team;
    s.state = state;
    ASSERT_TRUE(store_->PutSandbox(s).ok());
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
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
