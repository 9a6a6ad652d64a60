#include "gateway/resolver.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/random.h"
#include "common/unique_fd.h"
#include "gateway/dns_message.h"

namespace space::gateway {

Result<std::unique_ptr<Resolver>> Resolver::Create(const std::string& server) {
  std::string s = server;
  if (s.empty()) {
    std::ifstream in("/etc/resolv.conf");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string key, value;
      if (words >> key >> value && key == "nameserver" && value.find(':') == std::string::npos) {
        s = value;
        break;
      }
    }
    if (s.empty()) s = "127.0.0.1";
  }
  uint16_t port = 53;
  size_t colon = s.find(':');
  if (colon != std::string::npos) {
    int p = std::atoi(s.c_str() + colon + 1);
    if (p <= 0 || p > 65535) return InvalidArgument("upstream dns: bad port in " + server);
    port = static_cast<uint16_t>(p);
    s = s.substr(0, colon);
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, s.c_str(), &sa.sin_addr) != 1) return InvalidArgument("upstream dns: not an IPv4 address: " + s);
  return std::unique_ptr<Resolver>(new Resolver(sa));
}

Result<std::string> Resolver::Forward(const std::string& query, int timeout_ms) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", "dns", errno);
  UniqueFd owned(fd);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&server_), sizeof server_) != 0) {
    return ErrnoStatus("connect", "upstream dns", errno);
  }
  if (::send(fd, query.data(), query.size(), 0) < 0) return ErrnoStatus("send", "upstream dns", errno);
  pollfd p{fd, POLLIN, 0};
  int r = ::poll(&p, 1, timeout_ms);
  if (r == 0) return DeadlineExceeded("upstream dns did not answer");
  if (r < 0) return ErrnoStatus("poll", "upstream dns", errno);
  std::string buf(4096, '\0');
  ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
  if (n < 0) return ErrnoStatus("recv", "upstream dns", errno);
  buf.resize(static_cast<size_t>(n));
  return buf;
}

Result<std::vector<in_addr>> Resolver::ResolveA(const std::string& name) {
  // A random id: an off-path spoofer must guess it (the socket's random port helps too).
  uint16_t id = static_cast<uint16_t>(std::stoul(RandomHex(2), nullptr, 16));
  ASSIGN_OR_RETURN(std::string answer, Forward(BuildDnsQuery(id, name)));
  return ParseDnsAnswerA(answer, id);
}

}  // namespace space::gateway
