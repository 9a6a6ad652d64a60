// The node <-> guest channel protocol (version 1).
//
// The node and `spaced` (PID 1 of a sandbox) talk over one SOCK_STREAM socket pair made
// before the sandbox starts; never over a network. Everything the guest sends is hostile
// to the node: frames are bounded, unknown types and streams are dropped, JSON bodies are
// validated field by field by whoever consumes them.
//
// Framing: a fixed 12-byte header, then `length` payload bytes.
//   u8  version   kVersion; any other value ends the connection
//   u8  type      FrameType
//   u16 flags     reserved, 0
//   u32 stream    multiplexing id chosen by the node (0 = the connection itself)
//   u32 length    payload bytes, <= kMaxPayload
// All integers are little-endian.
//
// Streams: the node opens a stream with kExecStart or kFileOp on a fresh stream id and the
// guest answers on the same id. Many streams run at once.
//
//   exec:  node kExecStart{json} -> guest kExecStarted{"pid":n} | kError{json}
//          guest kStdout/kStderr(raw)* ... guest kExit{json} (always last for the stream)
//          node  kStdin(raw)* ; an empty kStdin closes the process's stdin
//          node  kSignal{"signal":n}
//          node  kResize{"cols":n,"rows":n} (tty processes only; others ignore it)
//          A tty process has one pty for stdin, stdout and stderr: its output arrives as
//          kStdout only, and an empty kStdin ends the node's input without hanging up.
//   watch: node kWatchStart{json} -> guest kWatchStarted{} | kError{json}
//          guest kWatchEvents{json}* ... until node kWatchStop (no answer: the guest drops
//          the watch) or guest kError (the watched directory went away, or a failure)
//   file:  node kFileOp{json}; for "write" the node then sends kFileData(raw)* and an empty
//          kFileData to end. Guest answers kFileResult{json} | kError{json}; for "read"
//          kFileResult{"size":n,...} is followed by kFileData(raw)* and an empty kFileData.
//   net:   node kNetConfig{json} -> guest kNetConfigured{} | kError{json} (vm guests only:
//          spaced as PID 1 of a microVM configures its NIC; see guest/vm_net.h)
//   tcp:   node kTcpOpen{"port":n} -> guest kTcpOpened{} | kError{json}: spaced connects to
//          that port on the sandbox's own loopback (127.0.0.1, then ::1) and relays bytes.
//          Both ways kTcpData(raw)*; an empty kTcpData is that side's end of data (the
//          guest shuts down its socket's write side; the node's client half-closed). Each
//          side sends at most kTcpWindow bytes the other has not yet acknowledged with
//          kTcpAck{u32 LE bytes consumed}; more is a protocol violation that ends the stream.
//          kTcpClose (either way, empty) ends the stream at once; the guest sends it when
//          its socket has closed both ways or failed, and forgets the stream.
//   conn:  guest kHello{"version":1} first; node kPing -> guest kPong (same payload).
//          After a vm restore the node sends kReseed(host randomness) and then kPing: the guest
//          handles frames in order, so its pong means the kernel RNG was reseeded before any
//          later exec. A reseed the guest cannot apply is answered with kError on stream 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/status.h"

namespace space::guest {

inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderSize = 12;
// Hard cap on one frame's payload: a chunk of output or file data, or a JSON request.
inline constexpr uint32_t kMaxPayload = 1u << 20;
// Chunk size senders use for bulk data (file bodies, process output).
inline constexpr size_t kChunkSize = 64 * 1024;
// The channel is fd 3 in the guest (set up by the runtime before exec).
inline constexpr int kChannelFd = 3;
// Largest pty dimension accepted (struct winsize holds u16; nothing real is this big).
inline constexpr uint32_t kMaxTtySize = 4096;
// Bounds on directory watches, per sandbox (the guest enforces them).
inline constexpr size_t kMaxWatchStreams = 32;
inline constexpr size_t kMaxWatchesPerSandbox = 8192;
// Events per kWatchEvents frame, and events a stream may queue while the node is slow.
inline constexpr size_t kMaxWatchBatch = 128;
inline constexpr size_t kMaxWatchQueue = 4096;
// Unacknowledged kTcpData bytes a sender may have in flight on one tcp stream, and tcp
// streams a guest keeps open at once (more is kResourceExhausted).
inline constexpr uint32_t kTcpWindow = 2 * 1024 * 1024;
// The largest kTcpData payload a sender makes (a quarter of the window).
inline constexpr size_t kTcpChunk = 256 * 1024;
inline constexpr size_t kMaxTcpStreams = 256;

enum class FrameType : uint8_t {
  kHello = 1,           // guest -> node, stream 0, {"version":1}
  kPing = 2,            // node -> guest, any payload <= 64 bytes
  kPong = 3,            // guest -> node, echoes the ping payload
  kReseed = 4,          // node -> guest, stream 0, kReseedBytes of host randomness (see ValidateReseed)
  kExecStart = 10,      // node -> guest, ExecRequest JSON (see below)
  kExecStarted = 11,    // guest -> node, {"pid": host-invisible guest pid}
  kStdin = 12,          // node -> guest, raw bytes; empty closes stdin
  kStdout = 13,         // guest -> node, raw bytes
  kStderr = 14,         // guest -> node, raw bytes
  kSignal = 15,         // node -> guest, {"signal": n}
  kExit = 16,           // guest -> node, {"exit_code": n|null, "signal": n|null, "timed_out": bool}
  kResize = 17,         // node -> guest, {"cols": n, "rows": n}: the tty's new window size
  kDropOutput = 18,     // node -> guest, empty: the node keeps no more of this process's output;
                        // the guest reads and counts it but sends no more kStdout/kStderr, and
                        // kExit carries the counts ("dropped_stdout", "dropped_stderr")
  kFileOp = 20,         // node -> guest, FileOp JSON (see below)
  kFileData = 21,       // both ways, raw bytes; empty ends the body
  kFileResult = 22,     // guest -> node, JSON result of a file op
  kError = 30,          // guest -> node, {"code": "<api word>", "message": "..."}; ends the stream
  kWatchStart = 40,     // node -> guest, WatchRequest JSON (see below)
  kWatchStarted = 41,   // guest -> node, {}: the watch is in place; later changes are seen
  kWatchEvents = 42,    // guest -> node, WatchEvents JSON (see below)
  kWatchStop = 43,      // node -> guest, empty: drop the watch; nothing more is sent for it
  kNetConfig = 50,      // node -> guest, {"address", "gateway", "mac"}: the NIC's identity
  kNetConfigured = 51,  // guest -> node, {}: applied
  kGrowDisk = 52,       // node -> guest, stream 0, 8 bytes LE: the disk's new size (see EncodeGrowDisk)
  kLimitsQuery = 53,    // node -> guest, new stream, empty: what limits has the guest's kernel seen?
  kLimits = 54,         // guest -> node, {"oom_kills", "disk_total", "disk_avail"} (vm guests only)
  kTcpOpen = 60,        // node -> guest, new stream, {"port": 1..65535}
  kTcpOpened = 61,      // guest -> node, {}: connected
  kTcpData = 62,        // both ways, raw bytes; empty: this side's end of data
  kTcpAck = 63,         // both ways, 4 bytes LE: bytes of kTcpData consumed since the last ack
  kTcpClose = 64,       // both ways, empty: the stream is over
};

// kExecStart JSON:
//   {"cmd": ["argv0", ...],            required, 1..4096 entries
//    "env": {"K": "V"},                added to the guest's base environment
//    "cwd": "/path" | absent,          default: the user's home
//    "user": "root" | "user" | "1000", default root; resolved in the sandbox's /etc/passwd
//    "timeout_ms": n,                  0 = none; the guest kills the process group
//    "stdin": bool,                    true: keep stdin open for kStdin frames; false: /dev/null
//    "tty": bool,                      true: run on a new pty as its controlling terminal
//    "cols": n, "rows": n}             the pty's initial size, 1..kMaxTtySize; default 80x24
//
// kResize JSON: {"cols": n, "rows": n}, each 1..kMaxTtySize.
//
// kWatchStart JSON: {"path": "/abs dir", "recursive": bool}. Recursive watches follow
//   directories created later; at most kMaxWatchesPerSandbox directories are watched over
//   all streams and kMaxWatchStreams streams at once (more is kResourceExhausted).
// kWatchEvents JSON: {"events": [{"name": "path relative to the watched dir",
//   "type": "create|write|remove|rename|chmod"}...] (at most kMaxWatchBatch),
//   "overflow": bool}  true: events were lost (kernel queue overflow, the guest's
//   per-stream queue cap, or a new directory past the watch cap); rescan if it matters.
//
// kFileOp JSON: {"op": "read|write|list|stat|mkdir|move|delete", "path": "/abs",
//   "to": "/abs" (move), "mode": n (write, mkdir), "recursive": bool (delete),
//   "depth": n (list, 1..8), "owner": "user" | "1000" (write, mkdir: owner of what is created)}
// kFileResult JSON:
//   read:   {"size": n}            (then data)
//   write:  {"path": p, "size": n}
//   stat:   Entry                  {"name","path","type":"file|dir|symlink|other","size","mode","mtime","uid","gid"}
//   list:   {"entries": [Entry...]} at most 10000 entries
//   mkdir, move, delete: {}

struct Frame {
  FrameType type = FrameType::kHello;
  uint32_t stream = 0;
  std::string payload;
};

// A kReseed payload: fresh host randomness (getrandom) for a guest restored from a shared
// checkpoint, whose kernel CRNG state is otherwise identical to every other restore's.
// The host's CLOCK_REALTIME (ns, little-endian int64) may follow it: a restored guest's clock
// resumes from the instant it was saved (its TSC is restored with it), hours behind for a
// template checkpoint made hours ago, and TLS certificates would not yet be valid to it.
inline constexpr size_t kReseedBytes = 64;
inline constexpr size_t kReseedClockBytes = 8;
// A kReseed frame for `entropy` (kReseedBytes long) and, when `realtime_ns` > 0, the host's clock.
std::string EncodeReseed(std::string_view entropy, int64_t realtime_ns = 0);
// Checks a received kReseed frame's payload: kReseedBytes, or that plus kReseedClockBytes, on
// stream 0.
Status ValidateReseed(const Frame& frame);
// The host clock a valid kReseed frame carries; 0 when it carries none.
int64_t ReseedRealtimeNs(const Frame& frame);

// A kGrowDisk frame: the host resized a restored vm guest's disk to `device_bytes`, and the
// guest grows its root filesystem to it. Handled in order, like kReseed: a ping after it is
// answered once the filesystem has grown (or failed to, with a kError on stream 0).
std::string EncodeGrowDisk(uint64_t device_bytes);
Result<uint64_t> ParseGrowDisk(const Frame& frame);

struct FrameHeader {
  uint8_t version = kVersion;
  FrameType type = FrameType::kHello;
  uint16_t flags = 0;
  uint32_t stream = 0;
  uint32_t length = 0;
};

// Serializes a header for `payload_len` bytes into `out` (kHeaderSize bytes).
void EncodeHeader(FrameType type, uint32_t stream, uint32_t payload_len, uint8_t out[kHeaderSize]);
// The whole frame as bytes. Precondition: payload.size() <= kMaxPayload.
std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload);

// Parses and validates a header: wrong version or oversized length is an error.
Result<FrameHeader> DecodeHeader(const uint8_t in[kHeaderSize]);

// Incremental parser for a byte stream of frames. Feed() bytes as they arrive; Next()
// yields complete frames. After any error the stream is unusable (the peer is broken or
// hostile and the connection must be closed). Thread-compatible.
class FrameParser {
 public:
  // Appends bytes. Returns an error when they make the stream invalid.
  Status Feed(std::string_view bytes);
  // The next complete frame, or nullopt when more bytes are needed.
  std::optional<Frame> Next();
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
  bool broken_ = false;
};

// Blocking helpers over a socket fd. WriteFrame sends header+payload with one writev-like
// call sequence; callers serialize concurrent writers. ReadFrame fails on EOF, a bad
// header, or an oversized frame.
// A kTcpAck payload for `bytes`, and its inverse (invalid_argument unless exactly 4 bytes).
std::string EncodeTcpAck(uint32_t bytes);
Result<uint32_t> ParseTcpAck(std::string_view payload);

Status WriteFrame(int fd, FrameType type, uint32_t stream, std::string_view payload);
Result<Frame> ReadFrame(int fd);

}  // namespace space::guest
