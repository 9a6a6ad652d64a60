// Store: durable desired and observed state of SPACE objects behind a small interface.
//
// The embedded implementation is SQLite (sqlite_store.cc); PostgreSQL (postgres_store.h) sits
// behind the same interface for several servers, and open_store.h picks one from a URL. Both
// pass the same suite (store_test.cc).
// Nested values (metadata, resources, timings...) travel as JSON text the store never parses.
// Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include <nlohmann/json.hpp>

#include "store/sandbox.h"
#include "store/states.h"

namespace space::store {

// A sandbox as the store keeps it: one text column per field. Only the store and the model
// (sandbox.h: Sandbox::FromRecord, ToRecord) read or write one.
struct SandboxRecord {
  std::string id;
  std::string team;
  std::string state;            // creating|running|...|destroyed|failed
  std::string template_name;
  std::string template_digest;
  std::string runtime;          // "ns"
  std::string node;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  int64_t timeout_s = 0;
  std::string on_timeout;       // destroy|suspend
  std::string metadata_json = "{}";
  std::string env_json = "{}";
  std::string egress_json = "[]";
  std::string resources_json = "{}";
  std::string timings_json = "{}";
  int64_t uid_slot = -1;        // host uid range index while the sandbox holds one
  std::string error;            // why it failed, when state == failed
  std::string head_snapshot;    // the snapshot its files descend from most recently (parent of the next)
  std::string policy_json = "{}";  // rolling snapshots: {"every_s", "keep", "max_age_s"}
};

// A team (api: /v1/teams). "default" is the admin team and exists without a row.
struct TeamRecord {
  std::string name;
  int64_t created_at_ms = 0;
  // {"sandboxes", "cpus", "memory_mb", "disk_mb", "snapshots"}: limits (store/quotas.h); a
  // missing member is no limit.
  nlohmann::json quotas = nlohmann::json::object();
};

// A key made through the API (/v1/keys): the key is "space.<id>.<secret>"; the store keeps
// only a random salt and SHA-256(salt || secret), so neither a stolen database nor a timing
// difference in a lookup by digest gives the key away. Revoked keys stay (revoked_at_ms set)
// so the audit of what they did still names them.
struct ApiKeyRecord {
  std::string id;  // "key_..."
  std::string team;
  std::string name;
  std::string salt;                 // 32 hex digits
  std::string secret_sha256;        // hex SHA-256 of salt || secret
  std::vector<std::string> scopes;  // api/scopes.h
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;  // 0: never
  int64_t revoked_at_ms = 0;  // 0: live
};

// An opened preview port of a sandbox (api: /v1/sandboxes/{id}/ports). Port 0 opens every
// port (what an E2B create asks for: E2B sandboxes serve any port publicly). The token is
// stored as SHA-256 hex only, like an API key.
struct PortRecord {
  std::string sandbox;
  int64_t port = 0;
  std::string team;
  bool is_public = false;
  bool auto_resume = false;
  std::string token_sha256;  // "" for a public port
  int64_t created_at_ms = 0;
};

struct SnapshotRecord {
  std::string id;
  std::string team;
  std::string sandbox;       // the sandbox it was taken of
  std::string parent;        // previous snapshot in the lineage, "" for a first one
  std::string label;
  std::string kind = "filesystem";  // the ns runtime keeps files, not memory
  SnapshotState state = SnapshotState::kLocal;
  int64_t size_bytes = 0;
  int64_t created_at_ms = 0;
  std::string error;
};

// A credential: its public spec as JSON and its secret sealed with the node's key-encryption
// key (never stored in clear).
struct CredentialRecord {
  std::string team;
  std::string name;
  std::string spec_json;
  std::string sealed_secret;
  int64_t created_at_ms = 0;
};

// A named, additive egress allowlist.
struct EgressProfileRecord {
  std::string team;
  std::string name;
  std::string spec_json;
  int64_t created_at_ms = 0;
};

// The placeholder a sandbox holds in place of a credential's secret.
struct SandboxCredentialRecord {
  std::string sandbox;
  std::string name;
  std::string placeholder;
};

struct SandboxFilter {
  std::string team;                       // required
  std::optional<SandboxState> state;
  std::vector<std::pair<std::string, std::string>> metadata;  // all must match
  std::string after_id;                   // page token: ids sort ascending
  int limit = 100;
  bool include_destroyed = false;
};

struct OperationRecord {
  std::string id;
  std::string team;
  std::string kind;      // create|destroy|...
  std::string target;    // sandbox id
  OperationState state = OperationState::kPending;
  std::string error;
  int64_t created_at_ms = 0;
  int64_t finished_at_ms = 0;
};

struct CommandRecord {
  std::string pid;        // proc_...
  std::string sandbox;
  std::vector<std::string> cmd;  // argv
  std::string user;
  std::string cwd;
  int64_t started_at_ms = 0;
  int64_t finished_at_ms = 0;      // 0 while running
  std::optional<int> exit_code;
  std::string signal;              // "SIGKILL" or empty
  int64_t stdout_bytes = 0;
  int64_t stderr_bytes = 0;
};

struct AuditEvent {
  int64_t seq = 0;        // assigned by the store
  int64_t ts_ms = 0;
  std::string team;
  std::string sandbox;
  std::string kind;       // lifecycle|exec|egress|credential
  std::string action;     // create|destroy|exec|...
  nlohmann::json detail = nlohmann::json::object();
};

struct AuditFilter {
  std::string team;
  std::string sandbox;
  std::string kind;
  int limit = 100;
};

// A node agent as it last reported itself (fleet mode: `space node`).
struct NodeRecord {
  std::string name;
  std::string url;             // where servers reach its API, e.g. http://10.0.0.5:7722
  NodeState state = NodeState::kReady;
  int64_t capacity = 0;        // sandboxes it accepts in all
  int64_t live = 0;            // sandboxes it runs now
  std::vector<std::string> templates;  // names of the templates in its pool
  int64_t heartbeat_at_ms = 0;
  int64_t started_at_ms = 0;
};

// A unit of control-plane work (fleet mode), claimed by one server replica at a time through a
// lease: a replica that dies mid-job lets its lease run out and another takes the job over.
struct JobRecord {
  std::string id;
  std::string kind;            // migrate
  std::string target;          // sandbox id
  std::string team;
  nlohmann::json payload = nlohmann::json::object();  // the job kind's own state
  JobState state = JobState::kPending;
  std::string holder;          // replica holding the lease
  int64_t lease_until_ms = 0;
  int64_t attempts = 0;
  std::string error;
  int64_t created_at_ms = 0;
  int64_t finished_at_ms = 0;
};

// One holder's lease on the object store (node/blob_locks.h). The row with id kBlobGateId
// names the exclusive holder ("" when none); every other row is one shared holder.
inline constexpr const char* kBlobGateId = "gate";
struct BlobLeaseRecord {
  std::string id;
  std::string holder;
  int64_t until_ms = 0;  // store clock; a lease past it is dead (its holder crashed or hung)
};

// A volume (api: /v1/volumes): named, team-owned data that outlives sandboxes (node/volumes.h).
// Its bytes are in one node's pool (`node`, the holder of the newest copy) and, once synced, in
// the snapshot store under `manifest`; "" for either means none.
struct VolumeRecord {
  std::string id;  // "vol_..."
  std::string team;
  std::string name;
  int64_t size_mb = 0;
  int64_t created_at_ms = 0;
  std::string node;      // whose pool holds the newest copy ("": only the store, or nobody yet)
  std::string manifest;  // the newest copy in the snapshot store ("" none)
  std::string parent;    // the volume it was forked from ("" none)
};

// A sandbox's mount of a volume; the row lives until the sandbox is destroyed or fails. At most
// one read-write row per volume (a unique index): the store refuses a second writer.
struct VolumeMountRecord {
  std::string volume;  // VolumeRecord::id
  std::string sandbox;
  std::string path;  // absolute, normalized, in the sandbox
  bool read_only = false;
  int64_t created_at_ms = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  virtual Status PutSandbox(const Sandbox& s) = 0;  // insert or replace
  virtual Result<Sandbox> GetSandbox(const std::string& id) = 0;  // not_found
  virtual Result<std::vector<Sandbox>> ListSandboxes(const SandboxFilter& f) = 0;
  // Every sandbox not yet destroyed, any team: what the reconciler converges.
  virtual Result<std::vector<Sandbox>> ListLiveSandboxes() = 0;

  virtual Status PutSnapshot(const SnapshotRecord& r) = 0;  // insert or replace
  virtual Result<SnapshotRecord> GetSnapshot(const std::string& id) = 0;  // not_found
  // A sandbox's snapshots (oldest first), or every snapshot when `sandbox` is "".
  virtual Result<std::vector<SnapshotRecord>> ListSnapshots(const std::string& sandbox) = 0;

  virtual Status PutCredential(const CredentialRecord& r) = 0;  // insert or replace
  virtual Result<CredentialRecord> GetCredential(const std::string& team, const std::string& name) = 0;
  virtual Result<std::vector<CredentialRecord>> ListCredentials(const std::string& team) = 0;
  virtual Status DeleteCredential(const std::string& team, const std::string& name) = 0;  // not_found

  virtual Status PutEgressProfile(const EgressProfileRecord& r) = 0;
  virtual Result<EgressProfileRecord> GetEgressProfile(const std::string& team, const std::string& name) = 0;
  virtual Result<std::vector<EgressProfileRecord>> ListEgressProfiles(const std::string& team) = 0;
  virtual Status DeleteEgressProfile(const std::string& team, const std::string& name) = 0;

  virtual Status PutSandboxCredential(const SandboxCredentialRecord& r) = 0;
  virtual Result<std::vector<SandboxCredentialRecord>> ListSandboxCredentials(const std::string& sandbox) = 0;

  virtual Status PutPort(const PortRecord& r) = 0;                                    // insert or replace
  virtual Result<std::vector<PortRecord>> ListPorts(const std::string& sandbox) = 0;  // by port
  virtual Status DeletePort(const std::string& sandbox, int64_t port) = 0;            // not_found

  virtual Status PutOperation(const OperationRecord& r) = 0;
  virtual Result<OperationRecord> GetOperation(const std::string& id) = 0;
  virtual Result<std::vector<OperationRecord>> ListUnfinishedOperations() = 0;

  virtual Status PutCommand(const CommandRecord& r) = 0;
  virtual Result<std::vector<CommandRecord>> ListCommands(const std::string& sandbox) = 0;

  virtual Status AppendAudit(const AuditEvent& e) = 0;
  virtual Result<std::vector<AuditEvent>> ListAudit(const AuditFilter& f) = 0;  // newest first

  // API keys are stored as SHA-256 hex of the key; the key itself never is. PutApiKey refuses
  // anything but 64 lower-case hex digits (invalid_argument), so a caller cannot store a key
  // in clear by mistake.
  virtual Status PutApiKey(const std::string& key_sha256, const std::string& team, const std::string& name) = 0;
  virtual Result<std::string> TeamForApiKey(const std::string& key_sha256) = 0;  // not_found

  // Teams and keys made through the API. PutTeam answers conflict for a name that exists.
  virtual Status PutTeam(const TeamRecord& r) = 0;
  virtual Result<std::vector<TeamRecord>> ListTeams() = 0;                          // by name
  virtual Result<TeamRecord> GetTeam(const std::string& name) = 0;                  // not_found
  virtual Status SetTeamQuotas(const std::string& name, const nlohmann::json& quotas) = 0;  // not_found
  virtual Status PutKey(const ApiKeyRecord& r) = 0;                                 // insert; conflict for an id in use
  virtual Result<ApiKeyRecord> GetKey(const std::string& id) = 0;                   // not_found
  virtual Result<std::vector<ApiKeyRecord>> ListKeys(const std::string& team) = 0;  // "" all; by creation
  // Sets revoked_at_ms once (a second revoke keeps the first time); not_found.
  virtual Status RevokeKey(const std::string& id, int64_t at_ms) = 0;

  // The store's clock (ms since the epoch). Fleet members stamp and compare heartbeats and
  // leases on it, never on their own clocks, so a node whose clock is off is not declared lost.
  virtual Result<int64_t> NowMs() = 0;
  // Fleet (fleet.md). A heartbeat inserts or refreshes a node; it keeps `draining` (set by an
  // operator) and turns `lost` back to `ready` (the node came back and reconciled).
  virtual Status HeartbeatNode(const NodeRecord& r) = 0;
  virtual Result<std::vector<NodeRecord>> ListNodes() = 0;
  virtual Status SetNodeState(const std::string& name, NodeState state) = 0;  // not_found
  // Marks every node whose last heartbeat is older than `cutoff_ms` lost and returns their
  // names. One atomic update: each lost node is returned to exactly one caller.
  virtual Result<std::vector<std::string>> ClaimLostNodes(int64_t cutoff_ms) = 0;
  // The sandboxes a lost node held: resuming ones go back to suspended (the snapshot store
  // still has them), every other one not suspended, destroyed or failed becomes failed with
  // `reason`. Returns how many changed.
  virtual Result<int64_t> FailSandboxesOfNode(const std::string& node, const std::string& reason) = 0;
  // Compare-and-set: moves sandbox `id` from `from_state` to `to_state` on `node`. False when
  // it was not in `from_state` (someone else got there first).
  virtual Result<bool> ClaimSandbox(const std::string& id, SandboxState from_state, SandboxState to_state,
                                    const std::string& node) = 0;
  virtual Status PutJob(const JobRecord& r) = 0;  // insert or replace
  // Extends a pending job's lease and replaces its payload, only while `holder` still holds
  // it. False: the job was taken over (the lease ran out) or finished; the caller must stop.
  virtual Result<bool> RenewJob(const std::string& id, const std::string& holder, int64_t lease_until_ms,
                                const nlohmann::json& payload) = 0;
  // Records a job's outcome, only while `holder` still holds it (false otherwise).
  virtual Result<bool> FinishJob(const std::string& id, const std::string& holder, JobState state,
                                 const std::string& error, int64_t finished_at_ms) = 0;
  virtual Result<std::vector<JobRecord>> ListJobs(const std::string& target) = 0;  // "" = all, oldest first
  // Leases the oldest pending job whose lease ran out to `holder` until `lease_until_ms`
  // (PostgreSQL: FOR UPDATE SKIP LOCKED, so replicas never wait on each other). nullopt: none.
  virtual Result<std::optional<JobRecord>> ClaimJob(const std::string& holder, int64_t now_ms,
                                                    int64_t lease_until_ms) = 0;

  // Object-store leases. Shared rows: insert or replace, delete (OK if absent).
  virtual Status PutBlobLease(const BlobLeaseRecord& r) = 0;
  virtual Status DeleteBlobLease(const std::string& id) = 0;
  virtual Result<std::vector<BlobLeaseRecord>> ListBlobLeases() = 0;  // the gate row too
  // Compare-and-set on the gate: `holder` takes it (or extends it) until `until_ms` when it is
  // free, already its own, or its lease ran out before `now_ms`. False: someone else holds it.
  virtual Result<bool> ClaimBlobGate(const std::string& holder, int64_t now_ms, int64_t until_ms) = 0;
  virtual Status ReleaseBlobGate(const std::string& holder) = 0;  // OK if not held by `holder`

  // Volumes. PutVolume inserts (conflict: the team has one by that name); UpdateVolume
  // rewrites node, manifest and size_mb by id (not_found).
  virtual Status PutVolume(const VolumeRecord& r) = 0;
  virtual Status UpdateVolume(const VolumeRecord& r) = 0;
  virtual Result<VolumeRecord> GetVolume(const std::string& team, const std::string& name) = 0;  // not_found
  virtual Result<VolumeRecord> GetVolumeById(const std::string& id) = 0;                         // not_found
  virtual Result<std::vector<VolumeRecord>> ListVolumes(const std::string& team) = 0;            // "" all; by name
  virtual Status DeleteVolume(const std::string& id) = 0;                                        // OK if absent
  // Conflict when `r` is read-write and the volume has a read-write mount already, or when the
  // sandbox mounts the volume already.
  virtual Status PutVolumeMount(const VolumeMountRecord& r) = 0;
  // By volume ("" any) and sandbox ("" any), oldest first.
  virtual Result<std::vector<VolumeMountRecord>> ListVolumeMounts(const std::string& volume,
                                                                  const std::string& sandbox) = 0;
  virtual Status DeleteVolumeMounts(const std::string& sandbox) = 0;  // OK if none
};

// True for 64 lower-case hex digits: the only form an API key is stored in.
inline bool IsSha256Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Opens (creating and migrating) the SQLite database at `path`.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);

}  // namespace space::store
