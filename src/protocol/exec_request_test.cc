#include "protocol/exec_request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/protocol.h"

namespace space::guest {
namespace {

TEST(ParseExecRequestTest, Table) {
  struct Case {
    const char* name;
    std::string json;
    bool ok;
  };
  const std::string long_arg(kMaxArgBytes + 1, 'a');
  std::string many_args = "{\"cmd\":[";
  for (size_t i = 0; i <= kMaxArgs; ++i) many_args += std::string(i ? "," : "") + "\"a\"";
  many_args += "]}";
  const Case cases[] = {
      {"minimal", R"({"cmd":["ls"]})", true},
      {"full", R"({"cmd":["ls","-l"],"env":{"A":"1","_b2":""},"cwd":"/tmp","user":"user",
                   "timeout_ms":5,"stdin":true,"tty":false})", true},
      {"numeric user", R"({"cmd":["ls"],"user":1000})", true},
      {"nulls are absent", R"({"cmd":["ls"],"env":null,"cwd":null,"user":null,"timeout_ms":null})", true},
      {"unknown field", R"({"cmd":["ls"],"future":{"x":1}})", true},
      {"not json", "cmd=ls", false},
      {"truncated", R"({"cmd":["ls")", false},
      {"array body", R"(["ls"])", false},
      {"string body", R"("ls")", false},
      {"empty", "", false},
      {"no cmd", R"({})", false},
      {"empty cmd", R"({"cmd":[]})", false},
      {"cmd string", R"({"cmd":"ls"})", false},
      {"cmd number entry", R"({"cmd":["ls",1]})", false},
      {"cmd null entry", R"({"cmd":[null]})", false},
      {"empty argv0", R"({"cmd":[""]})", false},
      {"nul in arg", R"({"cmd":["ls","a\u0000b"]})", false},
      {"arg too long", "{\"cmd\":[\"" + long_arg + "\"]}", false},
      {"too many args", many_args, false},
      {"env array", R"({"cmd":["ls"],"env":["A=1"]})", false},
      {"env number value", R"({"cmd":["ls"],"env":{"A":1}})", false},
      {"env key with =", R"({"cmd":["ls"],"env":{"A=B":"1"}})", false},
      {"env key empty", R"({"cmd":["ls"],"env":{"":"1"}})", false},
      {"env key digit first", R"({"cmd":["ls"],"env":{"1A":"1"}})", false},
      {"env value nul", R"({"cmd":["ls"],"env":{"A":"\u0000"}})", false},
      {"relative cwd", R"({"cmd":["ls"],"cwd":"tmp"})", false},
      {"cwd number", R"({"cmd":["ls"],"cwd":5})", false},
      {"negative timeout", R"({"cmd":["ls"],"timeout_ms":-1})", false},
      {"float timeout", R"({"cmd":["ls"],"timeout_ms":1.5})", false},
      {"string timeout", R"({"cmd":["ls"],"timeout_ms":"5"})", false},
      {"stdin string", R"({"cmd":["ls"],"stdin":"yes"})", false},
      {"user object", R"({"cmd":["ls"],"user":{}})", false},
      {"user negative", R"({"cmd":["ls"],"user":-1})", false},
      {"user empty", R"({"cmd":["ls"],"user":""})", false},
      {"tty with size", R"({"cmd":["sh"],"tty":true,"cols":132,"rows":50})", true},
      {"tty size at the cap", R"({"cmd":["sh"],"tty":true,"cols":4096,"rows":1})", true},
      {"tty zero cols", R"({"cmd":["sh"],"tty":true,"cols":0})", false},
      {"tty huge rows", R"({"cmd":["sh"],"tty":true,"rows":65536})", false},
      {"tty negative cols", R"({"cmd":["sh"],"tty":true,"cols":-80})", false},
      {"tty float rows", R"({"cmd":["sh"],"tty":true,"rows":24.5})", false},
      {"tty string", R"({"cmd":["sh"],"tty":"yes"})", false},
      {"deep nesting", std::string(100000, '[') + std::string(100000, ']'), false},
      {"deep nesting in field", "{\"cmd\":[\"ls\"],\"x\":" + std::string(5000, '[') + std::string(5000, ']') + "}",
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParseExecRequest(c.json);
    EXPECT_EQ(r.ok(), c.ok) << r.status().ToString();
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(ParseExecRequestTest, Fields) {
  auto r = ParseExecRequest(
      R"({"cmd":["sh","-c","x"],"env":{"B":"2","A":"1"},"cwd":"/w","user":7,"timeout_ms":99,"stdin":true})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cmd, (std::vector<std::string>{"sh", "-c", "x"}));
  EXPECT_EQ(r->env.size(), 2u);
  EXPECT_EQ(r->cwd, "/w");
  EXPECT_EQ(r->user, "7");
  EXPECT_EQ(r->timeout_ms, 99u);
  EXPECT_TRUE(r->keep_stdin);
  auto d = ParseExecRequest(R"({"cmd":["ls"]})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->user, "root");
  EXPECT_FALSE(d->keep_stdin);
  EXPECT_FALSE(d->cwd.has_value());
}

bool operator==(const ExecRequest& a, const ExecRequest& b) {
  return a.cmd == b.cmd && a.env == b.env && a.cwd == b.cwd && a.user == b.user && a.timeout_ms == b.timeout_ms &&
         a.keep_stdin == b.keep_stdin && a.tty == b.tty && a.cols == b.cols && a.rows == b.rows;
}

// What the node encodes, the guest parses back as the same request. Env comes back in name
// order (a JSON object), so the cases list it that way.
TEST(EncodeExecRequestTest, RoundTrip) {
  struct Case {
    const char* name;
    ExecRequest req;
  };
  ExecRequest full;
  full.cmd = {"sh", "-c", "echo \"$A\" 'b c'"};
  full.env = {{"A", "1"}, {"EMPTY", ""}, {"_x2", "multi\nline=\u00e9"}};
  full.cwd = "/home/user/dir with space";
  full.user = "user";
  full.timeout_ms = 300000;
  full.keep_stdin = true;
  ExecRequest tty;
  tty.cmd = {"bash"};
  tty.tty = true;
  tty.cols = 132;
  tty.rows = 50;
  ExecRequest tty_limits;
  tty_limits.cmd = {"sh"};
  tty_limits.tty = true;
  tty_limits.cols = kMaxTtySize;
  tty_limits.rows = 1;
  ExecRequest uid;
  uid.cmd = {"/bin/id"};
  uid.user = "1000";
  uid.timeout_ms = 1;
  ExecRequest big;
  big.cmd = std::vector<std::string>(kMaxArgs, "a");
  big.cmd[0] = std::string(kMaxArgBytes, 'x');
  ExecRequest bytes;
  bytes.cmd = {"printf", std::string("\x01\x7f\t\"\\", 5)};
  const Case cases[] = {
      {"minimal", ExecRequest{.cmd = {"ls"}}},
      {"full", full},
      {"tty", tty},
      {"tty size at the limits", tty_limits},
      {"numeric user", uid},
      {"argv at the limits", big},
      {"control characters", bytes},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string payload = EncodeExecRequest(c.req);
    Result<ExecRequest> back = ParseExecRequest(payload);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(*back == c.req) << payload.substr(0, 200);
  }
}

TEST(EncodeExecRequestTest, Wire) {
  ExecRequest req{.cmd = {"ls"}, .env = {{"B", "2"}, {"A", "1"}, {"B", "3"}}};
  // Fields at rest are still written, the pty size only with tty; a repeated env name keeps
  // its last value.
  EXPECT_EQ(EncodeExecRequest(req),
            R"({"cmd":["ls"],"env":{"A":"1","B":"3"},"stdin":false,"timeout_ms":0,"user":"root"})");
  req.tty = true;
  req.cwd = "/w";
  EXPECT_EQ(EncodeExecRequest(req), R"({"cmd":["ls"],"cols":80,"cwd":"/w","env":{"A":"1","B":"3"},"rows":24,)"
                                    R"("stdin":false,"timeout_ms":0,"tty":true,"user":"root"})");
}

TEST(IsValidEnvNameTest, Table) {
  const std::pair<const char*, bool> cases[] = {{"PATH", true}, {"_", true},   {"a1_B", true}, {"", false},
                                                {"1A", false},  {"A-B", false}, {"A B", false}, {"A=", false}};
  for (auto [name, ok] : cases) EXPECT_EQ(IsValidEnvName(name), ok) << name;
}

TEST(ParseExecRequestTest, TtyDefaultsAndSize) {
  auto plain = ParseExecRequest(R"({"cmd":["sh"]})");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tty);
  EXPECT_EQ(plain->cols, 80);
  EXPECT_EQ(plain->rows, 24);
  auto sized = ParseExecRequest(R"({"cmd":["sh"],"tty":true,"cols":132,"rows":50})");
  ASSERT_TRUE(sized.ok());
  EXPECT_TRUE(sized->tty);
  EXPECT_EQ(sized->cols, 132);
  EXPECT_EQ(sized->rows, 50);
}

TEST(ParseTtySizeTest, Table) {
  struct Case {
    const char* json;
    bool ok;
  };
  const Case cases[] = {
      {R"({"cols":100,"rows":30})", true},
      {R"({"cols":1,"rows":4096})", true},
      {R"({"cols":100})", false},
      {R"({"rows":30})", false},
      {R"({})", false},
      {R"({"cols":0,"rows":30})", false},
      {R"({"cols":4097,"rows":30})", false},
      {R"({"cols":"100","rows":30})", false},
      {R"({"cols":-1,"rows":30})", false},
      {R"([100,30])", false},
      {"", false},
  };
  for (const Case& c : cases) {
    auto r = ParseTtySize(c.json);
    EXPECT_EQ(r.ok(), c.ok) << c.json;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.json;
    }
  }
  auto r = ParseTtySize(R"({"cols":100,"rows":30})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cols, 100);
  EXPECT_EQ(r->rows, 30);
}

}  // namespace
}  // namespace space::guest
