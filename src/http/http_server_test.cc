// HttpServer's accept loop, as an API front uses it: the listening socket is shared with the
// node and with every later front, so neither a front's death nor its orderly stop may cost
// that socket a client, or its listening.
#include "http/http_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

namespace space::api {
namespace {

UniqueFd ConnectTo(uint16_t port) {
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return UniqueFd();
  return client;
}

// A client waiting in `listener`'s queue, taken without blocking.
UniqueFd TakeQueued(int listener) {
  if (::fcntl(listener, F_SETFL, O_NONBLOCK) != 0) return UniqueFd();
  return UniqueFd(::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
}

// Pins this thread to the first CPU it may use; restores its CPU mask and scheduling policy
// when the test ends, however it ends.
class PinnedToOneCpu {
 public:
  PinnedToOneCpu() {
    if (::sched_getaffinity(0, sizeof saved_mask_, &saved_mask_) != 0) return;
    saved_policy_ = ::sched_getscheduler(0);
    if (saved_policy_ < 0 || ::sched_getparam(0, &saved_param_) != 0) return;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &saved_mask_)) continue;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ok_ = ::sched_setaffinity(0, sizeof one, &one) == 0;
      return;
    }
  }
  ~PinnedToOneCpu() {
    if (saved_policy_ >= 0) ::sched_setscheduler(0, saved_policy_, &saved_param_);
    if (ok_) ::sched_setaffinity(0, sizeof saved_mask_, &saved_mask_);
  }
  bool ok() const { return ok_; }
  // Back to the policy it started with (the test's real-time stretch is over).
  void Unboost() const { ::sched_setscheduler(0, saved_policy_, &saved_param_); }

 private:
  cpu_set_t saved_mask_;
  int saved_policy_ = -1;
  sched_param saved_param_{};
  bool ok_ = false;
};

// Kills and reaps the forked server, however the test ends.
struct ChildGuard {
  pid_t pid = -1;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(HttpServerTest, AKilledServerLeavesTheNextClientQueued) {
  // The race, made certain: the server and this test share one CPU, and the test runs at a
  // real-time priority from the kill until its client is queued, so the killed server cannot
  // run in between. Woken from a blocking accept(2), it would still dequeue that client (the
  // kernel looks at its queue before the pending signal) and reset it as it dies. (Were the
  // loopback's packets handed to ksoftirqd, connect could block and let the server run first:
  // then a blocking accept could pass too, but this never fails wrongly.)
  PinnedToOneCpu pin;
  if (!pin.ok()) GTEST_SKIP() << "cannot pin to one CPU";
  Result<UniqueFd> listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  Result<uint16_t> port = ListeningPort(listener->get());
  ASSERT_TRUE(port.ok());
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  UniqueFd ready_r(ready[0]), ready_w(ready[1]);
  ChildGuard child;
  child.pid = ::fork();
  ASSERT_GE(child.pid, 0);
  if (child.pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives a test binary that died
    HttpServerConfig hc;
    hc.listen_fd = ::dup(listener->get());
    HttpServer server(hc, [](Request&, Responder& res) { res.Send(200, "text/plain", "served by the dead"); });
    if (!server.Start().ok()) ::_exit(1);
    (void)!::write(ready_w.get(), "r", 1);
    for (;;) ::pause();
  }
  ready_w.reset();
  pollfd p{ready_r.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10'000), 1) << "the server did not start in 10 s";
  char r = 0;
  ASSERT_EQ(::read(ready_r.get(), &r, 1), 1) << "the server did not start";
  ::usleep(300 * 1000);  // its accept thread is waiting by now

  sched_param fifo{};
  fifo.sched_priority = 10;
  if (::sched_setscheduler(0, SCHED_FIFO, &fifo) != 0) GTEST_SKIP() << "no real-time priority here";
  ASSERT_EQ(::kill(child.pid, SIGKILL), 0);
  UniqueFd client = ConnectTo(*port);
  pin.Unboost();
  ASSERT_TRUE(client.valid()) << errno;
  int status = 0;
  ASSERT_EQ(::waitpid(child.pid, &status, 0), child.pid);
  child.pid = -1;
  ASSERT_TRUE(WIFSIGNALED(status));

  // The client is still in the queue, for the next server.
  EXPECT_TRUE(TakeQueued(listener->get()).valid()) << "the killed server took the client with it (errno " << errno << ")";
}

TEST(HttpServerTest, AStoppedServerLeavesItsListeningSocketListening) {
  // A front that stops (its channel to the node closed) must not end the listening on a socket
  // the node keeps for its next front.
  Result<UniqueFd> listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  Result<uint16_t> port = ListeningPort(listener->get());
  ASSERT_TRUE(port.ok());
  {
    HttpServerConfig hc;
    hc.listen_fd = ::dup(listener->get());
    HttpServer server(hc, [](Request&, Responder& res) { res.Send(200, "text/plain", "ok"); });
    ASSERT_TRUE(server.Start().ok());
    server.Stop();
  }
  UniqueFd client = ConnectTo(*port);
  ASSERT_TRUE(client.valid()) << "connect after the server stopped: errno " << errno;
  EXPECT_TRUE(TakeQueued(listener->get()).valid()) << "errno " << errno;
}

}  // namespace
}  // namespace space::api
