// GuestDaemon: spaced's single-threaded epoll loop serving the node over the channel.
//
// Owns the channel, every process it started (with their pipes or pty), every file stream,
// every directory watch (inotify) and every tcp relay (a connection to one of the sandbox's
// own loopback ports, tcp_relay.cc).
// Watches the channel, child output pipes, child stdin pipes with pending input, a
// signalfd for SIGCHLD and a timerfd for exec deadlines and exit grace periods. As PID 1
// it reaps every zombie in the sandbox, ours or orphaned. Output to the node goes through
// a bounded outbox; when the node reads slowly, child pipes and file reads pause
// (backpressure) instead of buffering without limit. Not thread-safe: one thread runs it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/result.h"
#include "common/unique_fd.h"
#include "guest/dir_watch.h"
#include "guest/exec.h"
#include "guest/files.h"
#include "protocol/protocol.h"

namespace space::guest {

class GuestDaemon {
 public:
  // Takes the channel (any fd flags) and blocks SIGCHLD in the calling thread.
  static Result<std::unique_ptr<GuestDaemon>> Create(UniqueFd channel, ExecContext ctx);
  // Kills the process groups it started that are still running.
  ~GuestDaemon();
  GuestDaemon(const GuestDaemon&) = delete;
  GuestDaemon& operator=(const GuestDaemon&) = delete;

  // Sends kHello and serves until the channel ends: Ok on EOF, an error when the channel
  // fails or the node sends an invalid frame (the sandbox should then die).
  Status Run();

 private:
  enum class Source : uint8_t { kChannel, kSignal, kTimer, kStdout, kStderr, kStdin, kInotify, kTcp };
  struct Watch {
    Source source;
    uint32_t stream;
  };
  // An fd and its epoll registration (token 0: not registered).
  struct WatchedFd {
    UniqueFd fd;
    uint64_t token = 0;
  };
  struct Process {
    pid_t pid = -1;
    WatchedFd in, out, err;
    UniqueFd pty;  // tty processes: the master, for resizing
    std::string stdin_pending;
    bool close_stdin_when_flushed = false;
    bool exited = false;
    int wait_status = 0;
    bool timed_out = false;
    int64_t deadline_ns = 0;   // 0: none
    int64_t grace_end_ns = 0;  // set at exit: stop waiting for pipes held by grandchildren
    // After kDropOutput: output is read (so the writer never blocks) and counted, not sent.
    // The reading is charged to the sandbox's own CPU quota, not to the node.
    bool drop_output = false;
    uint64_t dropped_stdout = 0;
    uint64_t dropped_stderr = 0;
  };
  struct DirStream {
    std::unique_ptr<DirWatch> watch;
    uint64_t token = 0;
  };
  struct Download {
    UniqueFd fd;
    std::string path;
  };
  // A connection to a loopback port of the sandbox, relayed to the node (kTcp* frames).
  struct TcpRelay {
    UniqueFd sock;
    uint16_t port = 0;
    bool v6 = false;  // connecting to ::1 (127.0.0.1 refused)
    uint64_t token = 0;   // epoll registration, 0 while it wants no events
    uint32_t events = 0;  // what it is registered for
    bool connecting = true;
    bool sock_eof = false;  // the socket read its end; sent to the node as an empty kTcpData
    bool node_eof = false;  // the node's empty kTcpData: shut down writing once flushed
    bool shut_wr = false;
    std::string to_sock;     // from the node, not yet written (bounded by kTcpWindow)
    uint32_t in_flight = 0;  // sent to the node, not yet acknowledged
    uint32_t written = 0;    // written to the socket since the last ack we sent
  };

  GuestDaemon(UniqueFd channel, ExecContext ctx);
  Status Init();

  // epoll registration.
  uint64_t AddWatch(int fd, uint32_t events, Source source, uint32_t stream);
  void RemoveWatch(WatchedFd& w);
  void Dispatch(const Watch& w, uint32_t events);

  // The channel.
  void ReadChannel();
  void HandleFrame(Frame& f);
  // kReseed: mixes the node's randomness into the kernel CRNG (vm restores); answers only
  // on failure, with kError on stream 0.
  void Reseed(const Frame& f);
  void GrowDisk(const Frame& f);
  void Send(FrameType type, uint32_t stream, std::string_view payload);
  void SendError(uint32_t stream, const Status& status);
  // kNetConfig: applied synchronously (a vm guest's NIC; refused elsewhere).
  void ConfigureNetwork(const Frame& f);
  // kLimitsQuery: the guest kernel's OOM kills and root filesystem space (vm guests only; an
  // ns sandbox's limits are the host's cgroup and quota, which the node reads itself).
  void ReportLimits(const Frame& f);
  void FlushOutbox();
  void SetChannelWritable(bool want);
  void UpdateBackpressure();
  void Stop(Status status);
  bool CanOpenStream(uint32_t stream, std::string_view what);

  // Processes.
  void StartExec(const Frame& f);
  void WriteStdin(const Frame& f);
  void SignalProcess(const Frame& f);
  void ResizeTty(const Frame& f);
  void FlushStdin(Process& p, uint32_t stream);
  void CloseStdin(Process& p);
  void ReadOutput(uint32_t stream, Source source);
  // Sends one chunk of `p`'s output, or only counts it once the node asked to drop it.
  void SendOutput(Process& p, FrameType type, uint32_t stream, std::string_view data);
  void ReapChildren();
  void CheckDeadlines();
  void MaybeFinish(uint32_t stream);
  void FinishProcess(uint32_t stream);
  void ArmTimer();

  // Files.
  void StartFileOp(const Frame& f);
  void ReceiveUploadChunk(const Frame& f);
  void PumpDownloads();

  // Tcp relays (tcp_relay.cc).
  void OpenTcp(const Frame& f);
  void TcpFromNode(const Frame& f);
  void TcpAckFromNode(const Frame& f);
  void TcpEvent(uint32_t stream, uint32_t events);
  void TcpConnected(uint32_t stream, TcpRelay& t);
  void TcpRead(uint32_t stream, TcpRelay& t);
  void TcpWrite(uint32_t stream, TcpRelay& t);
  // Registers for what the relay can use now: nothing while the node's window is full or
  // output is paused, so a full peer is never polled in a loop.
  void TcpInterest(uint32_t stream, TcpRelay& t);
  void CloseTcp(uint32_t stream, bool tell_node);

  // Directory watches.
  void StartWatch(const Frame& f);
  void StopWatch(uint32_t stream);
  void PumpWatches();

  UniqueFd channel_;
  ExecContext ctx_;
  UniqueFd epoll_;
  UniqueFd signal_fd_;
  UniqueFd timer_fd_;
  uint64_t channel_token_ = 0;
  bool channel_wants_out_ = false;
  bool channel_is_socket_ = true;  // false for a virtio-serial port
  int64_t timer_armed_ns_ = 0;

  std::unordered_map<uint64_t, Watch> watches_;
  uint64_t next_token_ = 1;

  FrameParser parser_;
  std::deque<std::string> outbox_;
  size_t outbox_offset_ = 0;  // bytes of outbox_.front() already sent
  size_t outbox_bytes_ = 0;   // unsent bytes in total
  bool paused_ = false;       // output reading paused for backpressure

  std::map<uint32_t, Process> processes_;
  std::unordered_map<pid_t, uint32_t> pid_streams_;
  std::map<uint32_t, std::unique_ptr<FileWriter>> uploads_;
  std::map<uint32_t, Download> downloads_;
  std::map<uint32_t, DirStream> dir_watches_;
  std::map<uint32_t, TcpRelay> tcp_;
  WatchBudget watch_budget_{0, kMaxWatchesPerSandbox};

  bool done_ = false;
  Status exit_status_;
};

}  // namespace space::guest
