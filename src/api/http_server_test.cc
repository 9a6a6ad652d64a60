// HttpServer's accept loop, as an API front uses it: a server killed while it waits for a client
// must leave the next client queued for whoever accepts next.
#include "api/http_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

namespace space::api {
namespace {

// Restores this thread's CPU mask and scheduling policy when the test ends, however it ends.
class PinnedToOneCpu {
 public:
  PinnedToOneCpu() {
    ok_ = ::sched_getaffinity(0, sizeof saved_, &saved_) == 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    ok_ = ok_ && ::sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~PinnedToOneCpu() {
    sched_param normal{};
    ::sched_setscheduler(0, SCHED_OTHER, &normal);
    ::sched_setaffinity(0, sizeof saved_, &saved_);
  }
  bool ok() const { return ok_; }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
};

TEST(HttpServerTest, AKilledServerLeavesTheNextClientQueued) {
  // The race, made certain: the server and this test share one CPU, and the test runs at a
  // real-time priority from the kill until its client is queued, so the killed server cannot
  // run in between. Woken from a blocking accept(2), it would still dequeue that client (the
  // kernel looks at its queue before the pending signal) and reset it as it dies.
  PinnedToOneCpu pin;
  if (!pin.ok()) GTEST_SKIP() << "cannot pin to CPU 0";
  Result<UniqueFd> listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  Result<uint16_t> port = ListeningPort(listener->get());
  ASSERT_TRUE(port.ok());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    HttpServerConfig hc;
    hc.listen_fd = ::dup(listener->get());
    HttpServer server(hc, [](Request&, Responder& res) { res.Send(200, "text/plain", "served by the dead"); });
    if (!server.Start().ok()) ::_exit(1);
    (void)!::write(ready[1], "r", 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char r = 0;
  ASSERT_EQ(::read(ready[0], &r, 1), 1);
  ::close(ready[0]);
  ::usleep(300 * 1000);  // its accept thread is waiting by now

  sched_param fifo{};
  fifo.sched_priority = 10;
  if (::sched_setscheduler(0, SCHED_FIFO, &fifo) != 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    GTEST_SKIP() << "no real-time priority here";
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(*port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int connected = ::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  sched_param normal{};
  ::sched_setscheduler(0, SCHED_OTHER, &normal);
  ASSERT_EQ(connected, 0) << errno;
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  // The client is still in the queue, for the next server.
  ASSERT_EQ(::fcntl(listener->get(), F_SETFL, O_NONBLOCK), 0);
  UniqueFd next(::accept4(listener->get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  EXPECT_TRUE(next.valid()) << "the killed server took the client with it (errno " << errno << ")";
}

}  // namespace
}  // namespace space::api
