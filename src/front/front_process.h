// FrontProcess: the node's side of its API front (front.h). Starts `space api-front` on the
// listening socket the node bound, hands each front's channel to the node's HttpServer, and
// starts a new front whenever one exits (a crash of the front costs its open connections,
// not the node): the node keeps the listening socket, so the port never closes.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "common/helper_spawn.h"
#include "common/privileged_acts.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "http/http_server.h"

namespace space::front {

class FrontProcess {
 public:
  // Starts the first front and waits until it has dropped root and is serving; from then on
  // a supervisor thread replaces it whenever it exits. `server` outlives this object. With
  // `user.map_ids`, every front starts as `user.uid` in a user namespace of its own and never
  // runs as root (common/helper_spawn.h); without, it starts as root and drops to nobody.
  // `privileged` (the broker; may be null) kills a front this process may not.
  static Result<std::unique_ptr<FrontProcess>> Start(UniqueFd listen_fd, api::HttpServer* server,
                                                     HelperUser user = {}, PrivilegedActs* privileged = nullptr);
  ~FrontProcess() { Stop(); }

  // Ends the front (the node is stopping); no replacement follows.
  void Stop();
  pid_t pid() const { return pid_.load(); }

 private:
  FrontProcess(UniqueFd listen_fd, api::HttpServer* server, HelperUser user, PrivilegedActs* privileged)
      : listen_fd_(std::move(listen_fd)), server_(server), user_(std::move(user)), privileged_(privileged) {}
  // One front: fork + exec, then its "ready" datagram. Returns its pidfd.
  Result<UniqueFd> Spawn();
  void Supervise(UniqueFd pidfd);

  const UniqueFd listen_fd_;
  api::HttpServer* const server_;
  const HelperUser user_;
  PrivilegedActs* const privileged_;
  std::atomic<pid_t> pid_{-1};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;     // guarded by mu_
  bool unkillable_ = false;   // guarded by mu_: Stop could not kill the front (no root broker)
  std::thread supervisor_;
};

}  // namespace space::front
