#include "guest/event_loop.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/syscall.h"
#include "guest/vm_disk.h"
#include "guest/vm_init.h"
#include "guest/vm_limits.h"
#include "guest/vm_net.h"
#include "protocol/json_util.h"

namespace space::guest {
namespace {

constexpr std::string_view kLog = "spaced";
constexpr char kVmRootDevice[] = "/dev/vda";
// How long a grow waits for the kernel to see the disk's new capacity (a virtio config
// interrupt, handled by a worker after the guest resumes).
constexpr int kGrowDiskWaitMs = 3000;
// Outbox watermarks: above kHigh, child output and file reads pause until below kLow.
constexpr size_t kOutboxHigh = 4u << 20;
constexpr size_t kOutboxLow = 1u << 20;
// Stdin bytes buffered for a process that is not reading; beyond this its stdin closes.
constexpr size_t kMaxStdinPending = 1u << 20;
// How long kExit waits for output pipes after the process exited: a daemonized
// grandchild may hold them open forever.
constexpr int64_t kExitGraceNs = 100'000'000;
// Bytes still read from a pipe when the grace period ends.
constexpr size_t kMaxDrainAtExit = 1u << 20;
constexpr uint64_t kMaxTimeoutMs = 365ull * 24 * 3600 * 1000;
constexpr int kChannelSendBuffer = 4 << 20;

std::string StreamName(uint32_t stream) { return "stream " + std::to_string(stream); }

}  // namespace

GuestDaemon::GuestDaemon(UniqueFd channel, ExecContext ctx) : channel_(std::move(channel)), ctx_(std::move(ctx)) {}

GuestDaemon::~GuestDaemon() {
  for (auto& [stream, p] : processes_) {
    if (!p.exited) ::kill(-p.pid, SIGKILL);
  }
}

Result<std::unique_ptr<GuestDaemon>> GuestDaemon::Create(UniqueFd channel, ExecContext ctx) {
  std::unique_ptr<GuestDaemon> d(new GuestDaemon(std::move(channel), std::move(ctx)));
  RETURN_IF_ERROR(d->Init());
  return d;
}

Status GuestDaemon::Init() {
  int flags = ::fcntl(channel_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(channel_.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoStatus("fcntl", "channel O_NONBLOCK", errno);
  }
  if (::fcntl(channel_.get(), F_SETFD, FD_CLOEXEC) != 0) return ErrnoStatus("fcntl", "channel FD_CLOEXEC", errno);
  // In a microVM the channel is a virtio-serial port (a character device), where send()
  // fails with ENOTSOCK; SIGPIPE is ignored by spaced, so write() is as safe there.
  struct stat channel_stat;
  if (::fstat(channel_.get(), &channel_stat) != 0) return ErrnoStatus("fstat", "channel", errno);
  channel_is_socket_ = S_ISSOCK(channel_stat.st_mode);
  if (channel_is_socket_) {
    // A Unix socket's sender buffer bounds how much one send moves: bulk streams (preview
    // connections, downloads) go in large pieces. Capped by net.core.wmem_max; best effort.
    int bytes = kChannelSendBuffer;
    (void)::setsockopt(channel_.get(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  }

  // SIGCHLD is consumed through the signalfd, so it must be blocked, not handled.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) return ErrnoStatus("sigprocmask", "SIGCHLD", errno);
  signal_fd_.reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd_) return ErrnoStatus("signalfd", "SIGCHLD", errno);
  timer_fd_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!timer_fd_) return ErrnoStatus("timerfd_create", "", errno);
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) return ErrnoStatus("epoll_create1", "", errno);

  channel_token_ = AddWatch(channel_.get(), EPOLLIN, Source::kChannel, 0);
  if (channel_token_ == 0 || AddWatch(signal_fd_.get(), EPOLLIN, Source::kSignal, 0) == 0 ||
      AddWatch(timer_fd_.get(), EPOLLIN, Source::kTimer, 0) == 0) {
    return Internal("spaced: cannot register the event loop's fds");
  }
  return Status::Ok();
}

Status GuestDaemon::Run() {
  Send(FrameType::kHello, 0, DumpJson({{"version", kVersion}}));
  // Children may have exited before the signalfd existed.
  ReapChildren();
  epoll_event events[64];
  while (!done_) {
    // Pending downloads are pumped between waits, so do not sleep while one can progress.
    int timeout = (!paused_ && !downloads_.empty()) ? 0 : -1;
    int n = ::epoll_wait(epoll_.get(), events, 64, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("epoll_wait", "", errno);
    }
    for (int i = 0; i < n && !done_; ++i) {
      // A watch removed earlier in this batch leaves a stale event; the token tells.
      auto it = watches_.find(events[i].data.u64);
      if (it == watches_.end()) continue;
      Watch w = it->second;  // copied: the handler may remove this very watch
      Dispatch(w, events[i].events);
    }
    if (done_) break;
    PumpDownloads();
    PumpWatches();
    ArmTimer();
  }
  return exit_status_;
}

uint64_t GuestDaemon::AddWatch(int fd, uint32_t events, Source source, uint32_t stream) {
  uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    LogError(kLog, ErrnoStatus("epoll_ctl", "ADD fd " + std::to_string(fd), errno).message());
    return 0;
  }
  watches_[token] = Watch{source, stream};
  return token;
}

void GuestDaemon::RemoveWatch(WatchedFd& w) {
  if (w.token == 0) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, w.fd.get(), nullptr);
  watches_.erase(w.token);
  w.token = 0;
}

void GuestDaemon::Dispatch(const Watch& w, uint32_t events) {
  switch (w.source) {
    case Source::kChannel:
      if (events & EPOLLOUT) FlushOutbox();
      if (!done_ && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) ReadChannel();
      return;
    case Source::kSignal: {
      signalfd_siginfo si;
      while (::read(signal_fd_.get(), &si, sizeof si) == sizeof si) {
      }
      ReapChildren();
      return;
    }
    case Source::kTimer: {
      uint64_t expirations;
      (void)!::read(timer_fd_.get(), &expirations, sizeof expirations);
      timer_armed_ns_ = 0;
      CheckDeadlines();
      return;
    }
    case Source::kStdout:
    case Source::kStderr:
      ReadOutput(w.stream, w.source);
      return;
    case Source::kStdin: {
      auto it = processes_.find(w.stream);
      if (it != processes_.end()) FlushStdin(it->second, w.stream);
      return;
    }
    case Source::kInotify: {
      auto it = dir_watches_.find(w.stream);
      if (it != dir_watches_.end()) it->second.watch->ReadEvents();
      return;
    }
    case Source::kTcp:
      return TcpEvent(w.stream, events);
  }
}

// ---- The channel ----

void GuestDaemon::Stop(Status status) {
  if (done_) return;
  done_ = true;
  exit_status_ = std::move(status);
}

void GuestDaemon::ReadChannel() {
  char buf[64 * 1024];
  ssize_t n = RetryEintr([&] { return ::read(channel_.get(), buf, sizeof buf); });
  if (n == 0 && !channel_is_socket_) {
    // A virtio-serial port reads EOF while no host end is connected (the VMM's chardev is
    // being replaced); the node comes back or the VMM dies with it. Back off, don't spin.
    ::usleep(50 * 1000);
    return;
  }
  if (n == 0) return Stop(Status::Ok());
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return Stop(ErrnoStatus("read", "channel", errno));
  }
  if (Status st = parser_.Feed(std::string_view(buf, static_cast<size_t>(n))); !st.ok()) return Stop(st);
  while (!done_) {
    std::optional<Frame> f = parser_.Next();
    if (!f) break;
    HandleFrame(*f);
  }
  // Next() stops at an invalid header without saying so; an empty Feed reports it.
  if (Status st = parser_.Feed({}); !st.ok()) Stop(st);
}

void GuestDaemon::HandleFrame(Frame& f) {
  switch (f.type) {
    case FrameType::kPing:
      return Send(FrameType::kPong, f.stream, f.payload);
    case FrameType::kReseed:
      return Reseed(f);
    case FrameType::kExecStart:
      return StartExec(f);
    case FrameType::kStdin:
      return WriteStdin(f);
    case FrameType::kSignal:
      return SignalProcess(f);
    case FrameType::kResize:
      return ResizeTty(f);
    case FrameType::kDropOutput: {
      auto it = processes_.find(f.stream);
      if (it != processes_.end()) it->second.drop_output = true;
      return;
    }
    case FrameType::kWatchStart:
      return StartWatch(f);
    case FrameType::kWatchStop:
      return StopWatch(f.stream);
    case FrameType::kFileOp:
      return StartFileOp(f);
    case FrameType::kFileData:
      return ReceiveUploadChunk(f);
    case FrameType::kNetConfig:
      return ConfigureNetwork(f);
    case FrameType::kGrowDisk:
      return GrowDisk(f);
    case FrameType::kLimitsQuery:
      return ReportLimits(f);
    case FrameType::kTcpOpen:
      return OpenTcp(f);
    case FrameType::kTcpData:
      return TcpFromNode(f);
    case FrameType::kTcpAck:
      return TcpAckFromNode(f);
    case FrameType::kTcpClose:
      return CloseTcp(f.stream, false);
    default:
      LogWarn(kLog, "ignoring frame of type " + std::to_string(static_cast<int>(f.type)) + " on " +
                        StreamName(f.stream));
  }
}

void GuestDaemon::Send(FrameType type, uint32_t stream, std::string_view payload) {
  if (done_) return;
  if (payload.size() > kMaxPayload) {
    LogError(kLog, "dropping oversized frame for " + StreamName(stream));
    return;
  }
  outbox_.push_back(EncodeFrame(type, stream, payload));
  outbox_bytes_ += outbox_.back().size();
  FlushOutbox();
  UpdateBackpressure();
}

void GuestDaemon::Reseed(const Frame& f) {
  // Synchronous on purpose: frames are handled in order, so nothing the node sends after
  // the reseed (its ping, then execs) runs before the CRNG has the host's randomness.
  Status st = ValidateReseed(f);
  if (st.ok()) st = MixHostEntropy(std::string_view(f.payload).substr(0, kReseedBytes));
  // A vm guest owns its kernel's clock; an ns sandbox shares the host's and is never sent one.
  if (const int64_t ns = st.ok() ? ReseedRealtimeNs(f) : 0; ns > 0 && ctx_.configures_network) {
    const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    if (::clock_settime(CLOCK_REALTIME, &ts) != 0) st = ErrnoStatus("clock_settime", "CLOCK_REALTIME", errno);
  }
  if (!st.ok()) {
    LogError(kLog, "reseed: " + st.ToString());
    SendError(0, st);
  }
}

void GuestDaemon::GrowDisk(const Frame& f) {
  // Synchronous, as Reseed: the node's ping after it means the root has its new size.
  Result<uint64_t> bytes = ParseGrowDisk(f);
  Status st = bytes.status();
  if (st.ok() && !ctx_.configures_network) st = PermissionDenied("grow disk: only a vm guest owns its disk");
  if (st.ok()) st = GrowRootFs(kVmRootDevice, "/", *bytes, kGrowDiskWaitMs);
  if (!st.ok()) {
    st = st.Annotate("grow disk");
    LogError(kLog, st.ToString());
    SendError(0, st);
  }
}

void GuestDaemon::ReportLimits(const Frame& f) {
  if (!CanOpenStream(f.stream, "limits query")) return;
  if (!ctx_.configures_network) {
    return SendError(f.stream, PermissionDenied("limits query: only a vm guest has a kernel of its own"));
  }
  Result<GuestLimits> limits = ReadGuestLimits("/");
  if (!limits.ok()) return SendError(f.stream, limits.status());
  Send(FrameType::kLimits, f.stream, EncodeGuestLimits(*limits));
}

void GuestDaemon::ConfigureNetwork(const Frame& f) {
  if (!CanOpenStream(f.stream, "net config")) return;
  if (!ctx_.configures_network) {
    return SendError(f.stream, PermissionDenied("net config: only a vm guest configures its own network"));
  }
  Result<NetConfig> config = ParseNetConfig(f.payload);
  Status st = config.ok() ? ApplyNetConfig(*config) : config.status();
  if (!st.ok()) return SendError(f.stream, st);
  Send(FrameType::kNetConfigured, f.stream, "{}");
}

void GuestDaemon::SendError(uint32_t stream, const Status& status) {
  Send(FrameType::kError, stream, ErrorJson(status));
}

void GuestDaemon::FlushOutbox() {
  while (!outbox_.empty()) {
    const std::string& front = outbox_.front();
    // MSG_NOSIGNAL: a vanished node must be an error here, not a SIGPIPE.
    ssize_t n = RetryEintr([&] {
      const char* data = front.data() + outbox_offset_;
      const size_t len = front.size() - outbox_offset_;
      return channel_is_socket_ ? ::send(channel_.get(), data, len, MSG_NOSIGNAL) : ::write(channel_.get(), data, len);
    });
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        SetChannelWritable(true);
        return;
      }
      return Stop(ErrnoStatus("send", "channel", errno));
    }
    outbox_offset_ += static_cast<size_t>(n);
    outbox_bytes_ -= static_cast<size_t>(n);
    if (outbox_offset_ == front.size()) {
      outbox_.pop_front();
      outbox_offset_ = 0;
    }
  }
  SetChannelWritable(false);
  UpdateBackpressure();
}

void GuestDaemon::SetChannelWritable(bool want) {
  if (want == channel_wants_out_) return;
  epoll_event ev{};
  ev.events = want ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
  ev.data.u64 = channel_token_;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, channel_.get(), &ev) != 0) {
    return Stop(ErrnoStatus("epoll_ctl", "MOD channel", errno));
  }
  channel_wants_out_ = want;
}

void GuestDaemon::UpdateBackpressure() {
  if (!paused_ && outbox_bytes_ > kOutboxHigh) {
    paused_ = true;
    // Unregister rather than mask: epoll reports EPOLLHUP even with no events requested.
    for (auto& [stream, p] : processes_) {
      RemoveWatch(p.out);
      RemoveWatch(p.err);
    }
    for (auto& [stream, t] : tcp_) TcpInterest(stream, t);
  } else if (paused_ && outbox_bytes_ < kOutboxLow) {
    paused_ = false;
    for (auto& [stream, p] : processes_) {
      if (p.out.fd) p.out.token = AddWatch(p.out.fd.get(), EPOLLIN, Source::kStdout, stream);
      if (p.err.fd) p.err.token = AddWatch(p.err.fd.get(), EPOLLIN, Source::kStderr, stream);
    }
    for (auto& [stream, t] : tcp_) TcpInterest(stream, t);
  }
}

bool GuestDaemon::CanOpenStream(uint32_t stream, std::string_view what) {
  if (stream == 0) {
    LogWarn(kLog, "ignoring " + std::string(what) + " on stream 0");
    return false;
  }
  if (processes_.count(stream) || uploads_.count(stream) || downloads_.count(stream) || dir_watches_.count(stream) ||
      tcp_.count(stream)) {
    LogWarn(kLog, "ignoring " + std::string(what) + " on busy " + StreamName(stream));
    return false;
  }
  return true;
}

// ---- Processes ----

void GuestDaemon::StartExec(const Frame& f) {
  if (!CanOpenStream(f.stream, "exec")) return;
  Result<ExecRequest> req = ParseExecRequest(f.payload);
  if (!req.ok()) return SendError(f.stream, req.status());
  Result<SpawnedProcess> sp = SpawnProcess(*req, ctx_);
  if (!sp.ok()) return SendError(f.stream, sp.status());

  Process p;
  p.pid = sp->pid;
  p.in.fd = std::move(sp->stdin_fd);
  p.out.fd = std::move(sp->stdout_fd);
  p.err.fd = std::move(sp->stderr_fd);
  p.pty = std::move(sp->pty_fd);
  if (req->timeout_ms > 0) {
    p.deadline_ns = MonoNowNs() + static_cast<int64_t>(std::min(req->timeout_ms, kMaxTimeoutMs)) * 1'000'000;
  }
  if (!paused_) {
    p.out.token = AddWatch(p.out.fd.get(), EPOLLIN, Source::kStdout, f.stream);
    if (p.err.fd) p.err.token = AddWatch(p.err.fd.get(), EPOLLIN, Source::kStderr, f.stream);
  }
  pid_streams_[p.pid] = f.stream;
  processes_.emplace(f.stream, std::move(p));
  Send(FrameType::kExecStarted, f.stream, DumpJson({{"pid", sp->pid}}));
}

void GuestDaemon::WriteStdin(const Frame& f) {
  auto it = processes_.find(f.stream);
  if (it == processes_.end() || !it->second.in.fd) return;  // finished, or stdin closed
  Process& p = it->second;
  if (f.payload.empty()) {
    p.close_stdin_when_flushed = true;
  } else if (p.stdin_pending.size() + f.payload.size() > kMaxStdinPending) {
    LogWarn(kLog, StreamName(f.stream) + ": process not reading stdin; over 1 MiB pending, closing it");
    return CloseStdin(p);
  } else {
    p.stdin_pending += f.payload;
  }
  FlushStdin(p, f.stream);
}

void GuestDaemon::FlushStdin(Process& p, uint32_t stream) {
  while (!p.stdin_pending.empty()) {
    ssize_t n = RetryEintr([&] { return ::write(p.in.fd.get(), p.stdin_pending.data(), p.stdin_pending.size()); });
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (p.in.token == 0) p.in.token = AddWatch(p.in.fd.get(), EPOLLOUT, Source::kStdin, stream);
        return;
      }
      return CloseStdin(p);  // EPIPE: the process closed its stdin
    }
    p.stdin_pending.erase(0, static_cast<size_t>(n));
  }
  RemoveWatch(p.in);
  if (p.close_stdin_when_flushed) CloseStdin(p);
}

void GuestDaemon::CloseStdin(Process& p) {
  RemoveWatch(p.in);
  p.in.fd.reset();
  p.stdin_pending.clear();
}

void GuestDaemon::SignalProcess(const Frame& f) {
  auto it = processes_.find(f.stream);
  if (it == processes_.end()) return;
  // Errors are logged, not answered: kError would end a stream whose last frame must be kExit.
  Result<nlohmann::json> j = ParseJsonObject(f.payload, "signal");
  uint64_t sig = 0;
  if (j.ok() && j->contains("signal") && (*j)["signal"].is_number_unsigned()) sig = (*j)["signal"].get<uint64_t>();
  if (sig < 1 || sig > 64) {
    LogWarn(kLog, StreamName(f.stream) + ": ignoring invalid signal request");
    return;
  }
  if (::kill(-it->second.pid, static_cast<int>(sig)) != 0 && errno != ESRCH) {
    LogWarn(kLog, ErrnoStatus("kill", "-" + std::to_string(it->second.pid), errno).message());
  }
}

void GuestDaemon::ResizeTty(const Frame& f) {
  auto it = processes_.find(f.stream);
  if (it == processes_.end() || !it->second.pty) return;  // ended, or not a tty
  // Like kSignal, errors are logged: the stream's last frame must stay kExit.
  Result<TtySize> size = ParseTtySize(f.payload);
  if (!size.ok()) {
    LogWarn(kLog, StreamName(f.stream) + ": ignoring resize: " + size.status().message());
    return;
  }
  if (Status st = SetTtySize(it->second.pty.get(), size->cols, size->rows); !st.ok()) {
    LogWarn(kLog, StreamName(f.stream) + ": " + st.message());
  }
}

void GuestDaemon::SendOutput(Process& p, FrameType type, uint32_t stream, std::string_view data) {
  if (!p.drop_output) return Send(type, stream, data);
  (type == FrameType::kStdout ? p.dropped_stdout : p.dropped_stderr) += data.size();
}

void GuestDaemon::ReadOutput(uint32_t stream, Source source) {
  auto it = processes_.find(stream);
  if (it == processes_.end()) return;
  WatchedFd& w = source == Source::kStdout ? it->second.out : it->second.err;
  if (!w.fd) return;
  char buf[kChunkSize];
  ssize_t n = RetryEintr([&] { return ::read(w.fd.get(), buf, sizeof buf); });
  if (n > 0) {
    SendOutput(it->second, source == Source::kStdout ? FrameType::kStdout : FrameType::kStderr, stream,
               std::string_view(buf, static_cast<size_t>(n)));
    return;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  // n == 0 for a pipe, EIO for a pty master whose slave side is all closed: the end.
  RemoveWatch(w);
  w.fd.reset();
  MaybeFinish(stream);
}

void GuestDaemon::ReapChildren() {
  // PID 1 must reap everything, including orphans re-parented to it.
  for (;;) {
    int status = 0;
    pid_t pid = RetryEintr([&] { return ::waitpid(-1, &status, WNOHANG); });
    if (pid <= 0) return;
    auto ps = pid_streams_.find(pid);
    if (ps == pid_streams_.end()) continue;
    uint32_t stream = ps->second;
    pid_streams_.erase(ps);
    auto it = processes_.find(stream);
    if (it == processes_.end()) continue;
    it->second.exited = true;
    it->second.wait_status = status;
    it->second.grace_end_ns = MonoNowNs() + kExitGraceNs;
    MaybeFinish(stream);
  }
}

void GuestDaemon::CheckDeadlines() {
  int64_t now = MonoNowNs();
  std::vector<uint32_t> exited;
  for (auto& [stream, p] : processes_) {
    if (p.exited) {
      exited.push_back(stream);
    } else if (p.deadline_ns != 0 && !p.timed_out && now >= p.deadline_ns) {
      p.timed_out = true;
      ::kill(-p.pid, SIGKILL);
    }
  }
  for (uint32_t stream : exited) MaybeFinish(stream);
}

void GuestDaemon::MaybeFinish(uint32_t stream) {
  auto it = processes_.find(stream);
  if (it == processes_.end() || !it->second.exited) return;
  const Process& p = it->second;
  if ((p.out.fd || p.err.fd) && MonoNowNs() < p.grace_end_ns) return;
  FinishProcess(stream);
}

void GuestDaemon::FinishProcess(uint32_t stream) {
  Process& p = processes_.at(stream);
  // Whatever is already in the pipes still belongs to the output (bounded: a grandchild
  // may keep writing).
  for (auto [w, type] : {std::pair{&p.out, FrameType::kStdout}, std::pair{&p.err, FrameType::kStderr}}) {
    size_t drained = 0;
    char buf[kChunkSize];
    while (w->fd && drained < kMaxDrainAtExit) {
      int fd = w->fd.get();  // clang 14 cannot capture structured bindings in a lambda
      ssize_t n = RetryEintr([&] { return ::read(fd, buf, sizeof buf); });
      if (n <= 0) break;
      SendOutput(p, type, stream, std::string_view(buf, static_cast<size_t>(n)));
      drained += static_cast<size_t>(n);
    }
    RemoveWatch(*w);
    w->fd.reset();
  }
  CloseStdin(p);
  p.pty.reset();
  nlohmann::json exit = {{"exit_code", nullptr}, {"signal", nullptr}, {"timed_out", p.timed_out}};
  if (WIFEXITED(p.wait_status)) exit["exit_code"] = WEXITSTATUS(p.wait_status);
  if (WIFSIGNALED(p.wait_status)) exit["signal"] = WTERMSIG(p.wait_status);
  if (p.drop_output) {
    exit["dropped_stdout"] = p.dropped_stdout;
    exit["dropped_stderr"] = p.dropped_stderr;
  }
  processes_.erase(stream);
  Send(FrameType::kExit, stream, DumpJson(exit));
}

void GuestDaemon::ArmTimer() {
  int64_t next = 0;
  for (const auto& [stream, p] : processes_) {
    int64_t t = 0;
    if (!p.exited && p.deadline_ns != 0 && !p.timed_out) t = p.deadline_ns;
    if (p.exited && (p.out.fd || p.err.fd)) t = p.grace_end_ns;
    if (t != 0 && (next == 0 || t < next)) next = t;
  }
  if (next == timer_armed_ns_) return;
  itimerspec spec{};
  spec.it_value.tv_sec = next / 1'000'000'000;
  spec.it_value.tv_nsec = next % 1'000'000'000;
  if (::timerfd_settime(timer_fd_.get(), TFD_TIMER_ABSTIME, &spec, nullptr) != 0) {
    LogError(kLog, ErrnoStatus("timerfd_settime", "", errno).message());
    return;
  }
  timer_armed_ns_ = next;
}

// ---- Files ----

void GuestDaemon::StartFileOp(const Frame& f) {
  if (!CanOpenStream(f.stream, "file op")) return;
  Result<FileOp> op = ParseFileOp(f.payload);
  if (!op.ok()) return SendError(f.stream, op.status());
  auto reply = [&](const Result<nlohmann::json>& r) {
    if (!r.ok()) return SendError(f.stream, r.status());
    Send(FrameType::kFileResult, f.stream, DumpJson(*r));
  };
  auto reply_status = [&](const Status& st) {
    if (!st.ok()) return SendError(f.stream, st);
    Send(FrameType::kFileResult, f.stream, "{}");
  };
  std::optional<Owner> owner;
  if (!op->owner.empty()) {
    Result<UserEntry> user = ResolveUser(op->owner, ctx_.passwd_path);
    if (!user.ok()) return SendError(f.stream, user.status());
    owner = Owner{user->uid, user->gid};
  }
  switch (op->kind) {
    case FileOp::Kind::kRead: {
      Result<OpenedFile> file = OpenForRead(op->path);
      if (!file.ok()) return SendError(f.stream, file.status());
      Send(FrameType::kFileResult, f.stream, DumpJson({{"size", file->size}}));
      downloads_[f.stream] = Download{std::move(file->fd), op->path};
      return;
    }
    case FileOp::Kind::kWrite: {
      Result<std::unique_ptr<FileWriter>> w = FileWriter::Create(op->path, op->mode.value_or(0644), owner);
      if (!w.ok()) return SendError(f.stream, w.status());
      uploads_[f.stream] = std::move(*w);
      return;
    }
    case FileOp::Kind::kList: {
      Result<nlohmann::json> r = ListDirectory(op->path, op->depth);
      if (!r.ok()) return reply(r);
      // Long names can push 10000 entries past the frame cap; drop from the end until
      // the reply fits.
      std::string body = DumpJson(*r);
      auto& entries = (*r)["entries"];
      while (body.size() > kMaxPayload && !entries.empty()) {
        size_t keep = entries.size() * kMaxPayload / body.size();
        keep = std::min(keep, entries.size() - 1);
        entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(keep), entries.end());
        body = DumpJson(*r);
      }
      return Send(FrameType::kFileResult, f.stream, body);
    }
    case FileOp::Kind::kStat:
      return reply(StatPath(op->path));
    case FileOp::Kind::kMkdir:
      return reply_status(MakeDirectory(op->path, op->mode.value_or(0755), owner));
    case FileOp::Kind::kMove:
      return reply_status(MovePath(op->path, op->to));
    case FileOp::Kind::kDelete:
      return reply_status(DeletePath(op->path, op->recursive));
  }
}

void GuestDaemon::ReceiveUploadChunk(const Frame& f) {
  auto it = uploads_.find(f.stream);
  if (it == uploads_.end()) return;  // ended by an error already, or never started
  if (!f.payload.empty()) {
    Status st = it->second->Append(f.payload);
    if (!st.ok()) {
      uploads_.erase(it);  // removes the temp file
      SendError(f.stream, st);
    }
    return;
  }
  Result<uint64_t> size = it->second->Commit();
  std::string path = it->second->path();
  uploads_.erase(it);
  if (!size.ok()) return SendError(f.stream, size.status());
  Send(FrameType::kFileResult, f.stream, DumpJson({{"path", path}, {"size", *size}}));
}

void GuestDaemon::PumpDownloads() {
  // One chunk per download per pass keeps streams fair and the loop responsive.
  char buf[kChunkSize];
  for (auto it = downloads_.begin(); it != downloads_.end() && !paused_ && !done_;) {
    uint32_t stream = it->first;
    ssize_t n = RetryEintr([&] { return ::read(it->second.fd.get(), buf, sizeof buf); });
    if (n > 0) {
      Send(FrameType::kFileData, stream, std::string_view(buf, static_cast<size_t>(n)));
      ++it;
      continue;
    }
    Status err = n < 0 ? ErrnoStatus("read", it->second.path, errno) : Status::Ok();
    it = downloads_.erase(it);
    if (err.ok()) {
      Send(FrameType::kFileData, stream, {});
    } else {
      SendError(stream, err);
    }
  }
}

}  // namespace space::guest

namespace space::guest {

// ---- Directory watches ----

void GuestDaemon::StartWatch(const Frame& f) {
  if (!CanOpenStream(f.stream, "watch")) return;
  Result<nlohmann::json> j = ParseJsonObject(f.payload, "watch request");
  if (!j.ok()) return SendError(f.stream, j.status());
  auto path = j->find("path");
  auto recursive = j->find("recursive");
  if (path == j->end() || !path->is_string() || !IsValidAbsolutePath(path->get_ref<const std::string&>())) {
    return SendError(f.stream, InvalidArgument("watch request: path must be an absolute path"));
  }
  if (recursive != j->end() && !recursive->is_null() && !recursive->is_boolean()) {
    return SendError(f.stream, InvalidArgument("watch request: recursive must be a boolean"));
  }
  if (dir_watches_.size() >= kMaxWatchStreams) {
    return SendError(f.stream, ResourceExhausted("more than " + std::to_string(kMaxWatchStreams) +
                                                 " directory watches in this sandbox"));
  }
  bool rec = recursive != j->end() && recursive->is_boolean() && recursive->get<bool>();
  Result<std::unique_ptr<DirWatch>> w = DirWatch::Create(path->get<std::string>(), rec, &watch_budget_);
  if (!w.ok()) return SendError(f.stream, w.status());
  DirStream ds;
  ds.token = AddWatch((*w)->fd(), EPOLLIN, Source::kInotify, f.stream);
  if (ds.token == 0) return SendError(f.stream, Internal("watch: cannot register the inotify fd"));
  ds.watch = std::move(*w);
  dir_watches_.emplace(f.stream, std::move(ds));
  Send(FrameType::kWatchStarted, f.stream, "{}");
}

void GuestDaemon::StopWatch(uint32_t stream) {
  auto it = dir_watches_.find(stream);
  if (it == dir_watches_.end()) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.watch->fd(), nullptr);
  watches_.erase(it->second.token);
  dir_watches_.erase(it);  // closing the inotify fd drops its kernel watches
}

void GuestDaemon::PumpWatches() {
  // Events wait in each DirWatch's bounded queue while the node reads slowly.
  for (auto it = dir_watches_.begin(); it != dir_watches_.end() && !paused_ && !done_;) {
    uint32_t stream = it->first;
    DirWatch& w = *it->second.watch;
    while (w.has_pending() && !paused_ && !done_) Send(FrameType::kWatchEvents, stream, DumpJson(w.TakeBatch()));
    ++it;
    if (w.root_gone() && !w.has_pending() && !done_) {
      std::string path = w.path();
      StopWatch(stream);
      SendError(stream, NotFound("watched directory " + path + " was removed or moved"));
    }
  }
}

}  // namespace space::guest
