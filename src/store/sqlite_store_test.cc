#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "store/store.h"

namespace space::store {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/store_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = OpenSqliteStore(dir_ + "/state.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override {
    store_.reset();
    std::string cmd = "rm -rf " + dir_;
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string dir_;
  std::unique_ptr<Store> store_;
};

SandboxRecord Sbx(const std::string& id, const std::string& team, const std::string& state) {
  SandboxRecord r;
  r.id = id;
  r.team = team;
  r.state = state;
  r.template_name = "busybox";
  r.template_digest = "sha256:00";
  r.runtime = "ns";
  r.node = "local";
  r.on_timeout = "destroy";
  return r;
}

TEST_F(SqliteStoreTest, SandboxUpsertAndTeamIsolation) {
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_a", "t1", "creating")).ok());
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_b", "t2", "running")).ok());
  auto r = Sbx("sbx_a", "t1", "running");
  r.uid_slot = 7;
  ASSERT_TRUE(store_->PutSandbox(r).ok());
  auto got = store_->GetSandbox("sbx_a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, "running");
  EXPECT_EQ(got->uid_slot, 7);
  SandboxFilter f;
  f.team = "t1";
  auto list = store_->ListSandboxes(f);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "sbx_a");
  EXPECT_EQ(store_->GetSandbox("sbx_zz").status().code(), StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, PagesByIdAndHidesDestroyed) {
  for (const char* id : {"sbx_1", "sbx_2", "sbx_3"}) ASSERT_TRUE(store_->PutSandbox(Sbx(id, "t", "running")).ok());
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_4", "t", "destroyed")).ok());
  SandboxFilter f;
  f.team = "t";
  f.limit = 2;
  auto page1 = store_->ListSandboxes(f);
  ASSERT_EQ(page1->size(), 2u);
  f.after_id = page1->back().id;
  auto page2 = store_->ListSandboxes(f);
  ASSERT_EQ(page2->size(), 1u);
  EXPECT_EQ((*page2)[0].id, "sbx_3");
  EXPECT_EQ(store_->ListLiveSandboxes()->size(), 3u);
}

TEST_F(SqliteStoreTest, OperationsCommandsAuditKeys) {
  OperationRecord op{"op_1", "t", "create", "sbx_1", "pending", "", 1, 0};
  ASSERT_TRUE(store_->PutOperation(op).ok());
  EXPECT_EQ(store_->ListUnfinishedOperations()->size(), 1u);
  op.state = "succeeded";
  ASSERT_TRUE(store_->PutOperation(op).ok());
  EXPECT_EQ(store_->ListUnfinishedOperations()->size(), 0u);
  EXPECT_EQ(store_->GetOperation("op_1")->state, "succeeded");

  CommandRecord c;
  c.pid = "proc_1";
  c.sandbox = "sbx_1";
  c.cmd_json = "[\"true\"]";
  ASSERT_TRUE(store_->PutCommand(c).ok());
  c.exit_code = 0;
  c.stdout_bytes = 5;
  ASSERT_TRUE(store_->PutCommand(c).ok());
  auto cmds = store_->ListCommands("sbx_1");
  ASSERT_EQ(cmds->size(), 1u);
  EXPECT_EQ((*cmds)[0].exit_code, 0);
  EXPECT_EQ((*cmds)[0].stdout_bytes, 5);

  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->AppendAudit({0, i, "t", "sbx_1", i == 2 ? "exec" : "lifecycle", "a", "{}"}).ok());
  }
  auto ev = store_->ListAudit({"t", "", "lifecycle", 10});
  ASSERT_EQ(ev->size(), 2u);
  EXPECT_GT((*ev)[0].seq, (*ev)[1].seq);  // newest first

  ASSERT_TRUE(store_->PutApiKey("abc", "t", "admin").ok());
  EXPECT_EQ(*store_->TeamForApiKey("abc"), "t");
  EXPECT_FALSE(store_->TeamForApiKey("zzz").ok());
}

TEST_F(SqliteStoreTest, SnapshotsAndHead) {
  auto sb = Sbx("sbx_a", "t", "running");
  sb.head_snapshot = "snap_1";
  ASSERT_TRUE(store_->PutSandbox(sb).ok());
  EXPECT_EQ(store_->GetSandbox("sbx_a")->head_snapshot, "snap_1");
  SnapshotRecord a{"snap_1", "t", "sbx_a", "", "one", "filesystem", "local", 0, 1, ""};
  SnapshotRecord b{"snap_2", "t", "sbx_a", "snap_1", "two", "filesystem", "local", 0, 2, ""};
  ASSERT_TRUE(store_->PutSnapshot(a).ok());
  ASSERT_TRUE(store_->PutSnapshot(b).ok());
  b.state = "restorable";
  b.size_bytes = 42;
  ASSERT_TRUE(store_->PutSnapshot(b).ok());
  auto list = store_->ListSnapshots("sbx_a");
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].state, "restorable");
  EXPECT_EQ((*list)[1].parent, "snap_1");
  EXPECT_EQ(store_->ListSnapshots("")->size(), 2u);
  EXPECT_EQ(store_->GetSnapshot("snap_9").status().code(), StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, CredentialsProfilesArePerTeam) {
  ASSERT_TRUE(store_->PutCredential({"t1", "openai", "{}", "v1:sealed", 1}).ok());
  ASSERT_TRUE(store_->PutCredential({"t2", "openai", "{}", "v1:other", 1}).ok());
  EXPECT_EQ(store_->GetCredential("t1", "openai")->sealed_secret, "v1:sealed");
  EXPECT_EQ(store_->ListCredentials("t1")->size(), 1u);
  EXPECT_EQ(store_->GetCredential("t3", "openai").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->DeleteCredential("t1", "openai").ok());
  EXPECT_EQ(store_->DeleteCredential("t1", "openai").code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->GetCredential("t2", "openai").ok());

  ASSERT_TRUE(store_->PutEgressProfile({"t1", "github", R"({"allow":[]})", 1}).ok());
  EXPECT_EQ(store_->ListEgressProfiles("t1")->size(), 1u);
  EXPECT_EQ(store_->ListEgressProfiles("t2")->size(), 0u);
  ASSERT_TRUE(store_->DeleteEgressProfile("t1", "github").ok());

  ASSERT_TRUE(store_->PutSandboxCredential({"sbx_a", "openai", "space-cred-x"}).ok());
  auto sc = store_->ListSandboxCredentials("sbx_a");
  ASSERT_EQ(sc->size(), 1u);
  EXPECT_EQ((*sc)[0].placeholder, "space-cred-x");
}

TEST_F(SqliteStoreTest, ReopenKeepsDataAndSchema) {
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_a", "t1", "running")).ok());
  store_.reset();
  auto s = OpenSqliteStore(dir_ + "/state.db");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->GetSandbox("sbx_a")->state, "running");
  store_ = std::move(s).value();
}

}  // namespace
}  // namespace space::store
