// Resolver: the gateway's own DNS client, asking one configured upstream server over UDP.
// The gateway resolves names itself rather than trusting a sandbox's lookup. Thread-safe.
#pragma once

#include <netinet/in.h>

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace space::gateway {

class Resolver {
 public:
  // `server` is "ip:port" or "ip"; empty means the first nameserver of /etc/resolv.conf.
  static Result<std::unique_ptr<Resolver>> Create(const std::string& server);

  // The A records of `name` (kNotFound when it does not exist).
  Result<std::vector<in_addr>> ResolveA(const std::string& name);
  // Sends a sandbox's raw query upstream and returns the raw answer.
  Result<std::string> Forward(const std::string& query, int timeout_ms = 3000);

 private:
  explicit Resolver(sockaddr_in server) : server_(server) {}
  sockaddr_in server_;
};

}  // namespace space::gateway
