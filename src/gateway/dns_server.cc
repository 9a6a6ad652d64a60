// The gateway's DNS resolver for sandboxes: a name no profile of the asking sandbox allows is
// answered NXDOMAIN (and audited); an allowed one is forwarded upstream and the answer relayed.
#include <poll.h>
#include <system_error>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "credentials/host_pattern.h"
#include "gateway/dns_message.h"
#include "gateway/gateway_impl.h"

namespace space::gateway {
namespace {

constexpr int kMaxInflightQueries = 64;

bool NameAllowed(const SandboxEgress& s, const std::string& name) {
  for (const auto& p : s.profiles) {
    for (const auto& r : p.rules) {
      if (!r.host.empty() && credentials::HostMatches(r.host, name)) return true;
    }
  }
  return false;
}

}  // namespace

void Gateway::Impl::DnsLoop() {
  static std::atomic<int> inflight{0};
  std::string buf(kMaxDnsMessage, '\0');
  while (!stopping) {
    pollfd p{dns_fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    ssize_t n = ::recvfrom(dns_fd.get(), buf.data(), buf.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&peer), &len);
    if (n <= 0) continue;
    Conn c;
    c.sandbox = Lookup(peer.sin_addr);
    if (!c.sandbox) continue;
    std::string query(buf.data(), static_cast<size_t>(n));
    auto q = ParseDnsQuery(query);
    if (!q.ok()) continue;  // not a query we can answer; a real client retries or gives up
    auto reply = [this, peer](const std::string& msg) {
      ::sendto(dns_fd.get(), msg.data(), msg.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&peer), sizeof peer);
    };
    // A flood is refused and not audited: the audit log is not a sandbox's to fill.
    if (!sandbox_rate.Allow(c.sandbox->sandbox_id, WallNowMs(), kSandboxEventsPerMin)) {
      reply(DnsErrorResponse(query, *q, 5));
      continue;
    }
    if (!NameAllowed(*c.sandbox, q->name)) {
      reply(DnsErrorResponse(query, *q, 3));
      AuditEgress(c, "deny", {{"proto", "dns"}, {"host", q->name}, {"qtype", q->qtype}, {"reason", "no egress profile allows this name"}});
      continue;
    }
    if (inflight.fetch_add(1) >= kMaxInflightQueries) {
      inflight.fetch_sub(1);
      reply(DnsErrorResponse(query, *q, 2));  // SERVFAIL: busy
      continue;
    }
    auto work = [self = shared_from_this(), c, query, q = *q, reply] {
      auto answer = self->resolver->Forward(query);
      if (answer.ok() && answer->size() >= 2 && answer->compare(0, 2, query, 0, 2) == 0) {
        reply(*answer);
        self->AuditEgress(c, "allow", {{"proto", "dns"}, {"host", q.name}, {"qtype", q.qtype}});
      } else {
        reply(DnsErrorResponse(query, q, 2));
        LogWarn("gateway", "dns " + q.name + ": upstream " +
                               (answer.ok() ? std::string("answered with another id") : answer.status().ToString()));
      }
      inflight.fetch_sub(1);
    };
    try {
      std::thread(std::move(work)).detach();
    } catch (const std::system_error&) {
      inflight.fetch_sub(1);
      reply(DnsErrorResponse(query, *q, 2));  // no thread to be had: SERVFAIL, and go on
    }
  }
}

}  // namespace space::gateway
