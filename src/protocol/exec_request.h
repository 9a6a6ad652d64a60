// The typed form of a kExecStart request (see protocol.h for the JSON), with its one encoder
// (the node's side) beside its one parser (the guest's side).
//
// EncodeExecRequest and ParseExecRequest are the only places that touch the request JSON;
// everything else works on the typed ExecRequest. Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace space::guest {

inline constexpr size_t kMaxArgs = 4096;
inline constexpr size_t kMaxArgBytes = 64 * 1024;
inline constexpr size_t kMaxPathBytes = 4096;

struct ExecRequest {
  std::vector<std::string> cmd;                             // argv; cmd[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> env;     // overrides, in request order
  std::optional<std::string> cwd;                           // absent: the user's home
  std::string user = "root";                                // name or decimal uid
  uint64_t timeout_ms = 0;                                  // 0: no deadline
  bool keep_stdin = false;                                  // false: stdin reads EOF at once
  // Run on a new pty (stdin, stdout and stderr all on it) as the controlling terminal.
  bool tty = false;
  uint16_t cols = 80;  // the pty's initial size; only with tty
  uint16_t rows = 24;
};

// A pty window size from a kResize payload.
struct TtySize {
  uint16_t cols = 0;
  uint16_t rows = 0;
};

// The kExecStart payload for `req`: the JSON ParseExecRequest reads back as `req`. An env name
// given twice keeps its last value. tty, cols and rows are written only with tty (the guest
// ignores the size otherwise); everything else always. Invalid UTF-8 in a string becomes
// U+FFFD. Does not validate: the node checks what it sends, the guest checks what it gets.
std::string EncodeExecRequest(const ExecRequest& req);

// Parses and strictly validates a kExecStart payload. Every failure is kInvalidArgument.
// Unknown fields are ignored so that newer nodes can add optional ones; null means absent.
Result<ExecRequest> ParseExecRequest(std::string_view payload);

// Parses a kResize payload {"cols": n, "rows": n}, each 1..kMaxTtySize; kInvalidArgument
// otherwise.
Result<TtySize> ParseTtySize(std::string_view payload);

// True for a POSIX-ish environment variable name: [A-Za-z_][A-Za-z0-9_]*.
bool IsValidEnvName(std::string_view name);

// True for an absolute path of at most kMaxPathBytes without NUL bytes.
bool IsValidAbsolutePath(std::string_view path);

}  // namespace space::guest
