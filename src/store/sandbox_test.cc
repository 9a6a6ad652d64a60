#include "store/sandbox.h"

#include <gtest/gtest.h>

#include "store/store.h"

namespace space::store {
namespace {

TEST(SandboxStateTest, EveryStateRoundTripsThroughItsName) {
  for (auto s : {SandboxState::kCreating, SandboxState::kRunning, SandboxState::kPaused, SandboxState::kSuspending,
                 SandboxState::kSuspended, SandboxState::kResuming, SandboxState::kDestroying, SandboxState::kDestroyed,
                 SandboxState::kFailed}) {
    auto back = ParseSandboxState(StateName(s));
    ASSERT_TRUE(back.ok()) << StateName(s);
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(StateName(SandboxState::kRunning), "running");
  EXPECT_FALSE(ParseSandboxState("Running").ok());
  EXPECT_FALSE(ParseSandboxState("").ok());
  EXPECT_TRUE(IsEnded(SandboxState::kFailed));
  EXPECT_TRUE(IsEnded(SandboxState::kDestroyed));
  EXPECT_FALSE(IsEnded(SandboxState::kDestroying));
}

TEST(SandboxModelTest, DefaultsApplyToMissingAndMistypedColumns) {
  struct Case {
    const char* resources_json;
    Resources want;
  };
  const Case cases[] = {
      {"{}", {}},
      {"", {}},
      {"not json", {}},
      {"[1,2]", {}},
      {R"({"cpus": "2"})", {}},
      {R"({"cpus": 2})", {.cpus = 2}},
      {R"({"memory_mb": 1024, "disk_mb": 10})", {.memory_mb = 1024, .disk_mb = 10}},
  };
  for (const Case& c : cases) {
    SandboxRecord rec;
    rec.state = "running";
    rec.resources_json = c.resources_json;
    EXPECT_EQ(Sandbox::FromRecord(rec).resources, c.want) << c.resources_json;
  }
}

TEST(SandboxModelTest, AnUnknownStateReadsAsFailedWithTheReason) {
  SandboxRecord rec;
  rec.state = "hibernating";
  Sandbox s = Sandbox::FromRecord(rec);
  EXPECT_EQ(s.state, SandboxState::kFailed);
  EXPECT_NE(s.error.find("hibernating"), std::string::npos) << s.error;
}

TEST(SandboxModelTest, EmptyColumnsMeanNsDestroyAndNoPolicy) {
  SandboxRecord rec;
  rec.state = "running";
  Sandbox s = Sandbox::FromRecord(rec);
  EXPECT_EQ(s.runtime, RuntimeKind::kNs);
  EXPECT_EQ(s.on_timeout, OnTimeout::kDestroy);
  EXPECT_FALSE(s.policy.enabled());
  EXPECT_TRUE(s.policy.ToJson().empty());
  EXPECT_FALSE(s.has_egress());
  EXPECT_TRUE(s.metadata.empty());
}

TEST(SandboxModelTest, RecordRoundTrip) {
  Sandbox s;
  s.id = "sbx_1";
  s.team = "t";
  s.state = SandboxState::kSuspended;
  s.runtime = RuntimeKind::kVm;
  s.on_timeout = OnTimeout::kSuspend;
  s.metadata = {{"a", "b"}};
  s.env = {{"X", "1"}};
  s.egress = nlohmann::json::array({{{"name", "p"}, {"allow", {"h:1"}}}, "legacy"});
  s.resources = {.cpus = 0.25, .memory_mb = 64, .disk_mb = 32};
  s.policy = {.every_s = 5, .keep = 2, .max_age_s = 60};
  s.timings = {{"create_ms", 1.5}};
  Sandbox back = Sandbox::FromRecord(s.ToRecord());
  EXPECT_EQ(back.state, s.state);
  EXPECT_EQ(back.runtime, s.runtime);
  EXPECT_EQ(back.on_timeout, s.on_timeout);
  EXPECT_EQ(back.metadata, s.metadata);
  EXPECT_EQ(back.env, s.env);
  EXPECT_EQ(back.egress, s.egress);
  EXPECT_EQ(back.resources, s.resources);
  EXPECT_EQ(back.policy, s.policy);
  EXPECT_EQ(back.timings, s.timings);
  EXPECT_TRUE(back.has_egress());
  EXPECT_EQ(back.EgressProfileNames(), (std::vector<std::string>{"p", "legacy"}));
}

TEST(SandboxModelTest, MetadataKeepsOnlyStrings) {
  SandboxRecord rec;
  rec.state = "running";
  rec.metadata_json = R"({"a": "x", "b": 3, "c": null})";
  EXPECT_EQ(Sandbox::FromRecord(rec).metadata, (std::map<std::string, std::string>{{"a", "x"}}));
}

}  // namespace
}  // namespace space::store
