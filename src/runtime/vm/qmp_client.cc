#include "runtime/vm/qmp_client.h"

#include <poll.h>

#include "common/clock.h"
#include "common/syscall.h"

namespace space::runtime::vm {

Status QmpClient::Handshake(int timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  broken_ = true;  // until the handshake's reply
  const int64_t deadline = MonoNowNs() + int64_t{timeout_ms} * 1000000;
  ASSIGN_OR_RETURN(nlohmann::json greeting, ReadMessage(deadline));
  if (!greeting.is_object() || !greeting.contains("QMP")) return Unavailable("qmp: no greeting from the VMM");
  RETURN_IF_ERROR(SendLine(R"({"execute":"qmp_capabilities"})", -1));
  return ReadReply("qmp_capabilities", deadline).status();
}

Result<nlohmann::json> QmpClient::Execute(const std::string& command, const nlohmann::json& arguments,
                                          int timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(CheckInStep());
  nlohmann::json msg{{"execute", command}};
  if (!arguments.empty()) msg["arguments"] = arguments;
  RETURN_IF_ERROR(SendLine(msg.dump(), -1));
  return ReadReply(command, MonoNowNs() + int64_t{timeout_ms} * 1000000);
}

Status QmpClient::SendFd(const std::string& name, int fd, int timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(CheckInStep());
  nlohmann::json msg{{"execute", "getfd"}, {"arguments", {{"fdname", name}}}};
  RETURN_IF_ERROR(SendLine(msg.dump(), fd));
  return ReadReply("getfd", MonoNowNs() + int64_t{timeout_ms} * 1000000).status();
}

Status QmpClient::CheckInStep() {
  if (broken_) return Unavailable("qmp: monitor out of step after an earlier failed or timed-out command");
  return Status::Ok();
}

Status QmpClient::SendLine(const std::string& line, int fd_to_pass) {
  // Cleared only when the reply arrives: a command that fails half way (timeout, short
  // write) leaves a reply in flight, which the next command would take for its own.
  broken_ = true;
  std::string data = line + "\n";
  if (fd_to_pass < 0) return WriteAll(socket_.get(), data);
  // The fd rides with the command's first byte; QEMU attaches it to the monitor.
  ASSIGN_OR_RETURN(size_t sent, SendWithFd(socket_.get(), data, fd_to_pass));
  if (sent < data.size()) return WriteAll(socket_.get(), std::string_view(data).substr(sent));
  return Status::Ok();
}

Result<nlohmann::json> QmpClient::ReadMessage(int64_t deadline_ns) {
  for (;;) {
    size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) return Unavailable("qmp: malformed message from the VMM");
      return j;
    }
    if (buf_.size() > kMaxLine) return Unavailable("qmp: message over the size limit");
    int left = static_cast<int>((deadline_ns - MonoNowNs()) / 1000000);
    if (left <= 0) return DeadlineExceeded("qmp: no answer from the VMM in time");
    pollfd p{socket_.get(), POLLIN, 0};
    int r = ::poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus("poll", "qmp", errno);
    if (r == 0) continue;
    char chunk[4096];
    ssize_t n = RetryEintr([&] { return ::read(socket_.get(), chunk, sizeof chunk); });
    if (n < 0) return ErrnoStatus("read", "qmp", errno);
    if (n == 0) return Unavailable("qmp: the VMM closed its monitor");
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

Result<nlohmann::json> QmpClient::ReadReply(const std::string& command, int64_t deadline_ns) {
  for (;;) {
    ASSIGN_OR_RETURN(nlohmann::json m, ReadMessage(deadline_ns));
    if (m.contains("event")) continue;  // asynchronous: STOP, RESUME, MIGRATION, ...
    if (m.contains("return")) {
      broken_ = false;
      return m["return"];
    }
    if (m.contains("error") && m["error"].is_object()) {
      broken_ = false;
      const auto& e = m["error"];
      // Hostile-input rule: fields are read only when they have the expected type.
      std::string cls = e.contains("class") && e["class"].is_string() ? e["class"].get<std::string>() : "Error";
      std::string desc = e.contains("desc") && e["desc"].is_string() ? e["desc"].get<std::string>() : "";
      return Internal("qmp " + command + ": " + cls + ": " + desc);
    }
    return Unavailable("qmp " + command + ": unexpected message from the VMM");
  }
}

}  // namespace space::runtime::vm
