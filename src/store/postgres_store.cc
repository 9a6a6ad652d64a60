// PostgresStore: every Store call is one prepared statement on a pooled connection. The SQL
// mirrors sqlite_store.cc statement for statement (same upsert columns, same ordering, same
// not_found cases); where SQLite builds a WHERE clause from optional filters, each combination
// here is its own constant statement, so no SQL text ever depends on a value.
#include "store/postgres_store.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "store/json_columns.h"
#include "store/migrations.h"
#include "store/pg_connection.h"
#include "store/pg_migrate.h"
#include "store/pg_pool.h"
#include "store/postgres_migrations.h"

namespace space::store {
namespace {

using pg::Param;
using pg::PgRows;
using pg::Statement;

static_assert(std::size(kPostgresMigrations) == std::size(kMigrations),
              "a migration added to one backend must be added to the other under the same version");

// Column lists are macros so that statements stay single string literals (Statement holds
// const char*), built by the compiler rather than at run time.
#define SANDBOX_COLS                                                                                           \
  "id, team, state, template_name, template_digest, runtime, node, created_at_ms, expires_at_ms, timeout_s, " \
  "on_timeout, metadata_json, env_json, egress_json, resources_json, timings_json, uid_slot, error, "         \
  "head_snapshot, policy_json"
#define SNAPSHOT_COLS "id, team, sandbox, parent, label, kind, state, size_bytes, created_at_ms, error"
#define OPERATION_COLS "id, team, kind, target, state, error, created_at_ms, finished_at_ms"
#define COMMAND_COLS                                                                                      \
  "pid, sandbox, cmd_json, usr, cwd, started_at_ms, finished_at_ms, exit_code, sig, stdout_bytes, " \
  "stderr_bytes"
#define AUDIT_COLS "seq, ts_ms, team, sandbox, kind, action, detail_json"

constexpr Statement kPutSandbox{
    "put_sandbox",
    "INSERT INTO sandboxes (" SANDBOX_COLS
    ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20) "
    "ON CONFLICT (id) DO UPDATE SET state = excluded.state, template_digest = excluded.template_digest, "
    "node = excluded.node, expires_at_ms = excluded.expires_at_ms, timeout_s = excluded.timeout_s, "
    "metadata_json = excluded.metadata_json, egress_json = excluded.egress_json, "
    "resources_json = excluded.resources_json, timings_json = excluded.timings_json, "
    "uid_slot = excluded.uid_slot, error = excluded.error, head_snapshot = excluded.head_snapshot, "
    "policy_json = excluded.policy_json"};
constexpr Statement kGetSandbox{"get_sandbox", "SELECT " SANDBOX_COLS " FROM sandboxes WHERE id = $1"};
constexpr Statement kListSandboxesInState{
    "list_sandboxes_state",
    "SELECT " SANDBOX_COLS " FROM sandboxes WHERE team = $1 AND id > $2 AND state = $3 ORDER BY id LIMIT $4"};
constexpr Statement kListSandboxesNotDestroyed{"list_sandboxes_live",
                                               "SELECT " SANDBOX_COLS
                                               " FROM sandboxes WHERE team = $1 AND id > $2 AND state <> "
                                               "'destroyed' ORDER BY id LIMIT $3"};
constexpr Statement kListSandboxesAll{
    "list_sandboxes_all", "SELECT " SANDBOX_COLS " FROM sandboxes WHERE team = $1 AND id > $2 ORDER BY id LIMIT $3"};
constexpr Statement kListLiveSandboxes{
    "list_live_sandboxes",
    "SELECT " SANDBOX_COLS " FROM sandboxes WHERE state NOT IN ('destroyed', 'failed') ORDER BY id"};

constexpr Statement kPutSnapshot{
    "put_snapshot",
    "INSERT INTO snapshots (" SNAPSHOT_COLS
    ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT (id) DO UPDATE SET parent = excluded.parent, "
    "label = excluded.label, state = excluded.state, size_bytes = excluded.size_bytes, error = excluded.error"};
constexpr Statement kGetSnapshot{"get_snapshot", "SELECT " SNAPSHOT_COLS " FROM snapshots WHERE id = $1"};
constexpr Statement kListSnapshotsOf{
    "list_snapshots_of", "SELECT " SNAPSHOT_COLS " FROM snapshots WHERE sandbox = $1 ORDER BY created_at_ms, id"};
constexpr Statement kListSnapshotsAll{"list_snapshots_all",
                                      "SELECT " SNAPSHOT_COLS " FROM snapshots ORDER BY created_at_ms, id"};

constexpr Statement kPutCredential{
    "put_credential",
    "INSERT INTO credentials (team, name, spec_json, sealed_secret, created_at_ms) VALUES ($1,$2,$3,$4,$5) "
    "ON CONFLICT (team, name) DO UPDATE SET spec_json = excluded.spec_json, "
    "sealed_secret = excluded.sealed_secret, created_at_ms = excluded.created_at_ms"};
constexpr Statement kGetCredential{
    "get_credential",
    "SELECT team, name, spec_json, sealed_secret, created_at_ms FROM credentials WHERE team = $1 AND name = $2"};
constexpr Statement kListCredentials{
    "list_credentials",
    "SELECT team, name, spec_json, sealed_secret, created_at_ms FROM credentials WHERE team = $1 ORDER BY name"};
constexpr Statement kDeleteCredential{"delete_credential", "DELETE FROM credentials WHERE team = $1 AND name = $2"};

constexpr Statement kPutProfile{
    "put_egress_profile",
    "INSERT INTO egress_profiles (team, name, spec_json, created_at_ms) VALUES ($1,$2,$3,$4) "
    "ON CONFLICT (team, name) DO UPDATE SET spec_json = excluded.spec_json, created_at_ms = excluded.created_at_ms"};
constexpr Statement kGetProfile{
    "get_egress_profile",
    "SELECT team, name, spec_json, created_at_ms FROM egress_profiles WHERE team = $1 AND name = $2"};
constexpr Statement kListProfiles{
    "list_egress_profiles",
    "SELECT team, name, spec_json, created_at_ms FROM egress_profiles WHERE team = $1 ORDER BY name"};
constexpr Statement kDeleteProfile{"delete_egress_profile",
                                   "DELETE FROM egress_profiles WHERE team = $1 AND name = $2"};

constexpr Statement kPutSandboxCredential{
    "put_sandbox_credential",
    "INSERT INTO sandbox_credentials (sandbox, name, placeholder) VALUES ($1,$2,$3) "
    "ON CONFLICT (sandbox, name) DO UPDATE SET placeholder = excluded.placeholder"};
constexpr Statement kListSandboxCredentials{
    "list_sandbox_credentials",
    "SELECT sandbox, name, placeholder FROM sandbox_credentials WHERE sandbox = $1 ORDER BY name"};

constexpr Statement kPutPort{
    "put_port",
    "INSERT INTO ports (sandbox, port, team, is_public, auto_resume, token_sha256, created_at_ms) "
    "VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (sandbox, port) DO UPDATE SET is_public = excluded.is_public, "
    "auto_resume = excluded.auto_resume, token_sha256 = excluded.token_sha256, created_at_ms = excluded.created_at_ms"};
constexpr Statement kListPorts{
    "list_ports",
    "SELECT sandbox, port, team, is_public, auto_resume, token_sha256, created_at_ms FROM ports "
    "WHERE sandbox = $1 ORDER BY port"};
constexpr Statement kDeletePort{"delete_port", "DELETE FROM ports WHERE sandbox = $1 AND port = $2"};

constexpr Statement kPutOperation{
    "put_operation",
    "INSERT INTO operations (" OPERATION_COLS
    ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
    "error = excluded.error, finished_at_ms = excluded.finished_at_ms"};
constexpr Statement kGetOperation{"get_operation", "SELECT " OPERATION_COLS " FROM operations WHERE id = $1"};
// id breaks ties between operations created in the same millisecond (SQLite falls back to
// insertion order there; this is at least deterministic).
constexpr Statement kListUnfinishedOperations{
    "list_unfinished_operations",
    "SELECT " OPERATION_COLS " FROM operations WHERE state IN ('pending', 'running') ORDER BY created_at_ms, id"};

constexpr Statement kPutCommand{
    "put_command",
    "INSERT INTO commands (" COMMAND_COLS
    ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) ON CONFLICT (pid) DO UPDATE SET "
    "finished_at_ms = excluded.finished_at_ms, exit_code = excluded.exit_code, sig = excluded.sig, "
    "stdout_bytes = excluded.stdout_bytes, stderr_bytes = excluded.stderr_bytes"};
constexpr Statement kListCommands{
    "list_commands", "SELECT " COMMAND_COLS " FROM commands WHERE sandbox = $1 ORDER BY started_at_ms, pid"};

constexpr Statement kAppendAudit{
    "append_audit",
    "INSERT INTO audit (ts_ms, team, sandbox, kind, action, detail_json) VALUES ($1,$2,$3,$4,$5,$6)"};
// LIMIT NULL means no limit, which is what a negative limit means to SQLite.
constexpr Statement kListAudit{"list_audit",
                               "SELECT " AUDIT_COLS " FROM audit WHERE team = $1 ORDER BY seq DESC LIMIT $2"};
constexpr Statement kListAuditSandbox{
    "list_audit_sandbox",
    "SELECT " AUDIT_COLS " FROM audit WHERE team = $1 AND sandbox = $2 ORDER BY seq DESC LIMIT $3"};
constexpr Statement kListAuditKind{
    "list_audit_kind", "SELECT " AUDIT_COLS " FROM audit WHERE team = $1 AND kind = $2 ORDER BY seq DESC LIMIT $3"};
constexpr Statement kListAuditSandboxKind{
    "list_audit_sandbox_kind",
    "SELECT " AUDIT_COLS
    " FROM audit WHERE team = $1 AND sandbox = $2 AND kind = $3 ORDER BY seq DESC LIMIT $4"};

constexpr Statement kPutApiKey{"put_api_key",
                               "INSERT INTO api_keys (key_sha256, team, name) VALUES ($1,$2,$3) "
                               "ON CONFLICT (key_sha256) DO UPDATE SET team = excluded.team, name = excluded.name"};
constexpr Statement kTeamForApiKey{"team_for_api_key", "SELECT team FROM api_keys WHERE key_sha256 = $1"};

#define KEY_COLS "id, team, name, salt, secret_sha256, scopes_json, created_at_ms, expires_at_ms, revoked_at_ms"
constexpr Statement kPutTeam{
    "put_team", "INSERT INTO teams (name, created_at_ms, quotas_json) VALUES ($1,$2,$3) ON CONFLICT (name) DO NOTHING"};
constexpr Statement kListTeams{"list_teams", "SELECT name, created_at_ms, quotas_json FROM teams ORDER BY name"};
constexpr Statement kGetTeam{"get_team", "SELECT name, created_at_ms, quotas_json FROM teams WHERE name = $1"};
constexpr Statement kSetTeamQuotas{"set_team_quotas", "UPDATE teams SET quotas_json = $1 WHERE name = $2"};
constexpr Statement kPutKey{"put_key", "INSERT INTO scoped_keys (" KEY_COLS
                                       ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT (id) DO NOTHING"};
constexpr Statement kGetKey{"get_key", "SELECT " KEY_COLS " FROM scoped_keys WHERE id = $1"};
constexpr Statement kListKeys{"list_keys", "SELECT " KEY_COLS " FROM scoped_keys ORDER BY created_at_ms, id"};
constexpr Statement kListTeamKeys{"list_team_keys",
                                  "SELECT " KEY_COLS " FROM scoped_keys WHERE team = $1 ORDER BY created_at_ms, id"};
constexpr Statement kRevokeKey{
    "revoke_key",
    "UPDATE scoped_keys SET revoked_at_ms = CASE WHEN revoked_at_ms = 0 THEN $1 ELSE revoked_at_ms END WHERE id = $2"};

#define NODE_COLS "name, url, state, capacity, live, templates_json, heartbeat_at_ms, started_at_ms"
#define JOB_COLS \
  "id, kind, target, team, payload_json, state, holder, lease_until_ms, attempts, error, created_at_ms, finished_at_ms"

constexpr Statement kHeartbeatNode{
    "heartbeat_node",
    "INSERT INTO nodes (" NODE_COLS ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT (name) DO UPDATE SET "
    "url = excluded.url, state = CASE WHEN nodes.state = 'draining' THEN 'draining' ELSE excluded.state END, "
    "capacity = excluded.capacity, live = excluded.live, templates_json = excluded.templates_json, "
    "heartbeat_at_ms = excluded.heartbeat_at_ms, started_at_ms = excluded.started_at_ms"};
constexpr Statement kListNodes{"list_nodes", "SELECT " NODE_COLS " FROM nodes ORDER BY name"};
constexpr Statement kSetNodeState{"set_node_state", "UPDATE nodes SET state = $1 WHERE name = $2 RETURNING name"};
constexpr Statement kClaimLostNodes{
    "claim_lost_nodes",
    "UPDATE nodes SET state = 'lost' WHERE state <> 'lost' AND heartbeat_at_ms < $1 RETURNING name"};
constexpr Statement kReturnResumingOfNode{
    "return_resuming_of_node",
    "UPDATE sandboxes SET state = 'suspended', uid_slot = -1 WHERE node = $1 AND state = 'resuming' RETURNING id"};
constexpr Statement kFailSandboxesOfNode{
    "fail_sandboxes_of_node",
    "UPDATE sandboxes SET state = 'failed', error = $1, uid_slot = -1 WHERE node = $2 "
    "AND state NOT IN ('suspended', 'destroyed', 'failed') RETURNING id"};
constexpr Statement kClaimSandbox{
    "claim_sandbox", "UPDATE sandboxes SET state = $1, node = $2 WHERE id = $3 AND state = $4 RETURNING id"};
constexpr Statement kPutJob{
    "put_job",
    "INSERT INTO jobs (" JOB_COLS ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) ON CONFLICT (id) DO UPDATE SET "
    "payload_json = excluded.payload_json, state = excluded.state, holder = excluded.holder, "
    "lease_until_ms = excluded.lease_until_ms, attempts = excluded.attempts, error = excluded.error, "
    "finished_at_ms = excluded.finished_at_ms"};
constexpr Statement kListJobs{"list_jobs",
                              "SELECT " JOB_COLS " FROM jobs WHERE ($1 = '' OR target = $1) ORDER BY created_at_ms, id"};
// SKIP LOCKED: a replica never waits behind another's claim; it takes the next job instead.
constexpr Statement kClaimJob{
    "claim_job",
    "UPDATE jobs SET holder = $1, lease_until_ms = $2, attempts = attempts + 1 WHERE id = (SELECT id FROM jobs "
    "WHERE state = 'pending' AND lease_until_ms < $3 ORDER BY created_at_ms, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
    "RETURNING " JOB_COLS};

#define VOLUME_COLS "id, team, name, size_mb, created_at_ms, node, manifest, parent"
#define MOUNT_COLS "volume, sandbox, path, read_only, created_at_ms"
constexpr Statement kPutVolume{
    "put_volume", "INSERT INTO volumes (" VOLUME_COLS ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT DO NOTHING"};
constexpr Statement kUpdateVolume{"update_volume",
                                  "UPDATE volumes SET node = $1, manifest = $2, size_mb = $3 WHERE id = $4"};
constexpr Statement kGetVolume{"get_volume", "SELECT " VOLUME_COLS " FROM volumes WHERE team = $1 AND name = $2"};
constexpr Statement kGetVolumeById{"get_volume_by_id", "SELECT " VOLUME_COLS " FROM volumes WHERE id = $1"};
constexpr Statement kListVolumes{"list_volumes",
                                 "SELECT " VOLUME_COLS " FROM volumes WHERE ($1 = '' OR team = $1) ORDER BY name, id"};
constexpr Statement kDeleteVolume{"delete_volume", "DELETE FROM volumes WHERE id = $1"};
// DO NOTHING covers the primary key and the partial unique index on the one writer alike: of two
// writers at once, one inserts and the other sees no row changed.
constexpr Statement kPutVolumeMount{
    "put_volume_mount", "INSERT INTO volume_mounts (" MOUNT_COLS ") VALUES ($1,$2,$3,$4,$5) ON CONFLICT DO NOTHING"};
constexpr Statement kListVolumeMounts{"list_volume_mounts",
                                      "SELECT " MOUNT_COLS
                                      " FROM volume_mounts WHERE ($1 = '' OR volume = $1) AND "
                                      "($2 = '' OR sandbox = $2) ORDER BY created_at_ms, volume, sandbox"};
constexpr Statement kDeleteVolumeMounts{"delete_volume_mounts", "DELETE FROM volume_mounts WHERE sandbox = $1"};
#undef VOLUME_COLS
#undef MOUNT_COLS

constexpr Statement kPutBlobLease{
    "put_blob_lease",
    "INSERT INTO blob_leases (id, holder, until_ms) VALUES ($1, $2, $3) "
    "ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms"};
constexpr Statement kDeleteBlobLease{"delete_blob_lease", "DELETE FROM blob_leases WHERE id = $1 AND id <> 'gate'"};
constexpr Statement kListBlobLeases{"list_blob_leases", "SELECT id, holder, until_ms FROM blob_leases ORDER BY id"};
// One row, one UPDATE: PostgreSQL locks the row and re-checks the condition on the newest
// version, so of two claims at once exactly one sees the gate free.
constexpr Statement kClaimBlobGate{"claim_blob_gate",
                                   "UPDATE blob_leases SET holder = $1, until_ms = $3 WHERE id = 'gate' AND "
                                   "(holder = '' OR holder = $1 OR until_ms < $2) RETURNING id"};
constexpr Statement kReleaseBlobGate{
    "release_blob_gate", "UPDATE blob_leases SET holder = '', until_ms = 0 WHERE id = 'gate' AND holder = $1"};
constexpr Statement kNowMs{"now_ms", "SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint"};
constexpr Statement kRenewJob{"renew_job",
                              "UPDATE jobs SET lease_until_ms = $1, payload_json = $2 WHERE id = $3 AND holder = $4 "
                              "AND state = 'pending' RETURNING id"};
constexpr Statement kFinishJob{"finish_job",
                               "UPDATE jobs SET state = $1, error = $2, finished_at_ms = $3 WHERE id = $4 AND holder = $5 "
                               "AND state = 'pending' RETURNING id"};

#undef NODE_COLS
#undef JOB_COLS
#undef SANDBOX_COLS
#undef SNAPSHOT_COLS
#undef OPERATION_COLS
#undef COMMAND_COLS
#undef AUDIT_COLS

SandboxRecord ReadSandbox(const PgRows& s, int i) {
  SandboxRecord r;
  r.id = s.Text(i, 0);
  r.team = s.Text(i, 1);
  r.state = s.Text(i, 2);
  r.template_name = s.Text(i, 3);
  r.template_digest = s.Text(i, 4);
  r.runtime = s.Text(i, 5);
  r.node = s.Text(i, 6);
  r.created_at_ms = s.Int(i, 7);
  r.expires_at_ms = s.Int(i, 8);
  r.timeout_s = s.Int(i, 9);
  r.on_timeout = s.Text(i, 10);
  r.metadata_json = s.Text(i, 11);
  r.env_json = s.Text(i, 12);
  r.egress_json = s.Text(i, 13);
  r.resources_json = s.Text(i, 14);
  r.timings_json = s.Text(i, 15);
  r.uid_slot = s.Int(i, 16);
  r.error = s.Text(i, 17);
  r.head_snapshot = s.Text(i, 18);
  r.policy_json = s.Text(i, 19);
  return r;
}

SnapshotRecord ReadSnapshot(const PgRows& s, int i) {
  return {s.Text(i, 0), s.Text(i, 1), s.Text(i, 2), s.Text(i, 3), s.Text(i, 4),
          s.Text(i, 5), ParseSnapshotState(s.Text(i, 6)), s.Int(i, 7), s.Int(i, 8), s.Text(i, 9)};
}

OperationRecord ReadOperation(const PgRows& s, int i) {
  return {s.Text(i, 0), s.Text(i, 1), s.Text(i, 2), s.Text(i, 3),
          ParseOperationState(s.Text(i, 4)), s.Text(i, 5), s.Int(i, 6), s.Int(i, 7)};
}

CommandRecord ReadCommand(const PgRows& s, int i) {
  CommandRecord r;
  r.pid = s.Text(i, 0);
  r.sandbox = s.Text(i, 1);
  r.cmd = ParseStringList(s.Text(i, 2));
  r.user = s.Text(i, 3);
  r.cwd = s.Text(i, 4);
  r.started_at_ms = s.Int(i, 5);
  r.finished_at_ms = s.Int(i, 6);
  if (!s.IsNull(i, 7)) r.exit_code = static_cast<int>(s.Int(i, 7));
  r.signal = s.Text(i, 8);
  r.stdout_bytes = s.Int(i, 9);
  r.stderr_bytes = s.Int(i, 10);
  return r;
}

AuditEvent ReadAudit(const PgRows& s, int i) {
  return {s.Int(i, 0), s.Int(i, 1), s.Text(i, 2), s.Text(i, 3), s.Text(i, 4), s.Text(i, 5), ParseObject(s.Text(i, 6))};
}

template <typename T, typename Read>
std::vector<T> ReadAll(const PgRows& rows, Read read) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) out.push_back(read(rows, i));
  return out;
}

std::vector<Sandbox> ReadSandboxes(const PgRows& rows) {
  return ReadAll<Sandbox>(rows, [](const PgRows& s, int i) { return Sandbox::FromRecord(ReadSandbox(s, i)); });
}

// Statements that write the same row whatever happened before may run twice; appending an
// audit event may not (a retry after a lost reply would record it twice).
enum class Retry { kSafe, kNever };

ApiKeyRecord KeyFromRow(const PgRows& s, int i) {
  return {s.Text(i, 0), s.Text(i, 1), s.Text(i, 2), s.Text(i, 3), s.Text(i, 4), ParseStringList(s.Text(i, 5)),
          s.Int(i, 6),  s.Int(i, 7),  s.Int(i, 8)};
}

class PostgresStore : public Store {
 public:
  PostgresStore(const std::string& url, const PostgresOptions& options)
      : pool_(url, std::max<size_t>(1, options.max_connections), options.acquire_timeout) {}

  Status Init() {
    ASSIGN_OR_RETURN(auto conn, pool_.Acquire("open"));
    return pg::MigratePostgres(*conn);
  }

  Status PutSandbox(const Sandbox& sandbox) override {
    const SandboxRecord r = sandbox.ToRecord();
    return Exec("PutSandbox", kPutSandbox,
                {r.id, r.team, r.state, r.template_name, r.template_digest, r.runtime, r.node, r.created_at_ms,
                 r.expires_at_ms, r.timeout_s, r.on_timeout, r.metadata_json, r.env_json, r.egress_json,
                 r.resources_json, r.timings_json, r.uid_slot, r.error, r.head_snapshot, r.policy_json});
  }

  Result<Sandbox> GetSandbox(const std::string& id) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("GetSandbox", kGetSandbox, {id}));
    if (rows.size() == 0) return NotFound("sandbox " + id + " not found");
    return Sandbox::FromRecord(ReadSandbox(rows, 0));
  }

  // f.metadata is matched by the caller, as with SQLite, to keep JSON operators out of the SQL.
  Result<std::vector<Sandbox>> ListSandboxes(const SandboxFilter& f) override {
    int64_t limit = std::max(0, f.limit);
    Result<PgRows> rows = f.state ? Query("ListSandboxes", kListSandboxesInState, {f.team, f.after_id, std::string(StateName(*f.state)), limit})
                          : f.include_destroyed ? Query("ListSandboxes", kListSandboxesAll, {f.team, f.after_id, limit})
                                                : Query("ListSandboxes", kListSandboxesNotDestroyed,
                                                        {f.team, f.after_id, limit});
    if (!rows.ok()) return rows.status();
    return ReadSandboxes(*rows);
  }

  Result<std::vector<Sandbox>> ListLiveSandboxes() override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListLiveSandboxes", kListLiveSandboxes, {}));
    return ReadSandboxes(rows);
  }

  Status PutSnapshot(const SnapshotRecord& r) override {
    return Exec("PutSnapshot", kPutSnapshot,
                {r.id, r.team, r.sandbox, r.parent, r.label, r.kind, std::string(SnapshotStateName(r.state)), r.size_bytes, r.created_at_ms, r.error});
  }

  Result<SnapshotRecord> GetSnapshot(const std::string& id) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("GetSnapshot", kGetSnapshot, {id}));
    if (rows.size() == 0) return NotFound("snapshot " + id + " not found");
    return ReadSnapshot(rows, 0);
  }

  Result<std::vector<SnapshotRecord>> ListSnapshots(const std::string& sandbox) override {
    Result<PgRows> rows = sandbox.empty() ? Query("ListSnapshots", kListSnapshotsAll, {})
                                          : Query("ListSnapshots", kListSnapshotsOf, {sandbox});
    if (!rows.ok()) return rows.status();
    return ReadAll<SnapshotRecord>(*rows, ReadSnapshot);
  }

  Status PutCredential(const CredentialRecord& r) override {
    return Exec("PutCredential", kPutCredential, {r.team, r.name, r.spec_json, r.sealed_secret, r.created_at_ms});
  }

  Result<CredentialRecord> GetCredential(const std::string& team, const std::string& name) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("GetCredential", kGetCredential, {team, name}));
    if (rows.size() == 0) return NotFound("credential " + name + " not found");
    return ReadCredential(rows, 0);
  }

  Result<std::vector<CredentialRecord>> ListCredentials(const std::string& team) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListCredentials", kListCredentials, {team}));
    return ReadAll<CredentialRecord>(rows, ReadCredential);
  }

  // One DELETE decides both the effect and not_found, so a concurrent delete cannot make both
  // callers succeed.
  Status DeleteCredential(const std::string& team, const std::string& name) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("DeleteCredential", kDeleteCredential, {team, name}));
    if (rows.affected() == 0) return NotFound("credential " + name + " not found");
    return Status::Ok();
  }

  Status PutEgressProfile(const EgressProfileRecord& r) override {
    return Exec("PutEgressProfile", kPutProfile, {r.team, r.name, r.spec_json, r.created_at_ms});
  }

  Result<EgressProfileRecord> GetEgressProfile(const std::string& team, const std::string& name) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("GetEgressProfile", kGetProfile, {team, name}));
    if (rows.size() == 0) return NotFound("egress profile " + name + " not found");
    return ReadProfile(rows, 0);
  }

  Result<std::vector<EgressProfileRecord>> ListEgressProfiles(const std::string& team) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListEgressProfiles", kListProfiles, {team}));
    return ReadAll<EgressProfileRecord>(rows, ReadProfile);
  }

  Status DeleteEgressProfile(const std::string& team, const std::string& name) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("DeleteEgressProfile", kDeleteProfile, {team, name}));
    if (rows.affected() == 0) return NotFound("egress profile " + name + " not found");
    return Status::Ok();
  }

  Status PutSandboxCredential(const SandboxCredentialRecord& r) override {
    return Exec("PutSandboxCredential", kPutSandboxCredential, {r.sandbox, r.name, r.placeholder});
  }

  Result<std::vector<SandboxCredentialRecord>> ListSandboxCredentials(const std::string& sandbox) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListSandboxCredentials", kListSandboxCredentials, {sandbox}));
    return ReadAll<SandboxCredentialRecord>(rows, [](const PgRows& s, int i) {
      return SandboxCredentialRecord{s.Text(i, 0), s.Text(i, 1), s.Text(i, 2)};
    });
  }

  Status PutPort(const PortRecord& r) override {
    return Exec(
        "PutPort", kPutPort,
        {r.sandbox, r.port, r.team, int64_t{r.is_public}, int64_t{r.auto_resume}, r.token_sha256, r.created_at_ms});
  }

  Result<std::vector<PortRecord>> ListPorts(const std::string& sandbox) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListPorts", kListPorts, {sandbox}));
    return ReadAll<PortRecord>(rows, [](const PgRows& s, int i) {
      return PortRecord{s.Text(i, 0),     s.Int(i, 1),  s.Text(i, 2), s.Int(i, 3) != 0,
                        s.Int(i, 4) != 0, s.Text(i, 5), s.Int(i, 6)};
    });
  }

  Status DeletePort(const std::string& sandbox, int64_t port) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("DeletePort", kDeletePort, {sandbox, port}));
    if (rows.affected() == 0) return NotFound("port " + std::to_string(port) + " is not open");
    return Status::Ok();
  }

  Status PutOperation(const OperationRecord& r) override {
    return Exec("PutOperation", kPutOperation,
                {r.id, r.team, r.kind, r.target, std::string(OperationStateName(r.state)), r.error, r.created_at_ms, r.finished_at_ms});
  }

  Result<OperationRecord> GetOperation(const std::string& id) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("GetOperation", kGetOperation, {id}));
    if (rows.size() == 0) return NotFound("operation " + id + " not found");
    return ReadOperation(rows, 0);
  }

  Result<std::vector<OperationRecord>> ListUnfinishedOperations() override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListUnfinishedOperations", kListUnfinishedOperations, {}));
    return ReadAll<OperationRecord>(rows, ReadOperation);
  }

  Status PutCommand(const CommandRecord& r) override {
    Param exit = r.exit_code ? Param(static_cast<int64_t>(*r.exit_code)) : Param(nullptr);
    return Exec("PutCommand", kPutCommand,
                {r.pid, r.sandbox, EncodeStringList(r.cmd), r.user, r.cwd, r.started_at_ms, r.finished_at_ms, exit, r.signal,
                 r.stdout_bytes, r.stderr_bytes});
  }

  Result<std::vector<CommandRecord>> ListCommands(const std::string& sandbox) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListCommands", kListCommands, {sandbox}));
    return ReadAll<CommandRecord>(rows, ReadCommand);
  }

  Status AppendAudit(const AuditEvent& e) override {
    return Query("AppendAudit", kAppendAudit, {e.ts_ms, e.team, e.sandbox, e.kind, e.action, e.detail.dump()},
                 Retry::kNever)
        .status();
  }

  Result<std::vector<AuditEvent>> ListAudit(const AuditFilter& f) override {
    Param limit = f.limit < 0 ? Param(nullptr) : Param(static_cast<int64_t>(f.limit));
    Result<PgRows> rows =
        f.sandbox.empty() && f.kind.empty() ? Query("ListAudit", kListAudit, {f.team, limit})
        : f.kind.empty()                    ? Query("ListAudit", kListAuditSandbox, {f.team, f.sandbox, limit})
        : f.sandbox.empty()                 ? Query("ListAudit", kListAuditKind, {f.team, f.kind, limit})
                            : Query("ListAudit", kListAuditSandboxKind, {f.team, f.sandbox, f.kind, limit});
    if (!rows.ok()) return rows.status();
    return ReadAll<AuditEvent>(*rows, ReadAudit);
  }

  Status PutApiKey(const std::string& key_sha256, const std::string& team, const std::string& name) override {
    if (!IsSha256Hex(key_sha256)) return InvalidArgument("API keys are stored only as SHA-256 hex digests");
    return Exec("PutApiKey", kPutApiKey, {key_sha256, team, name});
  }

  Result<std::string> TeamForApiKey(const std::string& key_sha256) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("TeamForApiKey", kTeamForApiKey, {key_sha256}));
    if (rows.size() == 0) return NotFound("unknown API key");
    return rows.Text(0, 0);
  }

  Status PutTeam(const TeamRecord& r) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("PutTeam", kPutTeam, {r.name, r.created_at_ms, r.quotas.dump()}));
    if (rows.affected() == 0) return Conflict("team " + r.name + " exists");
    return Status::Ok();
  }

  Result<std::vector<TeamRecord>> ListTeams() override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListTeams", kListTeams, {}));
    return ReadAll<TeamRecord>(rows, [](const PgRows& s, int i) {
      return TeamRecord{s.Text(i, 0), s.Int(i, 1), ParseObject(s.Text(i, 2))};
    });
  }

  Result<TeamRecord> GetTeam(const std::string& name) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("GetTeam", kGetTeam, {name}));
    if (rows.size() == 0) return NotFound("team " + name.substr(0, 64) + " not found");
    return TeamRecord{rows.Text(0, 0), rows.Int(0, 1), ParseObject(rows.Text(0, 2))};
  }

  Status SetTeamQuotas(const std::string& name, const nlohmann::json& quotas) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("SetTeamQuotas", kSetTeamQuotas, {quotas.dump(), name}));
    if (rows.affected() == 0) return NotFound("team " + name.substr(0, 64) + " not found");
    return Status::Ok();
  }

  Status PutKey(const ApiKeyRecord& r) override {
    if (!IsSha256Hex(r.secret_sha256)) return InvalidArgument("keys are stored only as SHA-256 hex digests");
    ASSIGN_OR_RETURN(PgRows rows, Query("PutKey", kPutKey,
                                        {r.id, r.team, r.name, r.salt, r.secret_sha256, EncodeStringList(r.scopes),
                                         r.created_at_ms, r.expires_at_ms, r.revoked_at_ms}));
    if (rows.affected() == 0) return Conflict("key " + r.id + " exists");
    return Status::Ok();
  }

  Result<ApiKeyRecord> GetKey(const std::string& id) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("GetKey", kGetKey, {id}));
    if (rows.size() == 0) return NotFound("key " + id.substr(0, 80) + " not found");
    return KeyFromRow(rows, 0);
  }

  Result<std::vector<ApiKeyRecord>> ListKeys(const std::string& team) override {
    ASSIGN_OR_RETURN(PgRows rows,
                     team.empty() ? Query("ListKeys", kListKeys, {}) : Query("ListTeamKeys", kListTeamKeys, {team}));
    return ReadAll<ApiKeyRecord>(rows, KeyFromRow);
  }

  Status RevokeKey(const std::string& id, int64_t at_ms) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("RevokeKey", kRevokeKey, {at_ms, id}));
    if (rows.affected() == 0) return NotFound("key " + id.substr(0, 80) + " not found");
    return Status::Ok();
  }

  Status HeartbeatNode(const NodeRecord& r) override {
    return Exec("HeartbeatNode", kHeartbeatNode,
                {r.name, r.url, std::string(NodeStateName(r.state)), r.capacity, r.live, EncodeStringList(r.templates), r.heartbeat_at_ms,
                 r.started_at_ms});
  }

  Result<std::vector<NodeRecord>> ListNodes() override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListNodes", kListNodes, {}));
    std::vector<NodeRecord> out;
    for (int i = 0; i < rows.size(); ++i) {
      out.push_back({rows.Text(i, 0), rows.Text(i, 1), ParseNodeState(rows.Text(i, 2)), rows.Int(i, 3), rows.Int(i, 4),
                     ParseStringList(rows.Text(i, 5)), rows.Int(i, 6), rows.Int(i, 7)});
    }
    return out;
  }

  Status SetNodeState(const std::string& name, NodeState state) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("SetNodeState", kSetNodeState, {std::string(NodeStateName(state)), name}));
    if (rows.size() == 0) return NotFound("node " + name + " not found");
    return Status::Ok();
  }

  Result<std::vector<std::string>> ClaimLostNodes(int64_t cutoff_ms) override {
    // Not retried: had the first attempt committed, a retry would return nothing and the
    // claimed nodes' sandboxes would never be failed.
    ASSIGN_OR_RETURN(PgRows rows, Query("ClaimLostNodes", kClaimLostNodes, {cutoff_ms}, Retry::kNever));
    std::vector<std::string> out;
    for (int i = 0; i < rows.size(); ++i) out.push_back(rows.Text(i, 0));
    return out;
  }

  Result<int64_t> FailSandboxesOfNode(const std::string& node, const std::string& reason) override {
    ASSIGN_OR_RETURN(PgRows back, Query("FailSandboxesOfNode", kReturnResumingOfNode, {node}));
    ASSIGN_OR_RETURN(PgRows failed, Query("FailSandboxesOfNode", kFailSandboxesOfNode, {reason, node}));
    return static_cast<int64_t>(back.size() + failed.size());
  }

  Result<bool> ClaimSandbox(const std::string& id, SandboxState from_state, SandboxState to_state,
                            const std::string& node) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ClaimSandbox", kClaimSandbox, {std::string(StateName(to_state)), node, id, std::string(StateName(from_state))}, Retry::kNever));
    return rows.size() > 0;
  }

  Status PutJob(const JobRecord& r) override {
    return Exec("PutJob", kPutJob,
                {r.id, r.kind, r.target, r.team, r.payload.dump(), std::string(JobStateName(r.state)), r.holder, r.lease_until_ms, r.attempts,
                 r.error, r.created_at_ms, r.finished_at_ms});
  }

  Result<int64_t> NowMs() override {
    ASSIGN_OR_RETURN(PgRows rows, Query("NowMs", kNowMs, {}));
    if (rows.size() != 1) return Internal("store clock: no row");
    return rows.Int(0, 0);
  }

  Result<bool> RenewJob(const std::string& id, const std::string& holder, int64_t lease_until_ms,
                        const nlohmann::json& payload) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("RenewJob", kRenewJob, {lease_until_ms, payload.dump(), id, holder}));
    return rows.size() > 0;
  }

  Result<bool> FinishJob(const std::string& id, const std::string& holder, JobState state,
                         const std::string& error, int64_t finished_at_ms) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("FinishJob", kFinishJob, {std::string(JobStateName(state)), error, finished_at_ms, id, holder}));
    return rows.size() > 0;
  }

  Result<std::vector<JobRecord>> ListJobs(const std::string& target) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListJobs", kListJobs, {target}));
    std::vector<JobRecord> out;
    for (int i = 0; i < rows.size(); ++i) out.push_back(ReadJob(rows, i));
    return out;
  }

  Result<std::optional<JobRecord>> ClaimJob(const std::string& holder, int64_t now_ms,
                                            int64_t lease_until_ms) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ClaimJob", kClaimJob, {holder, lease_until_ms, now_ms}, Retry::kNever));
    if (rows.size() == 0) return std::optional<JobRecord>();
    return std::optional<JobRecord>(ReadJob(rows, 0));
  }

  Status PutBlobLease(const BlobLeaseRecord& r) override {
    if (r.id == kBlobGateId) return InvalidArgument("blob lease id 'gate' is the gate's");
    return Exec("PutBlobLease", kPutBlobLease, {r.id, r.holder, r.until_ms});
  }
  Status DeleteBlobLease(const std::string& id) override { return Exec("DeleteBlobLease", kDeleteBlobLease, {id}); }
  Result<std::vector<BlobLeaseRecord>> ListBlobLeases() override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListBlobLeases", kListBlobLeases, {}));
    std::vector<BlobLeaseRecord> out;
    out.reserve(static_cast<size_t>(rows.size()));
    for (int i = 0; i < rows.size(); ++i) out.push_back({rows.Text(i, 0), rows.Text(i, 1), rows.Int(i, 2)});
    return out;
  }
  Result<bool> ClaimBlobGate(const std::string& holder, int64_t now_ms, int64_t until_ms) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ClaimBlobGate", kClaimBlobGate, {holder, now_ms, until_ms}, Retry::kNever));
    return rows.size() > 0;
  }
  Status ReleaseBlobGate(const std::string& holder) override {
    return Exec("ReleaseBlobGate", kReleaseBlobGate, {holder});
  }

  Status PutVolume(const VolumeRecord& r) override {
    ASSIGN_OR_RETURN(
        PgRows rows,
        Query("PutVolume", kPutVolume, {r.id, r.team, r.name, r.size_mb, r.created_at_ms, r.node, r.manifest, r.parent},
              Retry::kNever));
    if (rows.affected() == 0) return Conflict("volume " + r.name + " exists");
    return Status::Ok();
  }
  Status UpdateVolume(const VolumeRecord& r) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("UpdateVolume", kUpdateVolume, {r.node, r.manifest, r.size_mb, r.id}));
    if (rows.affected() == 0) return NotFound("volume " + r.id + " not found");
    return Status::Ok();
  }
  Result<VolumeRecord> GetVolume(const std::string& team, const std::string& name) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("GetVolume", kGetVolume, {team, name}));
    if (rows.size() == 0) return NotFound("volume " + name + " not found");
    return ReadVolume(rows, 0);
  }
  Result<VolumeRecord> GetVolumeById(const std::string& id) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("GetVolumeById", kGetVolumeById, {id}));
    if (rows.size() == 0) return NotFound("volume " + id + " not found");
    return ReadVolume(rows, 0);
  }
  Result<std::vector<VolumeRecord>> ListVolumes(const std::string& team) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListVolumes", kListVolumes, {team}));
    return ReadAll<VolumeRecord>(rows, ReadVolume);
  }
  Status DeleteVolume(const std::string& id) override { return Exec("DeleteVolume", kDeleteVolume, {id}); }
  Status PutVolumeMount(const VolumeMountRecord& r) override {
    ASSIGN_OR_RETURN(PgRows rows,
                     Query("PutVolumeMount", kPutVolumeMount,
                           {r.volume, r.sandbox, r.path, int64_t{r.read_only}, r.created_at_ms}, Retry::kNever));
    if (rows.affected() == 0) {
      return Conflict("volume " + r.volume + " is mounted read-write by another sandbox, or already by this one");
    }
    return Status::Ok();
  }
  Result<std::vector<VolumeMountRecord>> ListVolumeMounts(const std::string& volume,
                                                          const std::string& sandbox) override {
    ASSIGN_OR_RETURN(PgRows rows, Query("ListVolumeMounts", kListVolumeMounts, {volume, sandbox}));
    return ReadAll<VolumeMountRecord>(rows, [](const PgRows& s, int i) {
      return VolumeMountRecord{s.Text(i, 0), s.Text(i, 1), s.Text(i, 2), s.Int(i, 3) != 0, s.Int(i, 4)};
    });
  }
  Status DeleteVolumeMounts(const std::string& sandbox) override {
    return Exec("DeleteVolumeMounts", kDeleteVolumeMounts, {sandbox});
  }

 private:
  static VolumeRecord ReadVolume(const PgRows& s, int i) {
    return {s.Text(i, 0), s.Text(i, 1), s.Text(i, 2), s.Int(i, 3),
            s.Int(i, 4),  s.Text(i, 5), s.Text(i, 6), s.Text(i, 7)};
  }
  static JobRecord ReadJob(const PgRows& s, int i) {
    return {s.Text(i, 0), s.Text(i, 1), s.Text(i, 2), s.Text(i, 3), ParseObject(s.Text(i, 4)), ParseJobState(s.Text(i, 5)),
            s.Text(i, 6), s.Int(i, 7),  s.Int(i, 8),  s.Text(i, 9), s.Int(i, 10), s.Int(i, 11)};
  }

  static CredentialRecord ReadCredential(const PgRows& s, int i) {
    return {s.Text(i, 0), s.Text(i, 1), s.Text(i, 2), s.Text(i, 3), s.Int(i, 4)};
  }
  static EgressProfileRecord ReadProfile(const PgRows& s, int i) {
    return {s.Text(i, 0), s.Text(i, 1), s.Text(i, 2), s.Int(i, 3)};
  }

  // Runs `stmt` on a pooled connection. A connection found broken (the server restarted, a
  // proxy dropped it) is retried once on a fresh one when the statement may run twice.
  Result<PgRows> Query(const char* op, const Statement& stmt, const std::vector<Param>& params,
                       Retry retry = Retry::kSafe) {
    for (int attempt = 0;; ++attempt) {
      ASSIGN_OR_RETURN(auto conn, pool_.Acquire(op));
      Result<PgRows> rows = conn->Run(stmt, params, op);
      if (rows.ok() || !conn->broken()) return rows;
      pool_.DropIdle();
      if (retry == Retry::kNever || attempt > 0) return rows;
    }
  }
  Status Exec(const char* op, const Statement& stmt, const std::vector<Param>& params) {
    return Query(op, stmt, params).status();
  }

  pg::PgPool pool_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url, const PostgresOptions& options) {
  auto store = std::make_unique<PostgresStore>(url, options);
  // A connect failure already names the (redacted) URL.
  RETURN_IF_ERROR(store->Init().Annotate("open store"));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace space::store
