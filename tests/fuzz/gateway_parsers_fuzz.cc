// libFuzzer target: the egress gateway's parsers of bytes a sandbox sends (HTTP request heads,
// authorities, TLS ClientHello SNI, DNS queries) and of DNS answers from upstream. None may
// crash, hang or throw; a head that parses must serialize to a head that parses the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/dns_message.h"
#include "gateway/http_head.h"
#include "gateway/tls_hello.h"

using namespace space::gateway;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);

  auto head = ParseRequestHead(in);
  if (head.ok()) {
    if (head->head_size > in.size()) std::abort();
    auto again = ParseRequestHead(head->Serialize());
    if (!again.ok() || again->method != head->method || again->target != head->target ||
        again->headers != head->headers) {
      std::abort();
    }
    (void)SplitHostPort(head->Get("host"), 80);
  }
  (void)SplitHostPort(in.substr(0, 300), 443);

  std::string sni;
  (void)ParseClientHelloSni(in, &sni);
  if (sni.size() > 65535) std::abort();

  auto q = ParseDnsQuery(in);
  if (q.ok()) (void)DnsErrorResponse(in, *q, 5);
  uint16_t id = size >= 2 ? static_cast<uint16_t>(data[0] << 8 | data[1]) : 0;
  (void)ParseDnsAnswerA(in, id);
  return 0;
}
