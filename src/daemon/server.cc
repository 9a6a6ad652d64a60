#include "daemon/server.h"

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>

#include "common/log.h"
#include "controlplane/controllers.h"
#include "controlplane/router.h"
#include "daemon/dev.h"
#include "http/http_server.h"
#include "store/open_store.h"

namespace space::daemon {
namespace {

// Becomes `user` (its uid, gid, no supplementary groups) when running as root; a setuid to a
// non-zero uid clears every capability. Fails rather than serve as root.
Status DropRoot(const std::string& user) {
  if (::geteuid() != 0) return Status::Ok();
  errno = 0;
  passwd* pw = ::getpwnam(user.c_str());
  if (pw == nullptr) return NotFound("user " + user + " (--user) does not exist");
  if (pw->pw_uid == 0) return InvalidArgument("--user " + user + " is root; the server must not run as root");
  if (::setgroups(0, nullptr) != 0) return ErrnoStatus("setgroups", "0", errno);
  if (::setgid(pw->pw_gid) != 0) return ErrnoStatus("setgid", std::to_string(pw->pw_gid), errno);
  if (::setuid(pw->pw_uid) != 0) return ErrnoStatus("setuid", std::to_string(pw->pw_uid), errno);
  if (::setuid(0) == 0) return Internal("could regain root after dropping it");
  return Status::Ok();
}

}  // namespace

int RunServer(const ServerOptions& options) {
  api::HttpServerConfig hc;
  if (!ParseListen(options.listen, &hc.address, &hc.port)) {
    std::cerr << "space server: --listen must be ADDR:PORT\n";
    return 2;
  }
  if (options.store.empty()) {
    std::cerr << "space server: --store must name the fleet's shared store (postgres://...)\n";
    return 2;
  }
  auto token = ReadFleetToken(options.fleet_token_file);
  if (!token.ok()) {
    std::cerr << "space server: " << token.status().ToString() << "\n";
    return 2;
  }
  api::RateLimit rate_limit;
  if (!api::ParseRateLimit(options.api_rate_limit, &rate_limit)) {
    std::cerr << "space server: --api-rate-limit must be RATE[:BURST] (requests per second)\n";
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  // Before the store: its connections are made as the unprivileged user too.
  if (Status st = DropRoot(options.user); !st.ok()) {
    std::cerr << "space server: " << st.ToString() << "\n";
    return 1;
  }
  auto store = store::OpenStore(options.store);
  if (!store.ok()) {
    std::cerr << "space server: " << store.status().ToString() << "\n";
    return 1;
  }
  std::string replica = options.replica;
  if (replica.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    replica = std::string(host) + "-" + std::to_string(::getpid());
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  controlplane::RouterConfig rc;
  rc.stale_ms = options.lost_after_ms;
  rc.preview_domain = options.preview_domain;
  controlplane::Router router(store->get(), rate_limit, rc);
  controlplane::ControllersConfig cc;
  cc.replica = replica;
  cc.fleet_token = *token;
  cc.lost_after_ms = options.lost_after_ms;
  cc.stale_ms = options.lost_after_ms;
  cc.lease_ms = options.job_lease_ms;
  controlplane::Controllers controllers(store->get(), cc);
  api::HttpServer server(hc, [&router](api::Request& req, api::Responder& res) { router.Handle(req, res); });
  auto bound = server.Start();
  if (!bound.ok()) {
    std::cerr << "space server: " << bound.status().ToString() << "\n";
    return 1;
  }
  controllers.Start();
  std::printf("SPACE server %s listening on http://%s:%u\n", replica.c_str(), hc.address.c_str(), *bound);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&sigs, &sig);
  LogInfo("server", "shutting down");
  controllers.Stop();
  server.Stop();
  // As in `space dev`: connection threads may still be relaying a stream.
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(0);
}

}  // namespace space::daemon
