#include "node/credential_service.h"

#include <gtest/gtest.h>

#include "common/clock.h"
#include "credentials/secret_box.h"
#include "node/temp_store_test_util.h"

namespace space::node {
namespace {

class CredentialServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(store(), nullptr);
    std::array<uint8_t, credentials::Kek::kSize> bytes{};
    bytes.fill(7);
    kek_ = std::make_unique<credentials::Kek>(bytes);
    audit_ = std::make_unique<AuditLog>(store());
    service_ = std::make_unique<CredentialService>(store(), kek_.get(), audit_.get());
  }

  credentials::CredentialSpec Spec(const std::string& name, const std::string& scope = "team") {
    credentials::CredentialSpec s;
    s.name = name;
    s.hosts = {"api.example.com"};
    s.env = "TOKEN_" + std::to_string(name.size());
    s.scope = scope;
    return s;
  }

  store::Store* store() const { return temp_.get(); }

  TempStore temp_;
  std::unique_ptr<credentials::Kek> kek_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<CredentialService> service_;
};

TEST_F(CredentialServiceTest, TheSecretIsStoredSealedAndNeverShown) {
  ASSERT_TRUE(service_->Put("t1", Spec("gh"), "s3cret-value").ok());
  auto rec = store()->GetCredential("t1", "gh");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->sealed_secret.find("s3cret-value"), std::string::npos);
  EXPECT_EQ(rec->spec_json.find("s3cret-value"), std::string::npos);
  auto opened = credentials::Open(*kek_, rec->sealed_secret, credentials::CredentialAad("t1", "gh"));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(*opened, "s3cret-value");
  auto got = service_->Get("t1", "gh");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->spec.hosts, std::vector<std::string>{"api.example.com"});
  EXPECT_EQ(got->spec.env, "TOKEN_2");
}

TEST_F(CredentialServiceTest, TeamsSeeOnlyTheirOwn) {
  ASSERT_TRUE(service_->Put("t1", Spec("gh"), "a").ok());
  EXPECT_EQ(service_->Get("t2", "gh").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(service_->List("t2")->empty());
  EXPECT_EQ(service_->List("t1")->size(), 1u);
  EXPECT_EQ(service_->Delete("t2", "gh").code(), StatusCode::kNotFound);
  EXPECT_TRUE(service_->Delete("t1", "gh").ok());
  EXPECT_TRUE(service_->List("t1")->empty());
}

TEST_F(CredentialServiceTest, AttachChecksEveryCredentialBeforeAttachingAny) {
  ASSERT_TRUE(service_->Put("t1", Spec("ok"), "a").ok());
  auto expired = Spec("old");
  expired.expires_at_ms = WallNowMs() - 1000;
  ASSERT_TRUE(service_->Put("t1", expired, "b").ok());
  ASSERT_TRUE(service_->Put("t1", Spec("mine", "sandbox:sbx_other"), "c").ok());
  struct Case {
    std::vector<std::string> names;
    StatusCode want;
  };
  const Case cases[] = {
      {{"ok", "missing"}, StatusCode::kNotFound},
      {{"ok", "old"}, StatusCode::kConflict},
      {{"ok", "mine"}, StatusCode::kPermissionDenied},
  };
  for (const Case& c : cases) {
    std::map<std::string, std::string> env;
    EXPECT_EQ(service_->Attach("t1", "sbx_1", c.names, {}, &env).code(), c.want);
    EXPECT_TRUE(env.empty());
    EXPECT_TRUE(store()->ListSandboxCredentials("sbx_1")->empty()) << "a refused attach left a placeholder";
  }
  std::map<std::string, std::string> env;
  ASSERT_TRUE(service_->Attach("t1", "sbx_1", {"ok"}, {}, &env).ok());
  ASSERT_EQ(env.count("TOKEN_2"), 1u);
  EXPECT_NE(env["TOKEN_2"], "a");  // a placeholder, never the secret
  auto held = service_->HeldBy("t1", "sbx_1");
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ((*held)[0].placeholder, env["TOKEN_2"]);
}

TEST_F(CredentialServiceTest, AForkKeepsAllButTheParentsOwn) {
  ASSERT_TRUE(service_->Put("t1", Spec("team"), "a").ok());
  ASSERT_TRUE(service_->Put("t1", Spec("own", "sandbox:sbx_p"), "b").ok());
  std::map<std::string, std::string> env;
  ASSERT_TRUE(service_->Attach("t1", "sbx_p", {"team", "own"}, {}, &env).ok());
  ASSERT_EQ(env.size(), 2u);
  auto names = service_->InheritedBy("t1", "sbx_p", &env);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"team"});
  EXPECT_EQ(env.size(), 1u);
  EXPECT_EQ(env.count("TOKEN_3"), 0u);  // the parent-scoped credential's variable is gone
}

TEST_F(CredentialServiceTest, ProfilesRoundTrip) {
  auto profile = credentials::ParseEgressProfile("gh", {{"allow", {{{"host", "api.github.com"}, {"ports", {443}}}}}});
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  ASSERT_TRUE(service_->PutProfile("t1", *profile).ok());
  auto got = service_->GetProfile("t1", "gh");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(credentials::EgressProfileJson(*got), credentials::EgressProfileJson(*profile));
  EXPECT_EQ(service_->GetProfile("t2", "gh").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->ListProfiles("t1")->size(), 1u);
  EXPECT_TRUE(service_->DeleteProfile("t1", "gh").ok());
  EXPECT_TRUE(service_->ListProfiles("t1")->empty());
}

}  // namespace
}  // namespace space::node
