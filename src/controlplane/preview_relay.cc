#include "controlplane/preview_relay.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "common/byte_relay.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/unique_fd.h"
#include "http/preview_host.h"

namespace space::controlplane {
namespace {

constexpr int kIdleMs = 600'000;

bool HopByHop(const std::string& lower) {
  static const char* const kNames[] = {"connection",        "keep-alive", "proxy-connection", "te",    "trailer",
                                       "transfer-encoding", "upgrade",    "content-length",   "expect"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return lower == n; });
}

// host and port of an http:// node URL.
Result<UniqueFd> ConnectTo(const std::string& url) {
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return InvalidArgument("node URL " + url + " is not http://");
  std::string hostport = url.substr(prefix.size());
  hostport = hostport.substr(0, hostport.find('/'));
  size_t colon = hostport.rfind(':');
  std::string host = colon == std::string::npos ? hostport : hostport.substr(0, colon);
  std::string port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Unavailable("node " + url + ": " + ::gai_strerror(rc));
  }
  Status last = Unavailable("node " + url + ": no address");
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    UniqueFd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s) continue;
    if (::connect(s.get(), a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      return s;
    }
    last = ErrnoStatus("connect", url, errno);
  }
  ::freeaddrinfo(res);
  return last;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string SerializeForNode(const api::Request& req) {
  std::string out = req.method + " " + req.target + " HTTP/1.1\r\n";
  for (const auto& [name, value] : req.headers) {
    if (HopByHop(name) || value.find_first_of("\r\n") != std::string::npos) continue;
    out += name + ": " + value + "\r\n";
  }
  const std::string up = req.Header("upgrade");
  if (!up.empty() && up.find_first_of("\r\n") == std::string::npos) {
    out += "Connection: upgrade\r\nUpgrade: " + up + "\r\n";
  } else {
    out += "Connection: close\r\n";
  }
  out += "Content-Length: " + std::to_string(req.body.size()) + "\r\n\r\n";
  out += req.body;
  return out;
}

void RelayUpgrade(const std::string& node_url, const api::Request& req, api::Responder& res, int idle_ms) {
  Result<UniqueFd> node = ConnectTo(node_url);
  if (!node.ok()) {
    LogWarn("router", node.status().ToString());
    return res.SendError(Unavailable("the node holding this sandbox did not take the connection"));
  }
  if (!SendAll(node->get(), SerializeForNode(req))) {
    return res.SendError(Unavailable("the node holding this sandbox did not take the request"));
  }
  Result<api::Responder::RawConnection> client = res.TakeConnection();
  if (!client.ok()) return;
  RelayBytes(client->fd, node->get(), client->leftover, "", idle_ms);
}

Result<std::string> PreviewRelay::NodeFor(const std::string& label) {
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = labels_.find(label);
    if (it != labels_.end()) id = it->second;
  }
  if (id.empty()) {
    ASSIGN_OR_RETURN(std::vector<store::Sandbox> live, store_->ListLiveSandboxes());
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& s : live) {
      labels_[SandboxHostLabel(s.id)] = s.id;
      if (SandboxHostLabel(s.id) == label) id = s.id;
    }
  }
  const Status missing = NotFound("no sandbox answers to " + label.substr(0, 80));
  if (id.empty()) return missing;
  Result<store::Sandbox> sb = store_->GetSandbox(id);
  if (!sb.ok() || store::IsEnded(sb->state)) return missing;
  ASSIGN_OR_RETURN(auto nodes, store_->ListNodes());
  ASSIGN_OR_RETURN(const int64_t now, store_->NowMs());
  for (const auto& n : nodes) {
    if (n.name == sb->node && n.state != store::NodeState::kLost && now - n.heartbeat_at_ms <= stale_ms_) return n.url;
  }
  return Unavailable("the node holding this sandbox is not answering; retry shortly");
}

bool PreviewRelay::Handle(api::Request& req, api::Responder& res) {
  std::optional<api::PreviewHost> ph = api::ParsePreviewHost(req.Header("host"), domain_);
  if (!ph) return false;
  Result<std::string> url = NodeFor(SandboxHostLabel(ph->label));
  if (!url.ok()) {
    res.SendError(url.status());
    return true;
  }
  RelayUpgrade(*url, req, res, kIdleMs);
  return true;
}

}  // namespace space::controlplane
