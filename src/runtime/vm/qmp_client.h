// QmpClient: the node's end of one QEMU's QMP monitor (QEMU Machine Protocol: one JSON
// object per line), over a connected unix socket the VMM inherited.
//
// Owned by VmRuntime, one per VM. Thread-safe: a mutex serializes commands, and replies are
// matched in order (QMP answers commands in the order it gets them); asynchronous events
// between them are skipped. Everything QEMU says is parsed with bounds: a line over
// kMaxLine ends the connection.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::runtime::vm {

class QmpClient {
 public:
  static constexpr size_t kMaxLine = 1 << 20;

  explicit QmpClient(UniqueFd socket) : socket_(std::move(socket)) {}

  // Reads the greeting and leaves capability negotiation mode.
  Status Handshake(int timeout_ms);

  // Runs `command` with `arguments`; its "return" value, or the QMP error as a Status
  // ("qmp stop: GenericError: ...").
  Result<nlohmann::json> Execute(const std::string& command, const nlohmann::json& arguments = nlohmann::json::object(),
                                 int timeout_ms = 30000);

  // Hands `fd` to QEMU under `name` (QMP getfd, the fd as SCM_RIGHTS with the command), for
  // commands that take "fd:<name>" such as migrate.
  Status SendFd(const std::string& name, int fd, int timeout_ms = 30000);

 private:
  Result<nlohmann::json> ReadMessage(int64_t deadline_ns);
  Result<nlohmann::json> ReadReply(const std::string& command, int64_t deadline_ns);
  Status SendLine(const std::string& line, int fd_to_pass);
  // Unavailable once a command went unanswered: replies carry no id we match on, so after
  // a timeout every later reply would belong to the command before it.
  Status CheckInStep();

  UniqueFd socket_;
  std::mutex mu_;
  std::string buf_;  // GUARDED_BY(mu_): bytes read past the last line
  bool broken_ = false;  // GUARDED_BY(mu_): a command is still owed its reply
};

}  // namespace space::runtime::vm
