// End-to-end: runs the built spaced binary as an ordinary child process (not PID 1, no
// namespaces) with one end of a socketpair as fd 3, and drives it through the protocol.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/syscall.h"
#include "common/unique_fd.h"
#include "guest/files.h"
#include "protocol/protocol.h"

namespace space::guest {
namespace {

using nlohmann::json;

struct ExecOutcome {
  std::string error_code;  // set when the exec was refused with kError
  std::string error_message;
  int pid = 0;
  std::string out, err;
  json exit;
};

// One spaced process and the node's end of its channel.
class SpacedProcess {
 public:
  SpacedProcess() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    channel_.reset(sv[0]);
    UniqueFd theirs(sv[1]);
    // Never hang a test run: a read that takes this long is a failure.
    timeval tv{20, 0};
    ::setsockopt(channel_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(channel_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(theirs.get(), kChannelFd);  // dup2 clears CLOEXEC on fd 3
      const char* argv[] = {"spaced", nullptr};
      const char* envp[] = {"SANDBOX_VAR=from-node", "PATH=/usr/bin:/bin", nullptr};
      ::execve(SPACED_PATH, const_cast<char**>(argv), const_cast<char**>(envp));
      ::_exit(127);
    }
    Frame hello = Next(0);
    EXPECT_EQ(hello.type, FrameType::kHello);
    EXPECT_EQ(json::parse(hello.payload)["version"], 1);
  }

  ~SpacedProcess() {
    channel_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  void Send(FrameType type, uint32_t stream, std::string_view payload) {
    ASSERT_TRUE(WriteFrame(channel_.get(), type, stream, payload).ok());
  }

  // The next frame on `stream`; frames for other streams are kept for later.
  Frame Next(uint32_t stream) {
    auto& q = pending_[stream];
    if (!q.empty()) {
      Frame f = std::move(q.front());
      q.pop_front();
      return f;
    }
    for (;;) {
      auto f = ReadFrame(channel_.get());
      if (!f.ok()) {
        ADD_FAILURE() << "reading the channel: " << f.status().ToString();
        return Frame{FrameType::kError, stream, "{}"};
      }
      if (f->stream == stream) return std::move(*f);
      pending_[f->stream].push_back(std::move(*f));
    }
  }

  ExecOutcome Exec(uint32_t stream, const json& req, const std::function<void(int pid)>& on_start = nullptr) {
    Send(FrameType::kExecStart, stream, req.dump());
    ExecOutcome r;
    Frame first = Next(stream);
    if (first.type == FrameType::kError) {
      json e = json::parse(first.payload);
      r.error_code = e["code"];
      r.error_message = e["message"];
      return r;
    }
    EXPECT_EQ(first.type, FrameType::kExecStarted);
    r.pid = json::parse(first.payload)["pid"];
    if (on_start) on_start(r.pid);
    for (;;) {
      Frame f = Next(stream);
      if (f.type == FrameType::kStdout) {
        r.out += f.payload;
      } else if (f.type == FrameType::kStderr) {
        r.err += f.payload;
      } else if (f.type == FrameType::kExit) {
        r.exit = json::parse(f.payload);
        return r;
      } else {
        ADD_FAILURE() << "unexpected frame type " << static_cast<int>(f.type) << ": " << f.payload;
        return r;
      }
    }
  }

  // A file op that answers with one frame; returns it.
  Frame FileOp(uint32_t stream, const json& op) {
    Send(FrameType::kFileOp, stream, op.dump());
    return Next(stream);
  }

  // waitpid on spaced with a deadline; returns the wait status or -1.
  int WaitExit(int timeout_ms = 5000) {
    int64_t end = MonoNowNs() + int64_t{timeout_ms} * 1'000'000;
    while (MonoNowNs() < end) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      ::usleep(10'000);
    }
    return -1;
  }

  int channel() const { return channel_.get(); }
  void CloseChannel() { channel_.reset(); }
  // Frames already read for `stream` but not taken yet.
  size_t Pending(uint32_t stream) { return pending_[stream].size(); }

  // Reads kWatchEvents on `stream` until `done` holds for the events so far (or a
  // non-event frame arrives, which is returned).
  Frame CollectWatch(uint32_t stream, std::vector<std::pair<std::string, std::string>>* events,
                     const std::function<bool()>& done) {
    while (!done()) {
      Frame f = Next(stream);
      if (f.type != FrameType::kWatchEvents) return f;
      json batch = json::parse(f.payload);
      for (const auto& e : batch["events"]) events->emplace_back(e["name"], e["type"]);
    }
    return Frame{FrameType::kWatchEvents, stream, ""};
  }

 private:
  UniqueFd channel_;
  pid_t pid_ = -1;
  std::map<uint32_t, std::deque<Frame>> pending_;
};

class SpacedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/spaced_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)DeletePath(dir_, true); }
  SpacedProcess spaced_;
  std::string dir_;
};

TEST_F(SpacedTest, PingPong) {
  spaced_.Send(FrameType::kPing, 0, "abc");
  Frame f = spaced_.Next(0);
  EXPECT_EQ(f.type, FrameType::kPong);
  EXPECT_EQ(f.payload, "abc");
}

TEST_F(SpacedTest, ExecOutputAndExitCode) {
  auto r = spaced_.Exec(1, {{"cmd", {"sh", "-c", "echo out; echo err >&2; exit 3"}}});
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit["exit_code"], 3);
  EXPECT_TRUE(r.exit["signal"].is_null());
  EXPECT_EQ(r.exit["timed_out"], false);
}

TEST_F(SpacedTest, ExecEnvironmentAndCwd) {
  auto r = spaced_.Exec(1, {{"cmd", {"sh", "-c", "echo $SANDBOX_VAR $REQ $TERM $LANG; pwd"}},
                            {"env", {{"REQ", "from-request"}}},
                            {"cwd", dir_}});
  EXPECT_EQ(r.out, "from-node from-request xterm C.UTF-8\n" + dir_ + "\n");
  EXPECT_EQ(r.exit["exit_code"], 0);
}

TEST_F(SpacedTest, ExecStdin) {
  auto r = spaced_.Exec(1, {{"cmd", {"cat"}}, {"stdin", true}}, [&](int) {
    spaced_.Send(FrameType::kStdin, 1, "hello ");
    spaced_.Send(FrameType::kStdin, 1, "world\n");
    spaced_.Send(FrameType::kStdin, 1, "");
  });
  EXPECT_EQ(r.out, "hello world\n");
  EXPECT_EQ(r.exit["exit_code"], 0);
}

TEST_F(SpacedTest, ExecWithoutStdinReadsEof) {
  auto r = spaced_.Exec(1, {{"cmd", {"cat"}}});
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.exit["exit_code"], 0);
}

TEST_F(SpacedTest, ExecTimeoutKillsProcessGroup) {
  auto start = std::chrono::steady_clock::now();
  auto r = spaced_.Exec(1, {{"cmd", {"sh", "-c", "sleep 30; echo never"}}, {"timeout_ms", 200}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(r.exit["timed_out"], true);
  EXPECT_EQ(r.exit["signal"], SIGKILL);
  EXPECT_TRUE(r.exit["exit_code"].is_null());
  EXPECT_EQ(r.out, "");
}

TEST_F(SpacedTest, ExecSignal) {
  auto r = spaced_.Exec(1, {{"cmd", {"sleep", "30"}}}, [&](int) {
    spaced_.Send(FrameType::kSignal, 1, "{\"signal\":\"bogus\"}");  // ignored
    spaced_.Send(FrameType::kSignal, 1, "{\"signal\":99}");         // ignored
    spaced_.Send(FrameType::kSignal, 1, "{\"signal\":15}");
  });
  EXPECT_EQ(r.exit["signal"], SIGTERM);
  EXPECT_EQ(r.exit["timed_out"], false);
}

TEST_F(SpacedTest, DroppedOutputIsReadAndCountedNotSent) {
  // 1 MiB to stdout once stdin says go; the node asked to drop output before that.
  auto r = spaced_.Exec(1, {{"cmd", {"sh", "-c", "read go; head -c 1048576 /dev/zero; echo e >&2"}}, {"stdin", true}},
                        [&](int) {
                          spaced_.Send(FrameType::kDropOutput, 1, "");
                          spaced_.Send(FrameType::kStdin, 1, "go\n");
                        });
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.exit["exit_code"], 0);
  EXPECT_EQ(r.exit["dropped_stdout"], 1048576);
  EXPECT_EQ(r.exit["dropped_stderr"], 2);
  // Without the request nothing is dropped and the exit says nothing about it.
  auto plain = spaced_.Exec(2, {{"cmd", {"echo", "hi"}}});
  EXPECT_EQ(plain.out, "hi\n");
  EXPECT_FALSE(plain.exit.contains("dropped_stdout"));
}

TEST_F(SpacedTest, ExitDoesNotWaitForDaemonizedGrandchild) {
  auto start = std::chrono::steady_clock::now();
  auto r = spaced_.Exec(1, {{"cmd", {"sh", "-c", "sleep 3 & echo hi"}}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2500));
  EXPECT_EQ(r.out, "hi\n");
  EXPECT_EQ(r.exit["exit_code"], 0);
}

TEST_F(SpacedTest, ExecFailuresAreErrors) {
  struct Case {
    json req;
    std::string code;
    std::string message_prefix;
  };
  const Case cases[] = {
      {{{"cmd", {"/no/such"}}}, "not_found", "exec /no/such: ENOENT"},
      {{{"cmd", {"no-such-cmd-xyz"}}}, "not_found", "exec no-such-cmd-xyz"},
      {{{"cmd", {"true"}}, {"cwd", "/no/such/dir"}}, "not_found", "chdir /no/such/dir"},
      {{{"cmd", {"true"}}, {"user", "no-such-user-xyz"}}, "not_found", "user no-such-user-xyz"},
      {{{"cmd", "true"}}, "invalid_argument", "exec request"},
      {{{"cmd", {"true"}}, {"env", {{"A=B", "1"}}}}, "invalid_argument", "exec request"},
  };
  uint32_t stream = 10;
  for (const Case& c : cases) {
    auto r = spaced_.Exec(stream++, c.req);
    EXPECT_EQ(r.error_code, c.code) << c.req.dump();
    EXPECT_EQ(r.error_message.rfind(c.message_prefix, 0), 0u) << r.error_message;
  }
}

TEST_F(SpacedTest, HostilePayloadsAnswerInvalidArgument) {
  const std::string payloads[] = {"", "null", "[]", "{", "\xff\xfe", std::string(200000, '['), "{\"cmd\":[1]}",
                                  "{\"op\":\"read\",\"path\":5}"};
  uint32_t stream = 100;
  for (const std::string& p : payloads) {
    for (FrameType t : {FrameType::kExecStart, FrameType::kFileOp}) {
      spaced_.Send(t, stream, p);
      Frame f = spaced_.Next(stream++);
      EXPECT_EQ(f.type, FrameType::kError);
      EXPECT_EQ(json::parse(f.payload)["code"], "invalid_argument");
    }
  }
  // Unknown frame types and frames for unknown streams are ignored; spaced stays up.
  spaced_.Send(static_cast<FrameType>(99), 5, "x");
  spaced_.Send(FrameType::kStdin, 12345, "x");
  spaced_.Send(FrameType::kFileData, 12345, "x");
  spaced_.Send(FrameType::kSignal, 12345, "{\"signal\":9}");
  spaced_.Send(FrameType::kPing, 0, "alive");
  EXPECT_EQ(spaced_.Next(0).payload, "alive");
}

TEST_F(SpacedTest, ConcurrentStreamsAreDemultiplexed) {
  spaced_.Send(FrameType::kExecStart, 1, json{{"cmd", {"sh", "-c", "sleep 0.2; echo one"}}}.dump());
  spaced_.Send(FrameType::kExecStart, 2, json{{"cmd", {"sh", "-c", "echo two"}}}.dump());
  std::map<uint32_t, std::string> out;
  for (uint32_t s : {2u, 1u}) {
    EXPECT_EQ(spaced_.Next(s).type, FrameType::kExecStarted);
    for (Frame f = spaced_.Next(s); f.type != FrameType::kExit; f = spaced_.Next(s)) out[s] += f.payload;
  }
  EXPECT_EQ(out[1], "one\n");
  EXPECT_EQ(out[2], "two\n");
}

TEST_F(SpacedTest, LargeOutput) {
  auto r = spaced_.Exec(1, {{"cmd", {"head", "-c", "10000000", "/dev/zero"}}});
  EXPECT_EQ(r.out.size(), 10'000'000u);
  EXPECT_EQ(r.exit["exit_code"], 0);
}

TEST_F(SpacedTest, SlowReaderGetsEverythingInOrder) {
  // The node not reading for a while fills spaced's outbox past its high watermark, so
  // child output pauses; nothing may be lost or reordered when it resumes.
  spaced_.Send(FrameType::kExecStart, 1, json{{"cmd", {"seq", "1", "2000000"}}}.dump());
  spaced_.Send(FrameType::kFileOp, 2, json{{"op", "read"}, {"path", "/proc/self/exe"}}.dump());
  ::usleep(300'000);
  std::string out;
  EXPECT_EQ(spaced_.Next(1).type, FrameType::kExecStarted);
  for (Frame f = spaced_.Next(1); f.type != FrameType::kExit; f = spaced_.Next(1)) out += f.payload;
  std::string expected;
  for (int i = 1; i <= 2000000; ++i) expected += std::to_string(i) + "\n";
  EXPECT_TRUE(out == expected) << out.size() << " vs " << expected.size();
  Frame r = spaced_.Next(2);
  ASSERT_EQ(r.type, FrameType::kFileResult);
  uint64_t size = json::parse(r.payload)["size"];
  uint64_t got = 0;
  for (Frame f = spaced_.Next(2); !f.payload.empty(); f = spaced_.Next(2)) got += f.payload.size();
  EXPECT_EQ(got, size);
}

TEST_F(SpacedTest, ExecAsUnprivilegedUser) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to switch users";
  auto r = spaced_.Exec(1, {{"cmd", {"sh", "-c", "id -u; id -g; grep -E '^Cap(Bnd|Eff|Amb)' /proc/self/status"}},
                            {"user", "nobody"}});
  if (r.error_code == "permission_denied") GTEST_SKIP() << "cannot switch users here: " << r.error_message;
  ASSERT_EQ(r.error_code, "") << r.error_message;
  EXPECT_EQ(r.out,
            "65534\n65534\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n");
}

TEST_F(SpacedTest, FileRoundTrip) {
  std::string data(300 * 1024, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 1000);
  const std::string path = dir_ + "/up/load.bin";

  spaced_.Send(FrameType::kFileOp, 1, json{{"op", "write"}, {"path", path}, {"mode", 0600}}.dump());
  for (size_t off = 0; off < data.size(); off += kChunkSize) {
    spaced_.Send(FrameType::kFileData, 1, std::string_view(data).substr(off, kChunkSize));
  }
  spaced_.Send(FrameType::kFileData, 1, "");
  Frame w = spaced_.Next(1);
  ASSERT_EQ(w.type, FrameType::kFileResult) << w.payload;
  EXPECT_EQ(json::parse(w.payload), (json{{"path", path}, {"size", data.size()}}));

  Frame r = spaced_.FileOp(2, {{"op", "read"}, {"path", path}});
  ASSERT_EQ(r.type, FrameType::kFileResult) << r.payload;
  EXPECT_EQ(json::parse(r.payload)["size"], data.size());
  std::string got;
  for (Frame f = spaced_.Next(2); f.type == FrameType::kFileData && !f.payload.empty(); f = spaced_.Next(2)) {
    EXPECT_LE(f.payload.size(), kChunkSize);
    got += f.payload;
  }
  EXPECT_TRUE(got == data);

  Frame st = spaced_.FileOp(3, {{"op", "stat"}, {"path", path}});
  ASSERT_EQ(st.type, FrameType::kFileResult);
  json entry = json::parse(st.payload);
  EXPECT_EQ(entry["type"], "file");
  EXPECT_EQ(entry["size"], data.size());
  EXPECT_EQ(entry["mode"], 0600);
  EXPECT_EQ(entry["name"], "load.bin");
}

TEST_F(SpacedTest, FileOpsTable) {
  auto upload = [&](uint32_t stream, const std::string& path, std::string_view body) {
    spaced_.Send(FrameType::kFileOp, stream, json{{"op", "write"}, {"path", path}}.dump());
    spaced_.Send(FrameType::kFileData, stream, body);
    spaced_.Send(FrameType::kFileData, stream, "");
    EXPECT_EQ(spaced_.Next(stream).type, FrameType::kFileResult);
  };
  upload(1, dir_ + "/a/b/f.txt", "hello");
  upload(2, dir_ + "/a/g.txt", "x");

  struct Case {
    json op;
    std::string error_code;  // "" for success
  };
  const Case cases[] = {
      {{{"op", "mkdir"}, {"path", dir_ + "/m/n"}}, ""},
      {{{"op", "read"}, {"path", dir_ + "/a"}}, "invalid_argument"},
      {{{"op", "read"}, {"path", dir_ + "/missing"}}, "not_found"},
      {{{"op", "stat"}, {"path", dir_ + "/missing"}}, "not_found"},
      {{{"op", "list"}, {"path", dir_ + "/missing"}}, "not_found"},
      {{{"op", "move"}, {"path", dir_ + "/a/g.txt"}, {"to", dir_ + "/moved/g2.txt"}}, ""},
      {{{"op", "move"}, {"path", dir_ + "/a/g.txt"}, {"to", dir_ + "/moved/g3.txt"}}, "not_found"},
      {{{"op", "delete"}, {"path", dir_ + "/a"}}, "conflict"},
      {{{"op", "write"}, {"path", dir_ + "/a/b/f.txt/x"}}, "invalid_argument"},
  };
  uint32_t stream = 10;
  for (const Case& c : cases) {
    Frame f = spaced_.FileOp(stream++, c.op);
    if (c.error_code.empty()) {
      EXPECT_EQ(f.type, FrameType::kFileResult) << c.op.dump() << " -> " << f.payload;
    } else {
      ASSERT_EQ(f.type, FrameType::kError) << c.op.dump();
      EXPECT_EQ(json::parse(f.payload)["code"], c.error_code) << c.op.dump() << " -> " << f.payload;
    }
  }

  Frame list = spaced_.FileOp(30, {{"op", "list"}, {"path", dir_}, {"depth", 3}});
  ASSERT_EQ(list.type, FrameType::kFileResult);
  std::vector<std::string> paths;
  json listing = json::parse(list.payload);
  for (const auto& e : listing["entries"]) paths.push_back(e["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{dir_ + "/a", dir_ + "/a/b", dir_ + "/a/b/f.txt", dir_ + "/m",
                                             dir_ + "/m/n", dir_ + "/moved", dir_ + "/moved/g2.txt"}));

  Frame del = spaced_.FileOp(31, {{"op", "delete"}, {"path", dir_ + "/a"}, {"recursive", true}});
  EXPECT_EQ(del.type, FrameType::kFileResult) << del.payload;
  struct stat st;
  EXPECT_NE(::lstat((dir_ + "/a").c_str(), &st), 0);
}

bool PtyAvailable() {
  int fd = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

TEST_F(SpacedTest, TtyProcessHasAControllingTerminalAndResizes) {
  if (!PtyAvailable()) GTEST_SKIP() << "no /dev/ptmx here";
  const char* script =
      "tty; stty size; test -t 0 && test -t 1 && test -t 2 && echo isatty; echo ctty > /dev/tty;"
      "read x; stty size; echo \"got:$x\"";
  spaced_.Send(FrameType::kExecStart, 1,
               json{{"cmd", {"sh", "-c", script}}, {"tty", true}, {"cols", 100}, {"rows", 30}}.dump());
  ASSERT_EQ(spaced_.Next(1).type, FrameType::kExecStarted);
  ExecOutcome r;
  bool resized = false;
  for (;;) {
    Frame f = spaced_.Next(1);
    if (f.type == FrameType::kExit) {
      r.exit = json::parse(f.payload);
      break;
    }
    ASSERT_TRUE(f.type == FrameType::kStdout || f.type == FrameType::kStderr) << static_cast<int>(f.type);
    (f.type == FrameType::kStdout ? r.out : r.err) += f.payload;
    // Resize only once the first size is printed, then let the script go on.
    if (!resized && r.out.find("ctty\r\n") != std::string::npos) {
      resized = true;
      spaced_.Send(FrameType::kResize, 1, R"({"cols":0,"rows":5})");  // invalid: ignored
      spaced_.Send(FrameType::kResize, 1, "not json");                // ignored
      spaced_.Send(FrameType::kResize, 1, R"({"cols":120,"rows":40})");
      spaced_.Send(FrameType::kStdin, 1, "hello\n");
    }
  }
  EXPECT_EQ(r.error_message, "");
  EXPECT_EQ(r.exit["exit_code"], 0) << r.out;
  EXPECT_EQ(r.err, "");  // stderr is the terminal too
  // The line discipline turns \n into \r\n and echoes the input.
  EXPECT_NE(r.out.find("/dev/pts/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("30 100\r\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("isatty\r\nctty\r\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hello\r\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("40 120\r\ngot:hello\r\n"), std::string::npos) << r.out;
}

TEST_F(SpacedTest, TtyOutputIsCompleteAtExit) {
  if (!PtyAvailable()) GTEST_SKIP() << "no /dev/ptmx here";
  // The master reads EIO once the child is gone; nothing written before must be lost.
  auto r = spaced_.Exec(1, {{"cmd", {"sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done"}},
                            {"tty", true}});
  EXPECT_EQ(r.exit["exit_code"], 0);
  EXPECT_NE(r.out.find("line0\r\n"), std::string::npos);
  EXPECT_NE(r.out.find("line2999\r\n"), std::string::npos);
  // A resize for a pipe process is ignored, not an error.
  auto p = spaced_.Exec(2, {{"cmd", {"sh", "-c", "read x; echo $x"}}, {"stdin", true}}, [&](int) {
    spaced_.Send(FrameType::kResize, 2, R"({"cols":10,"rows":10})");
    spaced_.Send(FrameType::kStdin, 2, "ok\n");
  });
  EXPECT_EQ(p.out, "ok\n");
}

TEST_F(SpacedTest, WatchStreamsChangesUntilStopped) {
  ASSERT_EQ(::mkdir((dir_ + "/sub").c_str(), 0755), 0);
  spaced_.Send(FrameType::kWatchStart, 1, json{{"path", dir_}, {"recursive", true}}.dump());
  ASSERT_EQ(spaced_.Next(1).type, FrameType::kWatchStarted);
  // Created and removed right away: both are seen (no polling interval to fall between).
  int fd = ::open((dir_ + "/sub/f.txt").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_EQ(::unlink((dir_ + "/sub/f.txt").c_str()), 0);
  std::vector<std::pair<std::string, std::string>> ev;
  auto has = [&](const std::string& name, const std::string& type) {
    return std::find(ev.begin(), ev.end(), std::pair{name, type}) != ev.end();
  };
  Frame other = spaced_.CollectWatch(1, &ev, [&] { return has("sub/f.txt", "remove"); });
  EXPECT_EQ(other.type, FrameType::kWatchEvents) << other.payload;
  EXPECT_TRUE(has("sub/f.txt", "create"));

  spaced_.Send(FrameType::kWatchStop, 1, "");
  ASSERT_EQ(::mkdir((dir_ + "/after").c_str(), 0755), 0);
  spaced_.Send(FrameType::kPing, 0, "p");
  EXPECT_EQ(spaced_.Next(0).type, FrameType::kPong);
  EXPECT_EQ(spaced_.Pending(1), 0u);
  // The stream id is free again.
  spaced_.Send(FrameType::kWatchStart, 1, json{{"path", dir_}}.dump());
  EXPECT_EQ(spaced_.Next(1).type, FrameType::kWatchStarted);
}

TEST_F(SpacedTest, WatchErrorsAndLimits) {
  struct Case {
    std::string request;
    std::string code;
  };
  const Case cases[] = {
      {json{{"path", dir_ + "/missing"}}.dump(), "not_found"},
      {json{{"path", "relative"}}.dump(), "invalid_argument"},
      {json{{"path", dir_}, {"recursive", "yes"}}.dump(), "invalid_argument"},
      {"[]", "invalid_argument"},
  };
  uint32_t stream = 1;
  for (const Case& c : cases) {
    spaced_.Send(FrameType::kWatchStart, stream, c.request);
    Frame f = spaced_.Next(stream++);
    ASSERT_EQ(f.type, FrameType::kError) << c.request;
    EXPECT_EQ(json::parse(f.payload)["code"], c.code) << c.request;
  }
  // At most kMaxWatchStreams at once.
  for (size_t i = 0; i < kMaxWatchStreams; ++i) {
    spaced_.Send(FrameType::kWatchStart, 100 + i, json{{"path", dir_}}.dump());
    ASSERT_EQ(spaced_.Next(100 + i).type, FrameType::kWatchStarted) << i;
  }
  spaced_.Send(FrameType::kWatchStart, 99, json{{"path", dir_}}.dump());
  Frame full = spaced_.Next(99);
  ASSERT_EQ(full.type, FrameType::kError);
  EXPECT_EQ(json::parse(full.payload)["code"], "resource_exhausted");
}

TEST_F(SpacedTest, WatchEndsWhenItsDirectoryGoes) {
  std::string root = dir_ + "/watched";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  spaced_.Send(FrameType::kWatchStart, 1, json{{"path", root}}.dump());
  ASSERT_EQ(spaced_.Next(1).type, FrameType::kWatchStarted);
  ASSERT_EQ(::rmdir(root.c_str()), 0);
  std::vector<std::pair<std::string, std::string>> ev;
  Frame end = spaced_.CollectWatch(1, &ev, [] { return false; });
  ASSERT_EQ(end.type, FrameType::kError);
  EXPECT_EQ(json::parse(end.payload)["code"], "not_found");
}

TEST(SpacedLifecycleTest, ChannelEofKillsProcessesAndExits) {
  SpacedProcess spaced;
  spaced.Send(FrameType::kExecStart, 1, json{{"cmd", {"sleep", "30"}}}.dump());
  Frame f = spaced.Next(1);
  ASSERT_EQ(f.type, FrameType::kExecStarted);
  int child = json::parse(f.payload)["pid"];
  spaced.CloseChannel();
  int status = spaced.WaitExit();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The sleep is gone (or a zombie awaiting a reaper outside our control).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    auto stat = ReadFileToString("/proc/" + std::to_string(child) + "/stat");
    gone = !stat.ok() || stat->find(") Z") != std::string::npos;
    if (!gone) ::usleep(10'000);
  }
  EXPECT_TRUE(gone);
}

TEST(SpacedLifecycleTest, GarbageEndsTheDaemon) {
  SpacedProcess spaced;
  std::string bad = EncodeFrame(FrameType::kPing, 0, "x");
  bad[0] = 7;  // wrong protocol version
  ASSERT_TRUE(WriteAll(spaced.channel(), bad).ok());
  int status = spaced.WaitExit();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
}

}  // namespace
}  // namespace space::guest
