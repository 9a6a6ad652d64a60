#include "node/template_start.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/clock.h"
#include "common/syscall.h"
#include "common/unique_fd.h"

namespace space::node {
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr int64_t kReadyAttemptS = 10;

ProcessSpec ShellSpec(const TemplateConfig& config, const std::string& command) {
  ProcessSpec spec;
  spec.cmd = {"/bin/sh", "-c", command};
  spec.cwd = config.workdir;
  spec.user = config.user.empty() ? "root" : config.user;
  return spec;
}

}  // namespace

Result<TemplateConfig> ReadTemplateConfig(const std::string& tree_dir) {
  int dir = ::open(tree_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return ErrnoStatus("open", tree_dir, errno);
  UniqueFd dir_fd(dir);
  int fd = ::openat(dir_fd.get(), kTemplateConfigPath, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return TemplateConfig{};
    return ErrnoStatus("open", tree_dir + "/" + kTemplateConfigPath, errno);
  }
  UniqueFd file(fd);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) return ErrnoStatus("fstat", kTemplateConfigPath, errno);
  if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > kMaxConfigBytes) {
    return InvalidArgument(tree_dir + "/" + kTemplateConfigPath + " is not a regular file of at most 1 MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  RETURN_IF_ERROR(ReadExact(file.get(), text.data(), text.size()));
  return ParseTemplateConfig(text);
}

Status StartTemplateCommands(SandboxIo* io, const store::Sandbox& rec, const TemplateConfig& config,
                             nlohmann::json* steps) {
  int64_t t = MonoNowNs();
  if (!config.start.empty()) {
    ProcessSpec spec = ShellSpec(config, config.start);
    spec.timeout_s = 0;  // the start command lives as long as the sandbox
    ASSIGN_OR_RETURN(auto proc, io->Start(rec.team, rec.id, std::move(spec)));
    (void)proc;
    (*steps)["template.start"] = static_cast<double>(MonoNowNs() - t) / 1e6;
    t = MonoNowNs();
  }
  if (config.ready.empty()) return Status::Ok();
  const int64_t deadline = MonoNowNs() + kReadyTimeoutMs * 1000000;
  std::string last = "never ran";
  for (int attempt = 0;; ++attempt) {
    ProcessSpec spec = ShellSpec(config, config.ready);
    spec.timeout_s = kReadyAttemptS;
    ASSIGN_OR_RETURN(auto proc, io->Start(rec.team, rec.id, std::move(spec)));
    proc->WaitExited(kReadyAttemptS * 1000 + 5000);
    auto exit = proc->exit_info();
    if (exit && exit->exit_code && *exit->exit_code == 0) break;
    last = exit && exit->exit_code ? "exit code " + std::to_string(*exit->exit_code) : "no exit code";
    std::string err = proc->Collected(ProcessEvent::Kind::kStderr);
    if (!err.empty()) last += ": " + err.substr(0, 512);
    if (MonoNowNs() > deadline) {
      return DeadlineExceeded("the template's ready command did not succeed within " +
                              std::to_string(kReadyTimeoutMs / 1000) + " s (" + std::to_string(attempt + 1) +
                              " attempts; last: " + last + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt < 10 ? 100 : 500));
  }
  (*steps)["template.ready"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  return Status::Ok();
}

}  // namespace space::node
