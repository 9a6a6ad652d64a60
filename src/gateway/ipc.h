// The wire protocol between the node and its gateway worker process (gateway_worker.h,
// node/gateway_process.h). One message is one SOCK_SEQPACKET datagram holding one JSON object
// with a "type" and that type's fields; at most kMaxMessageBytes. The node runs as root and the
// worker does not, so each side decodes the other's messages as untrusted input: Decode
// refuses oversized and malformed messages, unknown types, types the sender may not send,
// and missing or mistyped fields.
//
//   node -> worker                              worker -> node
//   config {gateway config}                     ready {ports, ca_certificate_pem}
//   register {address, sandbox}                 error {message}          (start failed)
//   unregister {address}                        secret_request {id, team, name}
//   stop {}                                     audit {sandbox_id, team, kind, action, detail}
//   secret_reply {id, secret | error}
//
// Plain functions; no state.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/unique_fd.h"
#include "gateway/gateway.h"
#include "network/firewall.h"

namespace space::gateway::ipc {

inline constexpr size_t kMaxMessageBytes = 1 << 20;
// The send buffer a channel's sockets need to take a kMaxMessageBytes datagram. The default
// (wmem_default, ~208 KiB) is below it; raising it past wmem_max takes SO_SNDBUFFORCE.
inline constexpr int64_t kSocketBufferBytes = 2 * kMaxMessageBytes + 65536;
// Bounds on an audit record from the worker (it is untrusted): its strings and its detail.
inline constexpr size_t kMaxAuditDetailBytes = 16 << 10;
inline constexpr size_t kMaxAuditFieldBytes = 128;
// Deepest JSON nesting a message may have (parsing and printing JSON recurse).
inline constexpr size_t kMaxNesting = 32;

enum class Sender { kNode, kWorker };

enum class Type {
  kConfig,         // node: the GatewayConfig the worker starts with (ca_dir included)
  kRegister,       // node: a sandbox's egress at an address
  kUnregister,     // node: forget the address
  kStop,           // node: stop serving and exit
  kSecretReply,    // node: the secret of a request, or why not
  kReady,          // worker: listening; its ports and the CA certificate
  kError,          // worker: could not start (then exits)
  kSecretRequest,  // worker: the secret of credential `name` of `team`, to inject
  kAudit,          // worker: one audit record, without secrets
};

struct Message {
  Type type;
  nlohmann::json body;  // the whole object, "type" included; fields checked by Decode
};

std::string_view TypeName(Type type);

// The datagram for a message; kInvalidArgument when it would exceed kMaxMessageBytes.
Result<std::string> Encode(Type type, nlohmann::json fields);

// Parses and validates one datagram sent by `from`.
Result<Message> Decode(std::string_view bytes, Sender from);

// Typed views of message bodies (valid on a Message Decode accepted).
nlohmann::json ConfigJson(const GatewayConfig& config);
GatewayConfig ConfigFromJson(const nlohmann::json& body);
nlohmann::json PortsJson(const network::GatewayPorts& ports);
network::GatewayPorts PortsFromJson(const nlohmann::json& ports);
std::string AddressText(in_addr address);
Result<in_addr> ParseAddress(const nlohmann::json& text);

// A sandbox's egress (profiles and credential specs with placeholders; never a secret).
nlohmann::json SandboxJson(const SandboxEgress& sandbox);
// Revalidates every profile and credential field.
Result<SandboxEgress> SandboxFromJson(const nlohmann::json& sandbox);

// One end of the node-worker socketpair. Send is thread-safe (one datagram per message, sent
// whole under a mutex); Receive is for one reader thread at a time.
class Channel {
 public:
  Channel(UniqueFd fd, Sender peer) : fd_(std::move(fd)), peer_(peer) {}

  Status Send(Type type, nlohmann::json fields);
  // Waits up to timeout_ms (-1: forever) for one message from the peer, or for `wake_fd` to
  // turn readable. kUnavailable when the peer is gone (EOF, reset); kDeadlineExceeded on time
  // out or wake-up; kInvalidArgument for a message Decode refused (the channel stays usable).
  Result<Message> Receive(int timeout_ms, int wake_fd = -1);
  // Wakes a blocked Receive and fails later Sends (the peer sees EOF).
  void Shutdown();
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  Sender peer_;
  std::mutex send_mu_;
  std::string buf_;  // Receive's buffer, kMaxMessageBytes + 1
};

// A connected SOCK_SEQPACKET pair, both ends CLOEXEC, with send buffers big enough for a
// kMaxMessageBytes message (forced when privileged).
Status MakeSocketPair(UniqueFd* a, UniqueFd* b);

}  // namespace space::gateway::ipc
