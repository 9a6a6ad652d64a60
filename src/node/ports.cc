#include "node/ports.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "common/clock.h"
#include "common/hmac.h"
#include "common/ids.h"
#include "common/random.h"
#include "node/lifecycle.h"
#include "node/live.h"
#include "node/owned_sandbox.h"
#include "protocol/protocol.h"

namespace space::node {
namespace {

// How long a preview request waits for an auto-resumed sandbox to run again (a suspended one
// is restored from the snapshot store).
constexpr int64_t kResumeTimeoutMs = 120'000;

}  // namespace

PreviewConnection::~PreviewConnection() {
  tunnel_->Close();
  if (release_) release_();
}

std::string Ports::HostLabel(const std::string& id) { return SandboxHostLabel(id); }

std::string Ports::Url(const std::string& id, int64_t port) const {
  std::string host =
      (port == 0 ? std::string("{port}") : std::to_string(port)) + "-" + HostLabel(id) + "." + config_.domain;
  if (config_.listen_port != 0 && config_.listen_port != 80) host += ":" + std::to_string(config_.listen_port);
  return "http://" + host + "/";
}

PortView Ports::View(const store::PortRecord& r) {
  PortView v;
  v.port = r.port;
  v.is_public = r.is_public;
  v.auto_resume = r.auto_resume;
  v.created_at_ms = r.created_at_ms;
  v.url = Url(r.sandbox, r.port);
  auto it = counters_.find({r.sandbox, r.port});
  if (it != counters_.end()) {
    v.connections = it->second.connections;
    v.requests = it->second.requests;
  }
  return v;
}

Result<OpenedPort> Ports::Open(const std::string& team, const std::string& id, int64_t port, bool is_public,
                               bool auto_resume) {
  if (port < 0 || port > 65535) return InvalidArgument("port must be 1..65535");
  if (port == 0 && !is_public) return InvalidArgument("port 0 (every port) can only be opened public");
  ASSIGN_OR_RETURN(store::Sandbox sb, GetOwned(store_, team, id));
  if (store::IsEnded(sb.state)) return Conflict("sandbox " + id + " is " + std::string(store::StateName(sb.state)));
  OpenedPort out;
  store::PortRecord r;
  r.sandbox = id;
  r.port = port;
  r.team = team;
  r.is_public = is_public;
  r.auto_resume = auto_resume;
  r.created_at_ms = WallNowMs();
  if (!is_public) {
    out.token = RandomHex(24);
    r.token_sha256 = Sha256Hex(out.token);
  }
  RETURN_IF_ERROR(store_->PutPort(r));
  {
    std::lock_guard<std::mutex> lock(mu_);
    cache_.erase(id);
    labels_[HostLabel(id)] = id;
    out.view = View(r);
  }
  audit_->Record(team, id, "ingress", "open_port",
                 {{"port", port}, {"public", is_public}, {"auto_resume", auto_resume}});
  return out;
}

Result<std::vector<store::PortRecord>> Ports::PortsOf(const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(id);
    if (it != cache_.end()) return it->second;
  }
  ASSIGN_OR_RETURN(std::vector<store::PortRecord> rows, store_->ListPorts(id));
  std::lock_guard<std::mutex> lock(mu_);
  cache_[id] = rows;
  return rows;
}

Result<std::vector<PortView>> Ports::List(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(GetOwned(store_, team, id).status());
  ASSIGN_OR_RETURN(std::vector<store::PortRecord> rows, PortsOf(id));
  std::vector<PortView> out;
  out.reserve(rows.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& r : rows) out.push_back(View(r));
  return out;
}

Status Ports::Close(const std::string& team, const std::string& id, int64_t port) {
  RETURN_IF_ERROR(GetOwned(store_, team, id).status());
  RETURN_IF_ERROR(store_->DeletePort(id, port));
  std::set<std::shared_ptr<TcpTunnel>> ending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cache_.erase(id);
    auto it = counters_.find({id, port});
    if (it != counters_.end()) ending = it->second.tunnels;
  }
  for (const auto& t : ending) t->Close();  // the relays see the end and let go
  audit_->Record(team, id, "ingress", "close_port", {{"port", port}, {"connections_ended", ending.size()}});
  return Status::Ok();
}

Result<Ports::Target> Ports::Resolve(const std::string& label, int64_t port) {
  if (port < 1 || port > 65535) return NotFound("no preview port " + std::to_string(port));
  const std::string want = SandboxHostLabel(label);
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = labels_.find(want);
    if (it != labels_.end()) id = it->second;
  }
  if (id.empty()) {
    // A label not seen yet: learn every live sandbox's (a handful of rows on one node).
    ASSIGN_OR_RETURN(std::vector<store::Sandbox> live, store_->ListLiveSandboxes());
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& s : live) {
      labels_[HostLabel(s.id)] = s.id;
      if (HostLabel(s.id) == want) id = s.id;
    }
  }
  const Status missing = NotFound("no sandbox answers to " + want.substr(0, 80));
  if (id.empty()) return missing;
  Result<store::Sandbox> sb = store_->GetSandbox(id);
  if (!sb.ok() || store::IsEnded(sb->state)) {
    // Forgotten here once it ended: the node's maps hold live sandboxes only.
    std::lock_guard<std::mutex> lock(mu_);
    labels_.erase(want);
    cache_.erase(id);
    buckets_.erase(id);
    for (auto it = counters_.lower_bound({id, 0}); it != counters_.end() && it->first.sandbox == id;) {
      it = it->second.connections == 0 ? counters_.erase(it) : std::next(it);
    }
    return missing;
  }
  ASSIGN_OR_RETURN(std::vector<store::PortRecord> rows, PortsOf(id));
  Target t;
  t.requested_port = port;
  bool found = false;
  for (const auto& r : rows) {
    if (r.port == port || (r.port == 0 && !found)) {
      t.port = r;
      found = true;
      if (r.port == port) break;
    }
  }
  if (!found) return NotFound("port " + std::to_string(port) + " of this sandbox is not open");
  t.sandbox = std::move(*sb);
  return t;
}

bool Ports::TokenMatches(const store::PortRecord& port, const std::string& presented) {
  if (port.is_public) return true;
  if (presented.empty() || port.token_sha256.size() != 64) return false;
  const std::string digest = Sha256Hex(presented);
  return CRYPTO_memcmp(digest.data(), port.token_sha256.data(), 64) == 0;
}

Status Ports::Admit(const std::string& sandbox_id) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = MonoNowNs();
  auto [it, fresh] = buckets_.try_emplace(sandbox_id);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = config_.burst;
  } else {
    b.tokens = std::min(config_.burst, b.tokens + static_cast<double>(now - b.at_ns) / 1e9 * config_.requests_per_s);
  }
  b.at_ns = now;
  if (b.tokens < 1) return ResourceExhausted("too many preview requests to this sandbox; retry shortly");
  b.tokens -= 1;
  return Status::Ok();
}

Status Ports::WaitRunning(const Target& target, store::Sandbox* now) {
  *now = target.sandbox;
  const std::string& id = now->id;
  auto state_name = [&] { return std::string(store::StateName(now->state)); };
  if (now->state == store::SandboxState::kRunning) return Status::Ok();
  const bool resumable = now->state == store::SandboxState::kPaused || now->state == store::SandboxState::kSuspended ||
                         now->state == store::SandboxState::kResuming;
  if (!resumable || !target.port.auto_resume) {
    return Unavailable("sandbox " + id + " is " + state_name() +
                       (resumable ? "; resume it, or open the port with auto_resume" : ""));
  }
  if (now->state != store::SandboxState::kResuming) {
    Result<store::OperationRecord> op = lifecycle_->Resume(now->team, id);
    if (!op.ok() && op.status().code() != StatusCode::kConflict) return op.status();  // conflict: already resuming
  }
  const int64_t deadline = MonoNowNs() + kResumeTimeoutMs * 1'000'000;
  while (MonoNowNs() < deadline) {
    ASSIGN_OR_RETURN(*now, store_->GetSandbox(id));
    if (now->state == store::SandboxState::kRunning) return Status::Ok();
    if (store::IsEnded(now->state)) return Unavailable("sandbox " + id + " is " + state_name());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Unavailable("sandbox " + id + " did not resume in time");
}

Result<std::unique_ptr<PreviewConnection>> Ports::Connect(const Target& target) {
  store::Sandbox sb;
  RETURN_IF_ERROR(WaitRunning(target, &sb));
  std::shared_ptr<LiveSandbox> live = live_->Find(sb.id);
  if (!live || !live->guest->alive())
    return Unavailable("sandbox " + sb.id + " is not reachable on this node right now");
  const PortKey key{sb.id, target.port.port};
  std::weak_ptr<LiveSandbox> weak = live;
  auto stream = std::make_shared<std::atomic<uint32_t>>(0);
  auto tunnel = std::make_shared<TcpTunnel>(
      [weak, stream](guest::FrameType type, std::string_view payload) -> Status {
        std::shared_ptr<LiveSandbox> l = weak.lock();
        if (!l) return Unavailable("the sandbox went away");
        return l->guest->Send(type, stream->load(), payload);
      },
      [weak, stream] {
        std::shared_ptr<LiveSandbox> l = weak.lock();
        if (l && stream->load() != 0) l->guest->CloseStream(stream->load());
      });
  {
    std::lock_guard<std::mutex> lock(mu_);
    Counters& c = counters_[key];
    if (c.connections >= config_.max_connections_per_port) {
      return ResourceExhausted("port " + std::to_string(target.requested_port) + " has " +
                               std::to_string(c.connections) + " connections open; retry shortly");
    }
    ++c.connections;
    ++c.requests;
    c.tunnels.insert(tunnel);
  }
  auto conn = std::make_unique<PreviewConnection>(tunnel, [this, key, tunnel] {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counters_.find(key);
    if (it == counters_.end()) return;
    --it->second.connections;
    it->second.tunnels.erase(tunnel);
  });
  stream->store(live->guest->OpenStream(tunnel));
  // Not waited for: the request follows at once (the guest queues it while it connects), and
  // a refusal arrives as the tunnel's error where the answer would have.
  RETURN_IF_ERROR(live->guest->Send(guest::FrameType::kTcpOpen, stream->load(),
                                    nlohmann::json{{"port", target.requested_port}}.dump()));
  return conn;
}

}  // namespace space::node
