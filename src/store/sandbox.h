// The sandbox model: what a sandbox is, typed. The store keeps a sandbox as a row of text
// columns (SandboxRecord, store.h); Sandbox::FromRecord and ToRecord are the only places that
// turn one into the other, with the one set of defaults below. Everything above the store
// (node, API, E2B, control plane) works on Sandbox and never parses a column.
//
// Plain values: copy freely, no locking.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace space::store {

struct SandboxRecord;

// Where a sandbox is in its life. Transitions (node/lifecycle): creating -> running;
// running <-> paused; running|paused -> suspending -> suspended -> resuming -> running;
// any live state -> destroying -> destroyed; any state but destroyed -> failed.
enum class SandboxState : uint8_t {
  kCreating,
  kRunning,
  kPaused,
  kSuspending,
  kSuspended,
  kResuming,
  kDestroying,
  kDestroyed,
  kFailed,
};

// The state's name on the wire and in the store ("running").
std::string_view StateName(SandboxState state);
// The inverse of StateName; invalid_argument for any other text.
Result<SandboxState> ParseSandboxState(std::string_view name);
// Destroyed or failed: nothing of the sandbox runs and nothing will.
bool IsEnded(SandboxState state);

// The isolation a sandbox runs under: namespaces on the host kernel, or a QEMU guest kernel.
enum class RuntimeKind : uint8_t { kNs, kVm };
std::string_view RuntimeName(RuntimeKind kind);
Result<RuntimeKind> ParseRuntimeKind(std::string_view name);

// What the node does when a sandbox's timeout runs out.
enum class OnTimeout : uint8_t { kDestroy, kSuspend };
std::string_view OnTimeoutName(OnTimeout action);
Result<OnTimeout> ParseOnTimeout(std::string_view name);

// The limits a sandbox was created with. The defaults are the API's.
struct Resources {
  double cpus = 1;
  int64_t memory_mb = 512;
  int64_t disk_mb = 2048;

  nlohmann::json ToJson() const;
  // Missing or mistyped fields keep their defaults.
  static Resources FromJson(const nlohmann::json& j);
  bool operator==(const Resources&) const = default;
};

// Rolling snapshots: every `every_s` seconds, keeping the newest `keep` that are younger than
// `max_age_s`. every_s == 0: no rolling snapshots.
struct SnapshotPolicy {
  int64_t every_s = 0;
  int64_t keep = 24;
  int64_t max_age_s = 7 * 86400;

  bool enabled() const { return every_s > 0; }
  // {} when disabled.
  nlohmann::json ToJson() const;
  static SnapshotPolicy FromJson(const nlohmann::json& j);
  bool operator==(const SnapshotPolicy&) const = default;
};

struct Sandbox {
  std::string id;
  std::string team;
  SandboxState state = SandboxState::kCreating;
  std::string template_name;
  std::string template_digest;
  RuntimeKind runtime = RuntimeKind::kNs;
  std::string node;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  int64_t timeout_s = 0;
  OnTimeout on_timeout = OnTimeout::kDestroy;
  std::map<std::string, std::string> metadata;
  // The sandbox's environment, credential placeholders included (never a secret).
  std::map<std::string, std::string> env;
  // The egress profiles named at create, as they were then: the sandbox's policy for its whole
  // life, whatever happens to the profiles later. An array of profile objects; [] = no network.
  nlohmann::json egress = nlohmann::json::array();
  Resources resources;
  // {"create_ms", "steps": {name: ms}} of the create that made it.
  nlohmann::json timings = nlohmann::json::object();
  int64_t uid_slot = -1;      // host uid range index while the sandbox holds one
  std::string error;          // why it failed, when state == kFailed
  std::string head_snapshot;  // the snapshot its files descend from most recently
  SnapshotPolicy policy;

  bool has_egress() const { return egress.is_array() && !egress.empty(); }
  // The names of the profiles in `egress`, in order.
  std::vector<std::string> EgressProfileNames() const;

  // A row read from the store. A column that does not parse keeps the default; a state the
  // model does not know reads as kFailed with the reason in `error`, so a row written by a
  // newer version is never taken for a live sandbox.
  static Sandbox FromRecord(const SandboxRecord& rec);
  SandboxRecord ToRecord() const;
};

}  // namespace space::store
