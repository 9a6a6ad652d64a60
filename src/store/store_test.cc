// The Store contract, run against every backend: SQLite on a temp file and PostgreSQL on a
// private schema (pg_test_db.h). A behaviour one backend has and the other lacks fails here.
#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>

#include <cstdlib>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "store/pg_test_db.h"
#include "store/postgres_store.h"
#include "store/quotas.h"
#include "store/store.h"

namespace space::store {
namespace {

enum class Backend { kSqlite, kPostgres };
void PrintTo(Backend b, std::ostream* os) { *os << (b == Backend::kSqlite ? "sqlite" : "postgres"); }

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kSqlite) {
      char tmpl[] = "/tmp/store_test.XXXXXX";
      ASSERT_NE(mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
    } else {
      std::string why;
      if (!PgTestDb::Configured(&why)) {
        if (PgTestDb::Required()) FAIL() << why;
        GTEST_SKIP() << why;
      }
      pg_ = std::make_unique<PgTestDb>();
      Status st = pg_->Create();
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    auto s = Open();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override {
    store_.reset();
    pg_.reset();
    if (!dir_.empty()) {
      std::string cmd = "rm -rf " + dir_;
      ASSERT_EQ(std::system(cmd.c_str()), 0);
    }
  }
  // Opens the same database again (what a restarted server does).
  Result<std::unique_ptr<Store>> Open() {
    if (GetParam() == Backend::kSqlite) return OpenSqliteStore(dir_ + "/state.db");
    return OpenPostgresStore(pg_->url());
  }

  std::string dir_;
  std::unique_ptr<PgTestDb> pg_;
  std::unique_ptr<Store> store_;
};

Sandbox Sbx(const std::string& id, const std::string& team, std::string_view state) {
  Sandbox r;
  r.id = id;
  r.team = team;
  r.state = *ParseSandboxState(state);
  r.template_name = "busybox";
  r.template_digest = "sha256:00";
  r.node = "local";
  return r;
}

std::vector<std::string> Ids(const std::vector<Sandbox>& list) {
  std::vector<std::string> out;
  for (const auto& r : list) out.push_back(r.id);
  return out;
}

TEST_P(StoreTest, SandboxUpsertAndTeamIsolation) {
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_a", "t1", "creating")).ok());
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_b", "t2", "running")).ok());
  auto r = Sbx("sbx_a", "t1", "running");
  r.uid_slot = 7;
  ASSERT_TRUE(store_->PutSandbox(r).ok());
  auto got = store_->GetSandbox("sbx_a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, *ParseSandboxState("running"));
  EXPECT_EQ(got->uid_slot, 7);
  SandboxFilter f;
  f.team = "t1";
  auto list = store_->ListSandboxes(f);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "sbx_a");
  EXPECT_EQ(store_->GetSandbox("sbx_zz").status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, UpsertKeepsImmutableColumnsAndRoundTripsAll) {
  auto r = Sbx("sbx_a", "t1", "creating");
  r.created_at_ms = 1700000000123;
  r.env = {{"A", "1"}};
  r.metadata = {{"k", "v ' \" ; --"}};  // quotes travel as values, never as SQL
  r.expires_at_ms = 5;
  r.timeout_s = 300;
  r.resources = {.cpus = 0.5, .memory_mb = 256, .disk_mb = 100};
  r.timings = {{"create_ms", 3}};
  r.error = "";
  r.policy = {.every_s = 60, .keep = 3, .max_age_s = 600};
  r.egress = nlohmann::json::array({{{"name", "gh"}, {"allow", {"api.github.com:443"}}}});
  r.runtime = RuntimeKind::kVm;
  r.on_timeout = OnTimeout::kSuspend;
  ASSERT_TRUE(store_->PutSandbox(r).ok());
  auto changed = r;
  changed.team = "t2";                 // immutable
  changed.created_at_ms = 1;           // immutable
  changed.env = {};                    // immutable
  changed.state = SandboxState::kFailed;
  changed.error = "boom";
  changed.node = "n2";
  ASSERT_TRUE(store_->PutSandbox(changed).ok());
  auto got = store_->GetSandbox("sbx_a");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->team, "t1");
  EXPECT_EQ(got->created_at_ms, 1700000000123);
  EXPECT_EQ(got->env, r.env);
  EXPECT_EQ(got->metadata, r.metadata);
  EXPECT_EQ(got->state, *ParseSandboxState("failed"));
  EXPECT_EQ(got->error, "boom");
  EXPECT_EQ(got->node, "n2");
  EXPECT_EQ(got->timeout_s, 300);
  EXPECT_EQ(got->resources, r.resources);
  EXPECT_EQ(got->timings, r.timings);
  EXPECT_EQ(got->policy, r.policy);
  EXPECT_EQ(got->egress, r.egress);
  EXPECT_EQ(got->EgressProfileNames(), std::vector<std::string>{"gh"});
  EXPECT_EQ(got->runtime, RuntimeKind::kVm);
  EXPECT_EQ(got->on_timeout, OnTimeout::kSuspend);
  EXPECT_EQ(got->uid_slot, -1);
  EXPECT_TRUE(store_->ListLiveSandboxes()->empty());  // failed is not live
}

TEST_P(StoreTest, PagesByIdAndHidesDestroyed) {
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

TEST_P(StoreTest, ListSandboxFilters) {
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_1", "t", "running")).ok());
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_2", "t", "paused")).ok());
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_3", "t", "destroyed")).ok());
  struct Case {
    std::optional<SandboxState> state;
    bool include_destroyed;
    int limit;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {std::nullopt, false, 100, {"sbx_1", "sbx_2"}},
      {std::nullopt, true, 100, {"sbx_1", "sbx_2", "sbx_3"}},
      {SandboxState::kPaused, false, 100, {"sbx_2"}},
      {SandboxState::kDestroyed, false, 100, {"sbx_3"}},  // asking for a state overrides hiding destroyed
      {std::nullopt, true, 0, {}},
      {std::nullopt, true, -1, {}},
  };
  for (const Case& c : cases) {
    SandboxFilter f;
    f.team = "t";
    f.state = c.state;
    f.include_destroyed = c.include_destroyed;
    f.limit = c.limit;
    auto list = store_->ListSandboxes(f);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    EXPECT_EQ(Ids(*list), c.want) << (c.state ? StateName(*c.state) : "-") << " " << c.include_destroyed << " " << c.limit;
  }
}

// Paging tokens compare ids bytewise on both backends, whatever the database's collation.
TEST_P(StoreTest, IdsSortBytewise) {
  for (const char* id : {"sbx_a", "sbx_B", "sbx_Z", "sbx_0"}) ASSERT_TRUE(store_->PutSandbox(Sbx(id, "t", "running")).ok());
  SandboxFilter f;
  f.team = "t";
  EXPECT_EQ(Ids(*store_->ListSandboxes(f)), (std::vector<std::string>{"sbx_0", "sbx_B", "sbx_Z", "sbx_a"}));
  f.after_id = "sbx_Z";
  EXPECT_EQ(Ids(*store_->ListSandboxes(f)), (std::vector<std::string>{"sbx_a"}));
}

TEST_P(StoreTest, OperationsCommandsAuditKeys) {
  OperationRecord op{"op_1", "t", "create", "sbx_1", OperationState::kPending, "", 1, 0};
  ASSERT_TRUE(store_->PutOperation(op).ok());
  EXPECT_EQ(store_->ListUnfinishedOperations()->size(), 1u);
  op.state = OperationState::kSucceeded;
  ASSERT_TRUE(store_->PutOperation(op).ok());
  EXPECT_EQ(store_->ListUnfinishedOperations()->size(), 0u);
  EXPECT_EQ(store_->GetOperation("op_1")->state, OperationState::kSucceeded);
  EXPECT_EQ(store_->GetOperation("op_9").status().code(), StatusCode::kNotFound);

  CommandRecord c;
  c.pid = "proc_1";
  c.sandbox = "sbx_1";
  c.cmd = {"true", "a \" b"};
  ASSERT_TRUE(store_->PutCommand(c).ok());
  EXPECT_FALSE((*store_->ListCommands("sbx_1"))[0].exit_code.has_value());  // NULL while running
  c.exit_code = 0;
  c.stdout_bytes = 5;
  ASSERT_TRUE(store_->PutCommand(c).ok());
  auto cmds = store_->ListCommands("sbx_1");
  ASSERT_EQ(cmds->size(), 1u);
  EXPECT_EQ((*cmds)[0].exit_code, 0);
  EXPECT_EQ((*cmds)[0].stdout_bytes, 5);
  EXPECT_EQ((*cmds)[0].cmd, c.cmd);

  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->AppendAudit({0, i, "t", "sbx_1", i == 2 ? "exec" : "lifecycle", "a", "{}"}).ok());
  }
  auto ev = store_->ListAudit({"t", "", "lifecycle", 10});
  ASSERT_EQ(ev->size(), 2u);
  EXPECT_GT((*ev)[0].seq, (*ev)[1].seq);  // newest first

  const std::string digest(64, 'a');
  ASSERT_TRUE(store_->PutApiKey(digest, "t", "admin").ok());
  EXPECT_EQ(*store_->TeamForApiKey(digest), "t");
  EXPECT_EQ(store_->TeamForApiKey(std::string(64, 'b')).status().code(), StatusCode::kNotFound);
  // A key in clear (or any non-digest) is refused, never stored.
  for (const std::string& bad : {std::string("space_0123456789abcdef0123456789abcdef0123456789ab"), std::string(64, 'A'),
                                std::string(63, 'a'), std::string(65, 'a')}) {
    EXPECT_EQ(store_->PutApiKey(bad, "t", "admin").code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store_->TeamForApiKey(bad).status().code(), StatusCode::kNotFound) << bad;
  }
}

TEST_P(StoreTest, AuditFilters) {
  const AuditEvent events[] = {
      {0, 1, "t", "sbx_1", "exec", "exec", nlohmann::json::object()},
      {0, 2, "t", "sbx_2", "exec", "exec", nlohmann::json::object()},
      {0, 3, "t", "sbx_1", "lifecycle", "create", {{"x", 1}}},
      {0, 4, "u", "sbx_9", "exec", "exec", nlohmann::json::object()},
  };
  for (const auto& e : events) ASSERT_TRUE(store_->AppendAudit(e).ok());
  struct Case {
    AuditFilter filter;
    std::vector<int64_t> want_ts;  // newest first
  };
  const Case cases[] = {
      {{"t", "", "", 100}, {3, 2, 1}},
      {{"t", "sbx_1", "", 100}, {3, 1}},
      {{"t", "", "exec", 100}, {2, 1}},
      {{"t", "sbx_1", "exec", 100}, {1}},
      {{"t", "", "", 1}, {3}},
      {{"t", "", "", 0}, {}},
      {{"t", "", "", -1}, {3, 2, 1}},  // a negative limit means no limit
      {{"v", "", "", 100}, {}},
  };
  for (const Case& c : cases) {
    auto ev = store_->ListAudit(c.filter);
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    std::vector<int64_t> ts;
    for (const auto& e : *ev) ts.push_back(e.ts_ms);
    EXPECT_EQ(ts, c.want_ts) << c.filter.team << "/" << c.filter.sandbox << "/" << c.filter.kind << "/"
                             << c.filter.limit;
  }
  EXPECT_EQ((*store_->ListAudit({"t", "sbx_1", "lifecycle", 10}))[0].detail, nlohmann::json({{"x", 1}}));
}

TEST_P(StoreTest, SnapshotsAndHead) {
  auto sb = Sbx("sbx_a", "t", "running");
  sb.head_snapshot = "snap_1";
  ASSERT_TRUE(store_->PutSandbox(sb).ok());
  EXPECT_EQ(store_->GetSandbox("sbx_a")->head_snapshot, "snap_1");
  SnapshotRecord a{"snap_1", "t", "sbx_a", "", "one", "filesystem", SnapshotState::kLocal, 0, 1, ""};
  SnapshotRecord b{"snap_2", "t", "sbx_a", "snap_1", "two", "filesystem", SnapshotState::kLocal, 0, 2, ""};
  ASSERT_TRUE(store_->PutSnapshot(a).ok());
  ASSERT_TRUE(store_->PutSnapshot(b).ok());
  b.state = SnapshotState::kRestorable;
  b.size_bytes = 42;
  ASSERT_TRUE(store_->PutSnapshot(b).ok());
  auto list = store_->ListSnapshots("sbx_a");
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].state, SnapshotState::kRestorable);
  EXPECT_EQ((*list)[1].parent, "snap_1");
  EXPECT_EQ((*list)[1].size_bytes, 42);
  EXPECT_EQ(store_->ListSnapshots("")->size(), 2u);
  EXPECT_EQ(store_->ListSnapshots("sbx_b")->size(), 0u);
  EXPECT_EQ(store_->GetSnapshot("snap_2")->label, "two");
  EXPECT_EQ(store_->GetSnapshot("snap_9").status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, CredentialsProfilesArePerTeam) {
  ASSERT_TRUE(store_->PutCredential({"t1", "openai", "{}", "v1:sealed", 1}).ok());
  ASSERT_TRUE(store_->PutCredential({"t2", "openai", "{}", "v1:other", 1}).ok());
  EXPECT_EQ(store_->GetCredential("t1", "openai")->sealed_secret, "v1:sealed");
  EXPECT_EQ(store_->ListCredentials("t1")->size(), 1u);
  EXPECT_EQ(store_->GetCredential("t3", "openai").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->DeleteCredential("t1", "openai").ok());
  EXPECT_EQ(store_->DeleteCredential("t1", "openai").code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->GetCredential("t2", "openai").ok());

  ASSERT_TRUE(store_->PutEgressProfile({"t1", "github", R"({"allow":[]})", 1}).ok());
  ASSERT_TRUE(store_->PutEgressProfile({"t1", "github", R"({"allow":["x"]})", 2}).ok());
  EXPECT_EQ(store_->GetEgressProfile("t1", "github")->spec_json, R"({"allow":["x"]})");
  EXPECT_EQ(store_->ListEgressProfiles("t1")->size(), 1u);
  EXPECT_EQ(store_->ListEgressProfiles("t2")->size(), 0u);
  ASSERT_TRUE(store_->DeleteEgressProfile("t1", "github").ok());
  EXPECT_EQ(store_->DeleteEgressProfile("t1", "github").code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetEgressProfile("t1", "github").status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(store_->PutSandboxCredential({"sbx_a", "openai", "space-cred-x"}).ok());
  ASSERT_TRUE(store_->PutSandboxCredential({"sbx_a", "openai", "space-cred-y"}).ok());
  auto sc = store_->ListSandboxCredentials("sbx_a");
  ASSERT_EQ(sc->size(), 1u);
  EXPECT_EQ((*sc)[0].placeholder, "space-cred-y");
}

TEST_P(StoreTest, TeamsAndKeys) {
  ASSERT_TRUE(store_->PutTeam({"team-b", 5}).ok());
  ASSERT_TRUE(store_->PutTeam({"team-a", 6}).ok());
  EXPECT_EQ(store_->PutTeam({"team-a", 7}).code(), StatusCode::kConflict);
  auto teams = store_->ListTeams();
  ASSERT_TRUE(teams.ok());
  ASSERT_EQ(teams->size(), 2u);
  EXPECT_EQ((*teams)[0].name, "team-a");
  EXPECT_EQ((*teams)[0].created_at_ms, 6);
  EXPECT_EQ((*teams)[0].quotas, nlohmann::json::object());
  ASSERT_TRUE(store_->SetTeamQuotas("team-a", {{"sandboxes", 3}, {"cpus", 1.5}}).ok());
  EXPECT_EQ(store_->GetTeam("team-a")->quotas["sandboxes"], 3);
  EXPECT_EQ(store_->GetTeam("team-a")->quotas["cpus"], 1.5);
  EXPECT_EQ(store_->GetTeam("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->SetTeamQuotas("nope", nlohmann::json::object()).code(), StatusCode::kNotFound);

  ApiKeyRecord k{"key_1", "team-a", "ci", std::string(32, '1'), std::string(64, 'a'), {"sandboxes:read"}, 10, 99, 0};
  ASSERT_TRUE(store_->PutKey(k).ok());
  EXPECT_EQ(store_->PutKey(k).code(), StatusCode::kConflict);
  ApiKeyRecord clear = k;
  clear.id = "key_2";
  clear.secret_sha256 = "the-key-itself";
  EXPECT_EQ(store_->PutKey(clear).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(
      store_->PutKey({"key_3", "team-b", "bot", std::string(32, '3'), std::string(64, 'c'), {}, 11, 0, 0}).ok());
  auto got = store_->GetKey("key_1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->team, "team-a");
  EXPECT_EQ(got->salt, std::string(32, '1'));
  EXPECT_EQ(got->secret_sha256, std::string(64, 'a'));
  EXPECT_EQ(got->scopes, std::vector<std::string>{"sandboxes:read"});
  EXPECT_EQ(got->expires_at_ms, 99);
  EXPECT_EQ(got->revoked_at_ms, 0);
  EXPECT_EQ(store_->GetKey("key_9").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ListKeys("")->size(), 2u);
  ASSERT_EQ(store_->ListKeys("team-b")->size(), 1u);
  EXPECT_EQ((*store_->ListKeys("team-b"))[0].id, "key_3");
  ASSERT_TRUE(store_->RevokeKey("key_1", 50).ok());
  ASSERT_TRUE(store_->RevokeKey("key_1", 60).ok());  // the first time stays
  EXPECT_EQ(store_->GetKey("key_1")->revoked_at_ms, 50);
  EXPECT_EQ(store_->RevokeKey("key_9", 60).code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, QuotasCountWhatATeamHolds) {
  ASSERT_TRUE(store_->PutTeam({"quota-t", 1, {{"sandboxes", 2}, {"cpus", 3}, {"snapshots", 1}}}).ok());
  Resources r;
  r.cpus = 2;
  EXPECT_TRUE(AdmitSandbox(store_.get(), "quota-t", r).ok());
  Sandbox s;
  s.id = "sbx_q1";
  s.team = "quota-t";
  s.state = SandboxState::kRunning;
  s.resources = r;
  ASSERT_TRUE(store_->PutSandbox(s).ok());
  Status over = AdmitSandbox(store_.get(), "quota-t", r);  // 2 + 2 cpus > 3
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("quota 'cpus'"), std::string::npos) << over.message();
  r.cpus = 1;
  EXPECT_TRUE(AdmitSandbox(store_.get(), "quota-t", r).ok());
  s.id = "sbx_q2";
  ASSERT_TRUE(store_->PutSandbox(s).ok());
  s.id = "sbx_q3";
  s.state = SandboxState::kSuspended;  // holds no node resources: not counted
  ASSERT_TRUE(store_->PutSandbox(s).ok());
  over = AdmitSandbox(store_.get(), "quota-t", r);
  EXPECT_NE(over.message().find("quota 'sandboxes'"), std::string::npos) << over.message();
  // Other teams, the admin team and teams without a row are not limited.
  EXPECT_TRUE(AdmitSandbox(store_.get(), "default", r).ok());
  EXPECT_TRUE(AdmitSandbox(store_.get(), "no-row", r).ok());
  auto u = UsageOf(store_.get(), "quota-t");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->sandboxes, 2);
  EXPECT_EQ(u->cpus, 4);
  EXPECT_TRUE(AdmitSnapshot(store_.get(), "quota-t").ok());
  SnapshotRecord snap;
  snap.id = "snap_q1";
  snap.team = "quota-t";
  snap.sandbox = "sbx_q1";
  ASSERT_TRUE(store_->PutSnapshot(snap).ok());
  EXPECT_EQ(AdmitSnapshot(store_.get(), "quota-t").code(), StatusCode::kResourceExhausted);
}

TEST(QuotasTest, ParsesAndRefuses) {
  auto q = ParseQuotas({{"sandboxes", 3}, {"cpus", 1.5}, {"memory_mb", nullptr}});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, nlohmann::json({{"sandboxes", 3}, {"cpus", 1.5}}));
  for (const nlohmann::json& bad :
       {nlohmann::json({{"gpus", 1}}), nlohmann::json({{"sandboxes", -1}}), nlohmann::json({{"sandboxes", 1.5}}),
        nlohmann::json({{"cpus", "2"}}), nlohmann::json::array()}) {
    EXPECT_EQ(ParseQuotas(bad).status().code(), StatusCode::kInvalidArgument) << bad.dump();
  }
}

TEST_P(StoreTest, PortsPutListDelete) {
  ASSERT_TRUE(store_->PutPort({"sbx_a", 8000, "t1", false, false, std::string(64, 'a'), 5}).ok());
  ASSERT_TRUE(store_->PutPort({"sbx_a", 3000, "t1", true, true, "", 6}).ok());
  ASSERT_TRUE(store_->PutPort({"sbx_a", 8000, "t1", false, false, std::string(64, 'b'), 7}).ok());  // replaced
  ASSERT_TRUE(store_->PutPort({"sbx_b", 8000, "t2", true, false, "", 8}).ok());
  auto ports = store_->ListPorts("sbx_a");
  ASSERT_TRUE(ports.ok()) << ports.status().ToString();
  ASSERT_EQ(ports->size(), 2u);
  EXPECT_EQ((*ports)[0].port, 3000);
  EXPECT_TRUE((*ports)[0].is_public);
  EXPECT_TRUE((*ports)[0].auto_resume);
  EXPECT_EQ((*ports)[1].port, 8000);
  EXPECT_EQ((*ports)[1].token_sha256, std::string(64, 'b'));
  EXPECT_EQ((*ports)[1].created_at_ms, 7);
  ASSERT_TRUE(store_->DeletePort("sbx_a", 8000).ok());
  EXPECT_EQ(store_->DeletePort("sbx_a", 8000).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ListPorts("sbx_a")->size(), 1u);
  EXPECT_EQ(store_->ListPorts("sbx_b")->size(), 1u);
}

TEST_P(StoreTest, NodesHeartbeatDrainAndLoss) {
  NodeRecord a{"node-a", "http://10.0.0.1:7722", NodeState::kReady, 100, 3, {"base"}, 1000, 900};
  NodeRecord b{"node-b", "http://10.0.0.2:7722", NodeState::kReady, 50, 0, {}, 1000, 900};
  ASSERT_TRUE(store_->HeartbeatNode(a).ok());
  ASSERT_TRUE(store_->HeartbeatNode(b).ok());
  ASSERT_TRUE(store_->SetNodeState("node-b", NodeState::kDraining).ok());
  EXPECT_EQ(store_->SetNodeState("node-z", NodeState::kDraining).code(), StatusCode::kNotFound);
  b.heartbeat_at_ms = 2000;
  ASSERT_TRUE(store_->HeartbeatNode(b).ok());  // a heartbeat keeps `draining`
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].templates, std::vector<std::string>{"base"});
  EXPECT_EQ((*nodes)[1].state, NodeState::kDraining);
  EXPECT_EQ((*nodes)[1].heartbeat_at_ms, 2000);

  // node-a stopped heartbeating: exactly one claim gets it.
  auto lost = store_->ClaimLostNodes(1500);
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(*lost, std::vector<std::string>{"node-a"});
  auto again = store_->ClaimLostNodes(1500);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());

  auto put = [&](const std::string& id, const std::string& state, const std::string& node) {
    auto r = Sbx(id, "t1", state);
    r.node = node;
    ASSERT_TRUE(store_->PutSandbox(r).ok());
  };
  put("sbx_1", "running", "node-a");
  put("sbx_2", "suspended", "node-a");
  put("sbx_3", "resuming", "node-a");
  put("sbx_4", "destroyed", "node-a");
  put("sbx_5", "running", "node-b");
  auto n = store_->FailSandboxesOfNode("node-a", "node node-a lost");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(store_->GetSandbox("sbx_1")->state, *ParseSandboxState("failed"));
  EXPECT_EQ(store_->GetSandbox("sbx_1")->error, "node node-a lost");
  EXPECT_EQ(store_->GetSandbox("sbx_2")->state, *ParseSandboxState("suspended"));
  EXPECT_EQ(store_->GetSandbox("sbx_3")->state, *ParseSandboxState("suspended"));
  EXPECT_EQ(store_->GetSandbox("sbx_4")->state, *ParseSandboxState("destroyed"));
  EXPECT_EQ(store_->GetSandbox("sbx_5")->state, *ParseSandboxState("running"));

  // A suspended sandbox is claimed for resumption by one node only.
  auto c1 = store_->ClaimSandbox("sbx_2", SandboxState::kSuspended, SandboxState::kResuming, "node-b");
  auto c2 = store_->ClaimSandbox("sbx_2", SandboxState::kSuspended, SandboxState::kResuming, "node-c");
  ASSERT_TRUE(c1.ok() && c2.ok());
  EXPECT_TRUE(*c1);
  EXPECT_FALSE(*c2);
  EXPECT_EQ(store_->GetSandbox("sbx_2")->node, "node-b");

  // A heartbeat brings a lost node back.
  a.heartbeat_at_ms = 3000;
  ASSERT_TRUE(store_->HeartbeatNode(a).ok());
  EXPECT_EQ((*store_->ListNodes())[0].state, NodeState::kReady);
}

TEST_P(StoreTest, ClockIsTheStoresAndCloseToWallTime) {
  auto now = store_->NowMs();
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  // The test database runs on this machine: its clock and ours agree within a minute.
  EXPECT_LT(std::llabs(*now - WallNowMs()), 60000);
}

TEST_P(StoreTest, JobsAreLeasedToOneHolderAtATime) {
  JobRecord j{"job_1", "migrate", "sbx_1", "t1", nlohmann::json::object(), JobState::kPending, "", 0, 0, "", 10, 0};
  ASSERT_TRUE(store_->PutJob(j).ok());
  j.id = "job_2";
  j.target = "sbx_2";
  j.created_at_ms = 20;
  ASSERT_TRUE(store_->PutJob(j).ok());
  auto first = store_->ClaimJob("r1", 100, 5100);
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->id, "job_1");
  EXPECT_EQ((*first)->holder, "r1");
  EXPECT_EQ((*first)->attempts, 1);
  auto second = store_->ClaimJob("r2", 100, 5100);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->id, "job_2");
  auto none = store_->ClaimJob("r2", 200, 5200);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // r1 died: once its lease ran out, another replica takes the job over.
  auto taken = store_->ClaimJob("r2", 6000, 11000);
  ASSERT_TRUE(taken.ok() && taken->has_value());
  EXPECT_EQ((*taken)->id, "job_1");
  EXPECT_EQ((*taken)->attempts, 2);
  JobRecord done = **taken;
  done.state = JobState::kSucceeded;
  done.finished_at_ms = 6100;
  ASSERT_TRUE(store_->PutJob(done).ok());
  auto all = store_->ListJobs("");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].state, JobState::kSucceeded);
  auto one = store_->ListJobs("sbx_2");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].id, "job_2");
  // Finished jobs are never claimed again.
  auto later = store_->ClaimJob("r3", 20000, 25000);
  ASSERT_TRUE(later.ok() && later->has_value());
  EXPECT_EQ((*later)->id, "job_2");
  // Only the holder renews or finishes; r2's claim of job_2 was taken over by r3.
  auto renewed = store_->RenewJob("job_2", "r2", 30000, {{"step", 1}});
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed);
  renewed = store_->RenewJob("job_2", "r3", 30000, {{"step", 1}});
  ASSERT_TRUE(renewed.ok());
  EXPECT_TRUE(*renewed);
  EXPECT_EQ((*store_->ListJobs("sbx_2"))[0].payload, nlohmann::json({{"step", 1}}));
  auto finished = store_->FinishJob("job_2", "r2", JobState::kSucceeded, "", 1);
  ASSERT_TRUE(finished.ok());
  EXPECT_FALSE(*finished);
  finished = store_->FinishJob("job_2", "r3", JobState::kFailed, "boom", 2);
  ASSERT_TRUE(finished.ok());
  EXPECT_TRUE(*finished);
  EXPECT_EQ((*store_->ListJobs("sbx_2"))[0].error, "boom");
  auto empty = store_->ClaimJob("r3", 99999, 100000);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
}

TEST_P(StoreTest, ReopenKeepsDataAndSchema) {
  ASSERT_TRUE(store_->PutSandbox(Sbx("sbx_a", "t1", "running")).ok());
  store_.reset();
  auto s = Open();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->GetSandbox("sbx_a")->state, *ParseSandboxState("running"));
  store_ = std::move(s).value();
}

TEST_P(StoreTest, VolumesAndTheirOneWriter) {
  VolumeRecord v{"vol_1", "team-a", "data", 64, 1000, "", "", ""};
  ASSERT_TRUE(store_->PutVolume(v).ok());
  EXPECT_EQ(store_->PutVolume({"vol_2", "team-a", "data", 64, 1001, "", "", ""}).code(), StatusCode::kConflict)
      << "one name per team";
  ASSERT_TRUE(store_->PutVolume({"vol_3", "team-b", "data", 32, 1002, "", "", "vol_1"}).ok()) << "another team's name";
  auto got = store_->GetVolume("team-a", "data");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->id, "vol_1");
  EXPECT_EQ(got->size_mb, 64);
  EXPECT_EQ(store_->GetVolume("team-c", "data").status().code(), StatusCode::kNotFound);
  v.node = "node-a";
  v.manifest = "vsn_1";
  ASSERT_TRUE(store_->UpdateVolume(v).ok());
  EXPECT_EQ(store_->GetVolumeById("vol_1")->manifest, "vsn_1");
  EXPECT_EQ(store_->UpdateVolume({"vol_9", "", "", 1, 0, "", "", ""}).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ListVolumes("team-b")->size(), 1u);
  EXPECT_EQ(store_->ListVolumes("")->size(), 2u);

  ASSERT_TRUE(store_->PutVolumeMount({"vol_1", "sbx_w", "/data", false, 1}).ok());
  EXPECT_EQ(store_->PutVolumeMount({"vol_1", "sbx_x", "/data", false, 2}).code(), StatusCode::kConflict)
      << "a second writer";
  ASSERT_TRUE(store_->PutVolumeMount({"vol_1", "sbx_r", "/in", true, 3}).ok()) << "readers beside the writer";
  ASSERT_TRUE(store_->PutVolumeMount({"vol_1", "sbx_s", "/in", true, 4}).ok());
  EXPECT_EQ(store_->PutVolumeMount({"vol_1", "sbx_r", "/again", true, 5}).code(), StatusCode::kConflict)
      << "one mount of a volume per sandbox";
  EXPECT_EQ(store_->ListVolumeMounts("vol_1", "")->size(), 3u);
  auto of_r = store_->ListVolumeMounts("", "sbx_r");
  ASSERT_EQ(of_r->size(), 1u);
  EXPECT_TRUE((*of_r)[0].read_only);
  EXPECT_EQ((*of_r)[0].path, "/in");
  ASSERT_TRUE(store_->DeleteVolumeMounts("sbx_w").ok());
  EXPECT_TRUE(store_->PutVolumeMount({"vol_1", "sbx_x", "/data", false, 6}).ok()) << "the writer left";
  ASSERT_TRUE(store_->DeleteVolume("vol_1").ok());
  ASSERT_TRUE(store_->DeleteVolume("vol_1").ok());
  EXPECT_EQ(store_->GetVolumeById("vol_1").status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, BlobLeasesAndTheGate) {
  auto rows = store_->ListBlobLeases();
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].id, kBlobGateId);
  EXPECT_EQ((*rows)[0].holder, "");
  EXPECT_FALSE(store_->PutBlobLease({kBlobGateId, "x", 5}).ok()) << "the gate is claimed, never put";
  ASSERT_TRUE(store_->PutBlobLease({"lease-1", "node-a", 100}).ok());
  ASSERT_TRUE(store_->PutBlobLease({"lease-1", "node-a", 200}).ok());
  rows = store_->ListBlobLeases();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].until_ms, 200);

  EXPECT_TRUE(*store_->ClaimBlobGate("node-a", 1000, 2000));
  EXPECT_TRUE(*store_->ClaimBlobGate("node-a", 1500, 2500)) << "its holder extends it";
  EXPECT_FALSE(*store_->ClaimBlobGate("node-b", 2000, 3000)) << "held until 2500";
  EXPECT_TRUE(*store_->ClaimBlobGate("node-b", 2600, 3600)) << "a dead holder's gate is taken over";
  ASSERT_TRUE(store_->ReleaseBlobGate("node-a").ok());
  EXPECT_FALSE(*store_->ClaimBlobGate("node-a", 2700, 3700)) << "a stale holder's release did nothing";
  ASSERT_TRUE(store_->ReleaseBlobGate("node-b").ok());
  EXPECT_TRUE(*store_->ClaimBlobGate("node-a", 2700, 3700));

  ASSERT_TRUE(store_->DeleteBlobLease("lease-1").ok());
  ASSERT_TRUE(store_->DeleteBlobLease("lease-1").ok());
  ASSERT_TRUE(store_->DeleteBlobLease(kBlobGateId).ok());
  EXPECT_EQ(store_->ListBlobLeases()->size(), 1u) << "the gate row cannot be deleted";
}

// Of many claims at once, exactly one gets the gate.
TEST_P(StoreTest, OneGateClaimWinsARace) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  std::atomic<int> won{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto got = store_->ClaimBlobGate("holder-" + std::to_string(t), 1000, 60000);
      if (got.ok() && *got) ++won;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(won.load(), 1);
}

// The API calls the store from every connection thread at once.
TEST_P(StoreTest, ManyThreadsAtOnce) {
  constexpr int kThreads = 12;  // more than the PostgreSQL pool's connections
  constexpr int kEach = 25;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        std::string id = "sbx_" + std::to_string(t) + "_" + std::to_string(i);
        if (!store_->PutSandbox(Sbx(id, "t", "running")).ok()) ++failures[t];
        auto got = store_->GetSandbox(id);
        if (!got.ok() || got->id != id) ++failures[t];
        if (!store_->AppendAudit({0, i, "t", id, "lifecycle", "create", "{}"}).ok()) ++failures[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(store_->ListLiveSandboxes()->size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(store_->ListAudit({"t", "", "", -1})->size(), static_cast<size_t>(kThreads * kEach));
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kSqlite ? "sqlite" : "postgres";
                         });

}  // namespace
}  // namespace space::store
