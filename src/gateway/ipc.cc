#include "gateway/ipc.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>
#include <vector>

#include "common/syscall.h"
#include "credentials/credential.h"
#include "credentials/egress_profile.h"

namespace space::gateway::ipc {
namespace {

enum class Kind { kString, kUint, kObject, kOptionalString };

struct Field {
  const char* name;
  Kind kind;
  uint64_t max;  // string: bytes; uint: value; object: bytes of its JSON
};

struct Schema {
  Type type;
  const char* name;
  Sender sender;
  std::vector<Field> fields;
};

constexpr uint64_t kShort = kMaxAuditFieldBytes;
constexpr uint64_t kPath = 4096;
constexpr uint64_t kWhole = kMaxMessageBytes;

const std::vector<Schema>& Schemas() {
  static const auto* schemas = new std::vector<Schema>{
      {Type::kConfig,
       "config",
       Sender::kNode,
       {{"ca_dir", Kind::kString, kPath},
        {"upstream_dns", Kind::kString, kShort},
        {"upstream_ca_file", Kind::kString, kPath},
        {"upstream_ca_pem", Kind::kString, kWhole / 2},
        {"ca_cert_pem", Kind::kString, 64 << 10},
        {"ca_key_pem", Kind::kString, 64 << 10},
        {"base_port", Kind::kUint, 65535},
        {"max_connections", Kind::kUint, 1 << 16},
        {"idle_timeout_ms", Kind::kUint, 24 * 3600 * 1000}}},
      {Type::kRegister, "register", Sender::kNode, {{"address", Kind::kString, 16}, {"sandbox", Kind::kObject, kWhole}}},
      {Type::kUnregister, "unregister", Sender::kNode, {{"address", Kind::kString, 16}}},
      {Type::kStop, "stop", Sender::kNode, {}},
      {Type::kSecretReply,
       "secret_reply",
       Sender::kNode,
       {{"id", Kind::kUint, UINT64_MAX},
        {"secret", Kind::kOptionalString, 64 << 10},
        {"error", Kind::kOptionalString, 4096}}},
      {Type::kReady,
       "ready",
       Sender::kWorker,
       {{"ports", Kind::kObject, 1024}, {"ca_certificate_pem", Kind::kString, 64 << 10}}},
      {Type::kError, "error", Sender::kWorker, {{"message", Kind::kString, 4096}}},
      {Type::kSecretRequest,
       "secret_request",
       Sender::kWorker,
       {{"id", Kind::kUint, UINT64_MAX}, {"team", Kind::kString, kShort}, {"name", Kind::kString, kShort}}},
      {Type::kAudit,
       "audit",
       Sender::kWorker,
       {{"sandbox_id", Kind::kString, kShort},
        {"team", Kind::kString, kShort},
        {"kind", Kind::kString, kShort},
        {"action", Kind::kString, 64},
        {"detail", Kind::kObject, kMaxAuditDetailBytes}}},
  };
  return *schemas;
}

const Schema* FindSchema(Type type) {
  for (const auto& s : Schemas()) {
    if (s.type == type) return &s;
  }
  return nullptr;
}

Status CheckField(const nlohmann::json& body, const Field& f, const std::string& where) {
  auto it = body.find(f.name);
  if (it == body.end()) {
    if (f.kind == Kind::kOptionalString) return Status::Ok();
    return InvalidArgument(where + ": missing field " + f.name);
  }
  switch (f.kind) {
    case Kind::kString:
    case Kind::kOptionalString:
      if (!it->is_string()) return InvalidArgument(where + ": " + f.name + " must be a string");
      if (it->get_ref<const std::string&>().size() > f.max) return InvalidArgument(where + ": " + f.name + " too long");
      return Status::Ok();
    case Kind::kUint:
      if (!it->is_number_unsigned()) return InvalidArgument(where + ": " + f.name + " must be an unsigned integer");
      if (it->get<uint64_t>() > f.max) return InvalidArgument(where + ": " + f.name + " out of range");
      return Status::Ok();
    case Kind::kObject:
      if (!it->is_object()) return InvalidArgument(where + ": " + f.name + " must be an object");
      if (it->dump().size() > f.max) return InvalidArgument(where + ": " + f.name + " too large");
      return Status::Ok();
  }
  return Internal("unreachable");
}

// Deepest array/object nesting in `bytes` (JSON text, strings skipped). Checked before parsing:
// dump() and friends recurse, and a megabyte of "[" would overflow the node's stack.
size_t NestingDepth(std::string_view bytes) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : bytes) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') deepest = std::max(deepest, ++depth);
    else if ((c == '}' || c == ']') && depth > 0) --depth;
  }
  return deepest;
}

// Audit records land in the node's audit log: plain lowercase words only.
bool IsWord(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

Status CheckTypeSpecific(Type type, const nlohmann::json& body) {
  switch (type) {
    case Type::kSecretReply:
      if (body.contains("secret") == body.contains("error")) {
        return InvalidArgument("secret_reply: exactly one of secret and error");
      }
      return Status::Ok();
    case Type::kReady: {
      static const char* kPorts[] = {"dns", "http", "tls", "proxy", "tcp"};
      const auto& ports = body["ports"];
      if (ports.size() != 5) return InvalidArgument("ready: ports must name dns, http, tls, proxy and tcp");
      for (const char* p : kPorts) {
        auto it = ports.find(p);
        if (it == ports.end() || !it->is_number_unsigned() || it->get<uint64_t>() == 0 ||
            it->get<uint64_t>() > 65535) {
          return InvalidArgument(std::string("ready: port ") + p + " must be 1..65535");
        }
      }
      return Status::Ok();
    }
    case Type::kSecretRequest:
      return credentials::ValidateCredentialName(body["name"].get<std::string>());
    case Type::kAudit: {
      const auto& kind = body["kind"].get_ref<const std::string&>();
      if (kind != "egress" && kind != "credential") return InvalidArgument("audit: kind must be egress or credential");
      if (!IsWord(body["action"].get<std::string>())) return InvalidArgument("audit: action must be a lowercase word");
      return Status::Ok();
    }
    default:
      return Status::Ok();
  }
}

nlohmann::json CredentialJson(const SandboxEgress::Credential& c) {
  const auto& s = c.spec;
  return {{"name", s.name},   {"hosts", s.hosts},
          {"header", s.header}, {"format", s.format},
          {"env", s.env},     {"scope", s.scope},
          {"expires_at_ms", s.expires_at_ms}, {"rate_limit_per_min", s.rate_limit_per_min},
          {"placeholder", c.placeholder}};
}

Result<SandboxEgress::Credential> CredentialFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("credential must be an object");
  static const std::set<std::string> kKnown = {"name",  "hosts", "header",        "format",
                                               "env",   "scope", "expires_at_ms", "rate_limit_per_min",
                                               "placeholder"};
  for (const auto& [k, v] : j.items()) {
    if (!kKnown.count(k)) return InvalidArgument("credential: unknown field " + k);
  }
  for (const char* k : {"name", "header", "format", "env", "scope", "placeholder"}) {
    if (!j.contains(k) || !j[k].is_string()) return InvalidArgument(std::string("credential: ") + k + " must be a string");
  }
  if (!j.contains("hosts") || !j["hosts"].is_array() || j["hosts"].empty() || j["hosts"].size() > 64) {
    return InvalidArgument("credential: hosts must be 1..64 strings");
  }
  if (!j.contains("expires_at_ms") || !j["expires_at_ms"].is_number_integer() || !j.contains("rate_limit_per_min") ||
      !j["rate_limit_per_min"].is_number_integer()) {
    return InvalidArgument("credential: expires_at_ms and rate_limit_per_min must be integers");
  }
  SandboxEgress::Credential c;
  c.spec.name = j["name"].get<std::string>();
  RETURN_IF_ERROR(credentials::ValidateCredentialName(c.spec.name));
  for (const auto& h : j["hosts"]) {
    if (!h.is_string()) return InvalidArgument("credential: hosts must be strings");
    c.spec.hosts.push_back(h.get<std::string>());
  }
  c.spec.header = j["header"].get<std::string>();
  c.spec.format = j["format"].get<std::string>();
  c.spec.env = j["env"].get<std::string>();
  c.spec.scope = j["scope"].get<std::string>();
  c.spec.expires_at_ms = j["expires_at_ms"].get<int64_t>();
  int64_t rate = j["rate_limit_per_min"].get<int64_t>();
  if (rate < 0 || rate > credentials::kMaxRateLimitPerMin) return InvalidArgument("credential: rate_limit_per_min");
  c.spec.rate_limit_per_min = static_cast<int>(rate);
  c.placeholder = j["placeholder"].get<std::string>();
  if (c.placeholder.rfind(credentials::kPlaceholderPrefix, 0) != 0) {
    return InvalidArgument("credential: placeholder must start with space-cred-");
  }
  return c;
}

}  // namespace

std::string_view TypeName(Type type) {
  const Schema* s = FindSchema(type);
  return s ? s->name : "unknown";
}

Result<std::string> Encode(Type type, nlohmann::json fields) {
  if (fields.is_null()) fields = nlohmann::json::object();
  if (!fields.is_object()) return InvalidArgument("ipc: message fields must be an object");
  fields["type"] = std::string(TypeName(type));
  std::string out = fields.dump();
  if (out.size() > kMaxMessageBytes) {
    return InvalidArgument("ipc: " + std::string(TypeName(type)) + " message of " + std::to_string(out.size()) +
                           " bytes exceeds " + std::to_string(kMaxMessageBytes));
  }
  return out;
}

Result<Message> Decode(std::string_view bytes, Sender from) {
  if (bytes.empty()) return InvalidArgument("ipc: empty message");
  if (bytes.size() > kMaxMessageBytes) return InvalidArgument("ipc: message exceeds 1 MiB");
  if (NestingDepth(bytes) > kMaxNesting) return InvalidArgument("ipc: message nests too deeply");
  auto body = nlohmann::json::parse(bytes, nullptr, false);
  if (body.is_discarded()) return InvalidArgument("ipc: message is not JSON");
  if (!body.is_object()) return InvalidArgument("ipc: message is not a JSON object");
  auto t = body.find("type");
  if (t == body.end() || !t->is_string()) return InvalidArgument("ipc: message has no type");
  const Schema* schema = nullptr;
  for (const auto& s : Schemas()) {
    if (t->get_ref<const std::string&>() == s.name) schema = &s;
  }
  if (schema == nullptr) return InvalidArgument("ipc: unknown message type");
  if (schema->sender != from) return InvalidArgument("ipc: " + std::string(schema->name) + " from the wrong side");
  for (const auto& [k, v] : body.items()) {
    if (k == "type") continue;
    bool known = false;
    for (const auto& f : schema->fields) known = known || k == f.name;
    if (!known) return InvalidArgument("ipc: " + std::string(schema->name) + ": unknown field " + k.substr(0, 64));
  }
  for (const auto& f : schema->fields) RETURN_IF_ERROR(CheckField(body, f, schema->name));
  RETURN_IF_ERROR(CheckTypeSpecific(schema->type, body));
  return Message{schema->type, std::move(body)};
}

nlohmann::json ConfigJson(const GatewayConfig& c) {
  return {{"ca_dir", c.ca_dir},
          {"upstream_dns", c.upstream_dns},
          {"upstream_ca_file", c.upstream_ca_file},
          {"upstream_ca_pem", c.upstream_ca_pem},
          {"ca_cert_pem", c.ca_cert_pem},
          {"ca_key_pem", c.ca_key_pem},
          {"base_port", c.base_port},
          {"max_connections", static_cast<uint64_t>(c.max_connections)},
          {"idle_timeout_ms", static_cast<uint64_t>(c.idle_timeout_ms)}};
}

GatewayConfig ConfigFromJson(const nlohmann::json& body) {
  GatewayConfig c;
  c.ca_dir = body["ca_dir"].get<std::string>();
  c.upstream_dns = body["upstream_dns"].get<std::string>();
  c.upstream_ca_file = body["upstream_ca_file"].get<std::string>();
  c.upstream_ca_pem = body["upstream_ca_pem"].get<std::string>();
  c.ca_cert_pem = body["ca_cert_pem"].get<std::string>();
  c.ca_key_pem = body["ca_key_pem"].get<std::string>();
  c.base_port = static_cast<uint16_t>(body["base_port"].get<uint64_t>());
  c.max_connections = static_cast<int>(body["max_connections"].get<uint64_t>());
  c.idle_timeout_ms = static_cast<int>(body["idle_timeout_ms"].get<uint64_t>());
  return c;
}

nlohmann::json PortsJson(const network::GatewayPorts& p) {
  return {{"dns", p.dns}, {"http", p.http}, {"tls", p.tls}, {"proxy", p.proxy}, {"tcp", p.tcp}};
}

network::GatewayPorts PortsFromJson(const nlohmann::json& j) {
  network::GatewayPorts p;
  p.dns = j["dns"].get<uint16_t>();
  p.http = j["http"].get<uint16_t>();
  p.tls = j["tls"].get<uint16_t>();
  p.proxy = j["proxy"].get<uint16_t>();
  p.tcp = j["tcp"].get<uint16_t>();
  return p;
}

std::string AddressText(in_addr address) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address, buf, sizeof buf);
  return buf;
}

Result<in_addr> ParseAddress(const nlohmann::json& text) {
  in_addr a{};
  if (!text.is_string() || ::inet_pton(AF_INET, text.get<std::string>().c_str(), &a) != 1) {
    return InvalidArgument("ipc: address must be dotted IPv4");
  }
  return a;
}

nlohmann::json SandboxJson(const SandboxEgress& s) {
  nlohmann::json profiles = nlohmann::json::array();
  for (const auto& p : s.profiles) profiles.push_back(credentials::EgressProfileJson(p));
  nlohmann::json creds = nlohmann::json::array();
  for (const auto& c : s.credentials) creds.push_back(CredentialJson(c));
  return {{"sandbox_id", s.sandbox_id}, {"team", s.team}, {"profiles", profiles}, {"credentials", creds}};
}

Result<SandboxEgress> SandboxFromJson(const nlohmann::json& j) {
  SandboxEgress s;
  if (!j.is_object() || !j.contains("sandbox_id") || !j["sandbox_id"].is_string() || !j.contains("team") ||
      !j["team"].is_string() || !j.contains("profiles") || !j["profiles"].is_array() || !j.contains("credentials") ||
      !j["credentials"].is_array() || j.size() != 4) {
    return InvalidArgument("ipc: sandbox needs exactly sandbox_id, team, profiles and credentials");
  }
  s.sandbox_id = j["sandbox_id"].get<std::string>();
  s.team = j["team"].get<std::string>();
  for (const auto& p : j["profiles"]) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string() || !p.contains("allow")) {
      return InvalidArgument("ipc: profile needs name and allow");
    }
    ASSIGN_OR_RETURN(credentials::EgressProfile profile,
                     credentials::ParseEgressProfile(p["name"].get<std::string>(), nlohmann::json{{"allow", p["allow"]}}));
    s.profiles.push_back(std::move(profile));
  }
  for (const auto& c : j["credentials"]) {
    ASSIGN_OR_RETURN(SandboxEgress::Credential cred, CredentialFromJson(c));
    s.credentials.push_back(std::move(cred));
  }
  return s;
}

Status Channel::Send(Type type, nlohmann::json fields) {
  ASSIGN_OR_RETURN(std::string bytes, Encode(type, std::move(fields)));
  std::lock_guard<std::mutex> lock(send_mu_);
  // Bounded: a peer that stops reading must not wedge the sender (the node would otherwise
  // hang in Register under its lock). kDeadlineExceeded then; the caller drops the peer.
  constexpr int kSendTimeoutMs = 5000;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kSendTimeoutMs);
  ssize_t n;
  for (;;) {
    n = RetryEintr([&] { return ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT); });
    if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      std::fill(bytes.begin(), bytes.end(), '\0');
      return DeadlineExceeded("send gateway channel: the peer has not read for " + std::to_string(kSendTimeoutMs) +
                              " ms");
    }
    // POLLOUT may hold while a large datagram still does not fit: poll at most 10 ms at a time.
    pollfd pfd = {fd_.get(), POLLOUT, 0};
    (void)RetryEintr([&] { return ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 10))); });
  }
  std::fill(bytes.begin(), bytes.end(), '\0');  // may have held a secret
  if (n < 0) return ErrnoStatus("send", "gateway channel", errno);
  if (static_cast<size_t>(n) != bytes.size()) return Internal("send gateway channel: short datagram");
  return Status::Ok();
}

Result<Message> Channel::Receive(int timeout_ms, int wake_fd) {
  pollfd pfd[2] = {{fd_.get(), POLLIN, 0}, {wake_fd, POLLIN, 0}};
  int r = RetryEintr([&] { return ::poll(pfd, wake_fd >= 0 ? 2 : 1, timeout_ms); });
  if (r < 0) return ErrnoStatus("poll", "gateway channel", errno);
  if (r == 0 || (pfd[0].revents == 0 && pfd[1].revents != 0)) return DeadlineExceeded("gateway channel: no message");
  if (buf_.size() != kMaxMessageBytes + 1) buf_.resize(kMaxMessageBytes + 1);
  ssize_t n = RetryEintr([&] { return ::recv(fd_.get(), buf_.data(), buf_.size(), MSG_TRUNC | MSG_DONTWAIT); });
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return DeadlineExceeded("gateway channel: no message");
  if (n < 0) return Unavailable(ErrnoStatus("recv", "gateway channel", errno).message());
  if (n == 0) return Unavailable("gateway channel: peer closed");
  if (static_cast<size_t>(n) > kMaxMessageBytes) return InvalidArgument("ipc: message exceeds 1 MiB");
  auto msg = Decode(std::string_view(buf_.data(), static_cast<size_t>(n)), peer_);
  std::fill(buf_.begin(), buf_.begin() + n, '\0');
  return msg;
}

void Channel::Shutdown() { ::shutdown(fd_.get(), SHUT_RDWR); }

Status MakeSocketPair(UniqueFd* a, UniqueFd* b) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return ErrnoStatus("socketpair", "AF_UNIX SOCK_SEQPACKET", errno);
  }
  *a = UniqueFd(fds[0]);
  *b = UniqueFd(fds[1]);
  // A datagram larger than the send buffer fails with EMSGSIZE. SO_SNDBUFFORCE passes
  // wmem_max when privileged; otherwise SO_SNDBUF gets what wmem_max allows.
  int size = static_cast<int>(kSocketBufferBytes);
  for (int fd : {fds[0], fds[1]}) {
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) != 0) {
      (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    }
  }
  return Status::Ok();
}

}  // namespace space::gateway::ipc
