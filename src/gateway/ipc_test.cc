#include "gateway/ipc.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <string>

namespace space::gateway::ipc {
namespace {

SandboxEgress SampleSandbox() {
  SandboxEgress s;
  s.sandbox_id = "sbx_1";
  s.team = "team_a";
  auto profile = credentials::ParseEgressProfile(
      "web", nlohmann::json::parse(R"({"allow":[{"host":"api.example.com","ports":[443]},{"cidr":"203.0.113.0/24"}]})"));
  EXPECT_TRUE(profile.ok()) << profile.status().ToString();
  s.profiles.push_back(*profile);
  SandboxEgress::Credential c;
  c.spec.name = "tok";
  c.spec.hosts = {"api.example.com"};
  c.spec.env = "TOKEN";
  c.spec.rate_limit_per_min = 5;
  c.placeholder = "space-cred-0123456789abcdef0123456789abcdef";
  s.credentials.push_back(c);
  return s;
}

TEST(IpcTest, EncodeDecodeRoundTripsEveryType) {
  struct Case {
    Type type;
    nlohmann::json fields;
    Sender from;
  };
  const Case cases[] = {
      {Type::kConfig, ConfigJson(GatewayConfig{"/var/lib/space/gateway", "10.0.0.1:53", "", "", 20000, 1024, 120000}),
       Sender::kNode},
      {Type::kRegister, {{"address", "100.64.0.2"}, {"sandbox", SandboxJson(SampleSandbox())}}, Sender::kNode},
      {Type::kUnregister, {{"address", "100.64.0.2"}}, Sender::kNode},
      {Type::kStop, nullptr, Sender::kNode},
      {Type::kSecretReply, {{"id", 7}, {"secret", "s3cr3t"}}, Sender::kNode},
      {Type::kSecretReply, {{"id", 7}, {"error", "not bound"}}, Sender::kNode},
      {Type::kReady,
       {{"ports", PortsJson({20000, 20001, 20002, 20003, 20004})}, {"ca_certificate_pem", "-----BEGIN CERTIFICATE-----"}},
       Sender::kWorker},
      {Type::kError, {{"message", "no CA"}}, Sender::kWorker},
      {Type::kSecretRequest, {{"id", 9}, {"team", "team_a"}, {"name", "tok"}}, Sender::kWorker},
      {Type::kAudit,
       {{"sandbox_id", "sbx_1"}, {"team", "team_a"}, {"kind", "egress"}, {"action", "deny"}, {"detail", {{"host", "x"}}}},
       Sender::kWorker},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(TypeName(c.type)));
    auto bytes = Encode(c.type, c.fields);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto msg = Decode(*bytes, c.from);
    ASSERT_TRUE(msg.ok()) << msg.status().ToString();
    EXPECT_EQ(msg->type, c.type);
    // The other side never sends this type.
    EXPECT_FALSE(Decode(*bytes, c.from == Sender::kNode ? Sender::kWorker : Sender::kNode).ok());
  }
}

TEST(IpcTest, DecodeRefusesMalformedMessages) {
  const std::string too_big = R"({"type":"error","message":")" + std::string(kMaxMessageBytes, 'x') + "\"}";
  struct Case {
    const char* what;
    std::string bytes;
    Sender from;
  };
  const Case cases[] = {
      {"empty", "", Sender::kWorker},
      {"over 1 MiB", too_big, Sender::kWorker},
      {"nested too deeply",
       R"({"type":"audit","sandbox_id":"s","team":"t","kind":"egress","action":"deny","detail":)" +
           std::string(1000, '[') + std::string(1000, ']') + "}",
       Sender::kWorker},
      {"not JSON", "{\"type\":", Sender::kWorker},
      {"truncated", R"({"type":"stop")", Sender::kNode},
      {"array", "[1,2]", Sender::kWorker},
      {"no type", R"({"message":"x"})", Sender::kWorker},
      {"type not a string", R"({"type":3})", Sender::kWorker},
      {"unknown type", R"({"type":"exec","cmd":"sh"})", Sender::kWorker},
      {"unknown field", R"({"type":"stop","extra":1})", Sender::kNode},
      {"missing field", R"({"type":"secret_request","id":1,"team":"t"})", Sender::kWorker},
      {"wrong field type", R"({"type":"secret_request","id":"1","team":"t","name":"tok"})", Sender::kWorker},
      {"negative id", R"({"type":"secret_request","id":-1,"team":"t","name":"tok"})", Sender::kWorker},
      {"bad credential name", R"({"type":"secret_request","id":1,"team":"t","name":"../x"})", Sender::kWorker},
      {"reply with both", R"({"type":"secret_reply","id":1,"secret":"a","error":"b"})", Sender::kNode},
      {"reply with neither", R"({"type":"secret_reply","id":1})", Sender::kNode},
      {"audit unknown kind",
       R"({"type":"audit","sandbox_id":"s","team":"t","kind":"root","action":"deny","detail":{}})", Sender::kWorker},
      {"audit action not a word",
       R"({"type":"audit","sandbox_id":"s","team":"t","kind":"egress","action":"de ny\n","detail":{}})",
       Sender::kWorker},
      {"audit detail not an object",
       R"({"type":"audit","sandbox_id":"s","team":"t","kind":"egress","action":"deny","detail":"x"})",
       Sender::kWorker},
      {"audit detail too large",
       R"({"type":"audit","sandbox_id":"s","team":"t","kind":"egress","action":"deny","detail":{"x":")" +
           std::string(kMaxAuditDetailBytes, 'a') + "\"}}",
       Sender::kWorker},
      {"audit team too long",
       R"({"type":"audit","sandbox_id":"s","team":")" + std::string(kMaxAuditFieldBytes + 1, 't') +
           R"(","kind":"egress","action":"deny","detail":{}})",
       Sender::kWorker},
      {"ready port zero",
       R"({"type":"ready","ports":{"dns":0,"http":1,"tls":2,"proxy":3,"tcp":4},"ca_certificate_pem":"x"})",
       Sender::kWorker},
      {"ready port missing", R"({"type":"ready","ports":{"dns":1},"ca_certificate_pem":"x"})", Sender::kWorker},
      {"config port out of range",
       R"({"type":"config","ca_dir":"/x","upstream_dns":"","upstream_ca_file":"","upstream_ca_pem":"",)"
       R"("ca_cert_pem":"","ca_key_pem":"","base_port":70000,)"
       R"("max_connections":1,"idle_timeout_ms":1})",
       Sender::kNode},
  };
  for (const auto& c : cases) {
    auto msg = Decode(c.bytes, c.from);
    EXPECT_FALSE(msg.ok()) << c.what;
    if (!msg.ok()) {
      EXPECT_EQ(msg.status().code(), StatusCode::kInvalidArgument) << c.what;
    }
  }
}

TEST(IpcTest, EncodeRefusesOversizedMessages) {
  auto bytes = Encode(Type::kError, {{"message", std::string(kMaxMessageBytes, 'x')}});
  EXPECT_FALSE(bytes.ok());
}

TEST(IpcTest, SandboxRoundTripsAndIsRevalidated) {
  SandboxEgress in = SampleSandbox();
  auto out = SandboxFromJson(SandboxJson(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->sandbox_id, "sbx_1");
  EXPECT_EQ(out->team, "team_a");
  ASSERT_EQ(out->profiles.size(), 1u);
  EXPECT_EQ(out->profiles[0].rules.size(), 2u);
  ASSERT_EQ(out->credentials.size(), 1u);
  EXPECT_EQ(out->credentials[0].spec.name, "tok");
  EXPECT_EQ(out->credentials[0].spec.env, "TOKEN");
  EXPECT_EQ(out->credentials[0].spec.rate_limit_per_min, 5);
  EXPECT_EQ(out->credentials[0].placeholder, in.credentials[0].placeholder);

  auto j = SandboxJson(in);
  auto bad = j;
  bad["profiles"][0]["allow"][0]["cidr"] = "127.0.0.0/8";  // a rule ParseEgressProfile refuses
  EXPECT_FALSE(SandboxFromJson(bad).ok());
  bad = j;
  bad["credentials"][0]["placeholder"] = "guessable";
  EXPECT_FALSE(SandboxFromJson(bad).ok());
  bad = j;
  bad["credentials"][0]["secret"] = "x";  // no secret ever travels in a registration
  EXPECT_FALSE(SandboxFromJson(bad).ok());
  bad = j;
  bad["extra"] = 1;
  EXPECT_FALSE(SandboxFromJson(bad).ok());
}

TEST(IpcTest, AddressesParseStrictly) {
  auto a = ParseAddress("100.64.0.9");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(AddressText(*a), "100.64.0.9");
  EXPECT_FALSE(ParseAddress("100.64.0").ok());
  EXPECT_FALSE(ParseAddress(7).ok());
}

TEST(IpcTest, ChannelCarriesMessagesAndRefusesJunk) {
  UniqueFd a, b;
  ASSERT_TRUE(MakeSocketPair(&a, &b).ok());
  int raw_b = b.get();
  Channel node(std::move(a), Sender::kWorker);
  Channel worker(std::move(b), Sender::kNode);
  ASSERT_TRUE(node.Send(Type::kUnregister, {{"address", "100.64.0.2"}}).ok());
  auto m = worker.Receive(1000);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->type, Type::kUnregister);

  // A large but legal message fits in one datagram.
  ASSERT_TRUE(worker.Send(Type::kError, {{"message", std::string(4000, 'e')}}).ok());
  EXPECT_TRUE(node.Receive(1000).ok());

  // Junk written straight to the socket is refused, and the channel stays usable.
  std::string junk(kMaxMessageBytes + 10, '{');
  ::send(raw_b, "not json", 8, 0);
  auto r = node.Receive(1000);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  ssize_t sent = ::send(raw_b, junk.data(), junk.size(), 0);
  if (sent > 0) {
    r = node.Receive(1000);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(node.Receive(0).status().code(), StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(worker.Send(Type::kError, {{"message", "still fine"}}).ok());
  EXPECT_TRUE(node.Receive(1000).ok());

  worker.Shutdown();
  EXPECT_EQ(node.Receive(1000).status().code(), StatusCode::kUnavailable);
}

TEST(IpcTest, SendToAPeerThatStopsReadingTimesOut) {
  UniqueFd a, b;
  ASSERT_TRUE(MakeSocketPair(&a, &b).ok());
  Channel node(std::move(a), Sender::kWorker);
  Channel worker(std::move(b), Sender::kNode);  // never reads
  Status st;
  for (int i = 0; i < 100000 && st.ok(); ++i) {
    st = node.Send(Type::kUnregister, {{"address", "100.64.0.2"}});
  }
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
}

}  // namespace
}  // namespace space::gateway::ipc
