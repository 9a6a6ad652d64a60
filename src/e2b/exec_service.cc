#include "e2b/exec_service.h"

#include <csignal>

#include "common/clock.h"
#include "e2b/exec_service_py.h"

namespace space::e2b {
namespace {

// A reply line bigger than this is not something the service writes; it ends the service.
constexpr size_t kMaxLineBytes = 8u << 20;
constexpr int64_t kSliceMs = 1000;

}  // namespace

Result<std::shared_ptr<ExecService>> ExecService::Start(node::Node* node, const std::string& team,
                                                        const std::string& id, const std::string& user) {
  node::ProcessSpec spec;
  spec.cmd = {"python3", "-u", "-c", kExecServicePy};
  spec.user = user;
  spec.keep_stdin_open = true;
  spec.timeout_s = 0;  // lives as long as the sandbox
  spec.env = {{"PYTHONUNBUFFERED", "1"}, {"PYTHONDONTWRITEBYTECODE", "1"}};
  auto proc = node->io().Start(team, id, std::move(spec));
  if (!proc.ok()) {
    return Status(proc.status().code(),
                  "cannot start the code interpreter (it needs python3 in the template): " + proc.status().message());
  }
  return std::shared_ptr<ExecService>(new ExecService(node, team, id, std::move(*proc)));
}

bool ExecService::usable() const { return !proc_->exited() && !proc_->truncated(); }

Result<nlohmann::json> ExecService::Call(nlohmann::json request,
                                         const std::function<bool(const nlohmann::json&)>& on_msg,
                                         int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!usable()) return Unavailable("the code interpreter service has stopped; retry to start a new one");
  uint64_t rid = next_id_++;
  request["id"] = rid;
  RETURN_IF_ERROR(node_->io().WriteStdin(team_, id_, proc_->id(), request.dump() + "\n"));
  int64_t deadline = MonoNowNs() + timeout_ms * 1000000;
  bool client_gone = false;
  for (;;) {
    std::vector<node::ProcessEvent> events;
    bool more = proc_->Follow(&next_event_, &events, kSliceMs);
    for (auto& e : events) {
      if (e.kind != node::ProcessEvent::Kind::kStdout) continue;
      pending_ += e.data;
      size_t start = 0;
      for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
        auto line = nlohmann::json::parse(std::string_view(pending_).substr(start, nl - start), nullptr, false);
        // Lines of earlier, abandoned calls (or garbage) are skipped.
        if (!line.is_object() || !line.contains("id") || line["id"] != rid) continue;
        if (line.value("done", false)) {
          pending_.erase(0, nl + 1);
          line.erase("id");
          line.erase("done");
          return line;
        }
        if (line.contains("msg") && !client_gone && !on_msg(line["msg"])) {
          // Interrupt the code (KeyboardInterrupt) and keep reading until its reply.
          client_gone = true;
          (void)node_->io().Signal(team_, id_, proc_->id(), SIGINT);
        }
      }
      pending_.erase(0, start);
      if (pending_.size() > kMaxLineBytes) {
        (void)node_->io().Signal(team_, id_, proc_->id(), SIGKILL);
        return Internal("the code interpreter wrote an oversized reply; it was stopped");
      }
    }
    if (!more) return Unavailable("the code interpreter service exited; its contexts are gone");
    if (MonoNowNs() > deadline) {
      (void)node_->io().Signal(team_, id_, proc_->id(), SIGINT);
      return DeadlineExceeded("the code did not finish in time; it was interrupted");
    }
  }
}

}  // namespace space::e2b
