// Netlink (rtnetlink through libmnl): the few link, address and route changes a sandbox's
// network needs, made in-process rather than by running `ip`.
//
// A Netlink is bound to the network namespace it was opened in, for its whole life: open one
// in a sandbox's namespace with OpenInNetns and it configures that namespace, whatever the
// caller's own. Not thread-safe (one request in flight per socket); cheap to open.
#pragma once

#include <netinet/in.h>

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

struct mnl_socket;

namespace space::network {

class Netlink {
 public:
  // A socket in the caller's network namespace.
  static Result<Netlink> Open();
  // A socket in the namespace `netns_fd` refers to (an fd of /proc/<pid>/ns/net). The switch
  // happens on a short-lived thread, so no caller thread ever leaves its own namespace.
  static Result<Netlink> OpenInNetns(int netns_fd);

  Netlink(Netlink&&) noexcept;
  Netlink& operator=(Netlink&&) noexcept;
  ~Netlink();

  // A veth pair: `name` here, `peer_name` created directly in the namespace `peer_netns_fd`.
  Status CreateVeth(const std::string& name, const std::string& peer_name, int peer_netns_fd);
  Status DeleteLink(const std::string& name);
  Result<int> LinkIndex(const std::string& name);
  Status SetLinkUp(int ifindex);
  // A point-to-point IPv4 address: `local` on the link, `peer` the one address beyond it (the
  // kernel adds the /32 route to it).
  Status AddPeerAddress(int ifindex, in_addr local, in_addr peer);
  Status AddDefaultRoute(int ifindex, in_addr gateway);
  // Names of the links whose name starts with `prefix`.
  Result<std::vector<std::string>> ListLinks(const std::string& prefix);

 private:
  explicit Netlink(mnl_socket* s);
  // Sends the request in buf_ and waits for its ack; `what` names it in errors.
  Status Transact(const std::string& what);

  mnl_socket* sock_ = nullptr;
  unsigned portid_ = 0;
  unsigned seq_ = 0;
  std::unique_ptr<char[]> buf_;
};

// Parses dotted-quad IPv4.
Result<in_addr> ParseIpv4(const std::string& text);
std::string FormatIpv4(in_addr a);

}  // namespace space::network
