// SQLite implementation of Store: one connection in WAL mode, serialized by a mutex.
// Writes are small and rare next to sandbox work, so one connection is not a bottleneck.
#include <sqlite3.h>

#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/syscall.h"
#include "store/migrations.h"
#include "store/json_columns.h"
#include "store/store.h"

namespace space::store {
namespace {

using Value = std::variant<std::nullptr_t, int64_t, std::string>;

// One prepared statement; finalized on destruction.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Status Bind(const std::vector<Value>& values) {
    if (rc_ != SQLITE_OK) return Error("prepare");
    for (size_t i = 0; i < values.size(); ++i) {
      int idx = static_cast<int>(i + 1);
      int rc = SQLITE_OK;
      if (std::holds_alternative<std::nullptr_t>(values[i])) {
        rc = sqlite3_bind_null(stmt_, idx);
      } else if (auto* n = std::get_if<int64_t>(&values[i])) {
        rc = sqlite3_bind_int64(stmt_, idx, *n);
      } else {
        const auto& s = std::get<std::string>(values[i]);
        rc = sqlite3_bind_text(stmt_, idx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) return Error("bind");
    }
    return Status::Ok();
  }
  // True when a row is available.
  Result<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return Error("step");
  }
  std::string Text(int col) {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  bool IsNull(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  Status Error(const char* what) { return Internal(std::string("sqlite ") + what + ": " + sqlite3_errmsg(db_)); }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

constexpr char kSandboxCols[] =
    "id, team, state, template_name, template_digest, runtime, node, created_at_ms, expires_at_ms, "
    "timeout_s, on_timeout, metadata_json, env_json, egress_json, resources_json, timings_json, uid_slot, error, "
    "head_snapshot, policy_json";

SandboxRecord ReadSandbox(Stmt& s) {
  SandboxRecord r;
  r.id = s.Text(0);
  r.team = s.Text(1);
  r.state = s.Text(2);
  r.template_name = s.Text(3);
  r.template_digest = s.Text(4);
  r.runtime = s.Text(5);
  r.node = s.Text(6);
  r.created_at_ms = s.Int(7);
  r.expires_at_ms = s.Int(8);
  r.timeout_s = s.Int(9);
  r.on_timeout = s.Text(10);
  r.metadata_json = s.Text(11);
  r.env_json = s.Text(12);
  r.egress_json = s.Text(13);
  r.resources_json = s.Text(14);
  r.timings_json = s.Text(15);
  r.uid_slot = s.Int(16);
  r.error = s.Text(17);
  r.head_snapshot = s.Text(18);
  r.policy_json = s.Text(19);
  return r;
}

constexpr char kSnapshotCols[] =
    "id, team, sandbox, parent, label, kind, state, size_bytes, created_at_ms, error";

SnapshotRecord ReadSnapshot(Stmt& s) {
  SnapshotRecord r;
  r.id = s.Text(0);
  r.team = s.Text(1);
  r.sandbox = s.Text(2);
  r.parent = s.Text(3);
  r.label = s.Text(4);
  r.kind = s.Text(5);
  r.state = ParseSnapshotState(s.Text(6));
  r.size_bytes = s.Int(7);
  r.created_at_ms = s.Int(8);
  r.error = s.Text(9);
  return r;
}

OperationRecord ReadOperation(Stmt& s) {
  OperationRecord r;
  r.id = s.Text(0);
  r.team = s.Text(1);
  r.kind = s.Text(2);
  r.target = s.Text(3);
  r.state = ParseOperationState(s.Text(4));
  r.error = s.Text(5);
  r.created_at_ms = s.Int(6);
  r.finished_at_ms = s.Int(7);
  return r;
}

#define KEY_COLS "id, team, name, salt, secret_sha256, scopes_json, created_at_ms, expires_at_ms, revoked_at_ms"

ApiKeyRecord KeyFromRow(Stmt& s) {
  return {s.Text(0), s.Text(1), s.Text(2), s.Text(3), s.Text(4), ParseStringList(s.Text(5)),
          s.Int(6),  s.Int(7),  s.Int(8)};
}

class SqliteStore : public Store {
 public:
  explicit SqliteStore(sqlite3* db) : db_(db) {}
  ~SqliteStore() override { sqlite3_close_v2(db_); }

  Status Init() {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(ExecLocked("PRAGMA journal_mode=WAL"));
    RETURN_IF_ERROR(ExecLocked("PRAGMA synchronous=NORMAL"));
    RETURN_IF_ERROR(ExecLocked("PRAGMA busy_timeout=5000"));
    RETURN_IF_ERROR(ExecLocked("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
    int64_t version = 0;
    {
      Stmt s(db_, "SELECT version FROM schema_version");
      RETURN_IF_ERROR(s.Bind({}));
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) {
        version = s.Int(0);
      } else {
        RETURN_IF_ERROR(RunLocked("INSERT INTO schema_version (version) VALUES (0)", {}));
      }
    }
    constexpr int64_t kCount = sizeof(kMigrations) / sizeof(kMigrations[0]);
    if (version > kCount) {
      return Internal("store schema version " + std::to_string(version) + " is newer than this binary knows");
    }
    for (int64_t v = version; v < kCount; ++v) {
      RETURN_IF_ERROR(ExecLocked("BEGIN"));
      Status st = ExecLocked(std::string(kMigrations[v]));
      if (st.ok()) st = RunLocked("UPDATE schema_version SET version = ?", {v + 1});
      if (!st.ok()) {
        (void)ExecLocked("ROLLBACK");
        return st.Annotate("migration " + std::to_string(v + 1));
      }
      RETURN_IF_ERROR(ExecLocked("COMMIT"));
    }
    return Status::Ok();
  }

  Status PutSandbox(const Sandbox& sandbox) override {
    const SandboxRecord r = sandbox.ToRecord();
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked(std::string("INSERT INTO sandboxes (") + kSandboxCols +
                         ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET "
                         "state = excluded.state, template_digest = excluded.template_digest, "
                         "node = excluded.node, expires_at_ms = excluded.expires_at_ms, "
                         "timeout_s = excluded.timeout_s, metadata_json = excluded.metadata_json, "
                         "egress_json = excluded.egress_json, resources_json = excluded.resources_json, "
                         "timings_json = excluded.timings_json, uid_slot = excluded.uid_slot, "
                         "error = excluded.error, head_snapshot = excluded.head_snapshot, "
                         "policy_json = excluded.policy_json",
                     {r.id, r.team, r.state, r.template_name, r.template_digest, r.runtime, r.node,
                      r.created_at_ms, r.expires_at_ms, r.timeout_s, r.on_timeout, r.metadata_json, r.env_json,
                      r.egress_json, r.resources_json, r.timings_json, r.uid_slot, r.error, r.head_snapshot, r.policy_json});
  }

  Result<Sandbox> GetSandbox(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, std::string("SELECT ") + kSandboxCols + " FROM sandboxes WHERE id = ?");
    RETURN_IF_ERROR(s.Bind({id}));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("sandbox " + id + " not found");
    return Sandbox::FromRecord(ReadSandbox(s));
  }

  Result<std::vector<Sandbox>> ListSandboxes(const SandboxFilter& f) override {
    std::string sql = std::string("SELECT ") + kSandboxCols + " FROM sandboxes WHERE team = ? AND id > ?";
    std::vector<Value> args = {f.team, f.after_id};
    if (f.state) {
      sql += " AND state = ?";
      args.emplace_back(std::string(StateName(*f.state)));
    } else if (!f.include_destroyed) {
      sql += " AND state <> 'destroyed'";
    }
    sql += " ORDER BY id";
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, sql);
    RETURN_IF_ERROR(s.Bind(args));
    std::vector<Sandbox> out;
    // Metadata filters are applied on the JSON text by the caller-visible contract "all must
    // match"; done here in C++ to keep the SQL portable (no JSON operators).
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row || static_cast<int>(out.size()) >= f.limit) break;
      out.push_back(Sandbox::FromRecord(ReadSandbox(s)));
    }
    return out;
  }

  Result<std::vector<Sandbox>> ListLiveSandboxes() override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, std::string("SELECT ") + kSandboxCols +
                    " FROM sandboxes WHERE state NOT IN ('destroyed', 'failed') ORDER BY id");
    RETURN_IF_ERROR(s.Bind({}));
    std::vector<Sandbox> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(Sandbox::FromRecord(ReadSandbox(s)));
    }
    return out;
  }

  Status PutSnapshot(const SnapshotRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked(std::string("INSERT INTO snapshots (") + kSnapshotCols +
                         ") VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET parent = excluded.parent, "
                         "label = excluded.label, state = excluded.state, size_bytes = excluded.size_bytes, "
                         "error = excluded.error",
                     {r.id, r.team, r.sandbox, r.parent, r.label, r.kind, std::string(SnapshotStateName(r.state)), r.size_bytes, r.created_at_ms,
                      r.error});
  }

  Result<SnapshotRecord> GetSnapshot(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, std::string("SELECT ") + kSnapshotCols + " FROM snapshots WHERE id = ?");
    RETURN_IF_ERROR(s.Bind({id}));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("snapshot " + id + " not found");
    return ReadSnapshot(s);
  }

  Result<std::vector<SnapshotRecord>> ListSnapshots(const std::string& sandbox) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string sql = std::string("SELECT ") + kSnapshotCols + " FROM snapshots";
    std::vector<Value> args;
    if (!sandbox.empty()) {
      sql += " WHERE sandbox = ?";
      args.emplace_back(sandbox);
    }
    sql += " ORDER BY created_at_ms, id";
    Stmt s(db_, sql);
    RETURN_IF_ERROR(s.Bind(args));
    std::vector<SnapshotRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(ReadSnapshot(s));
    }
    return out;
  }

  Status PutCredential(const CredentialRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("INSERT INTO credentials (team, name, spec_json, sealed_secret, created_at_ms) VALUES (?,?,?,?,?) "
                     "ON CONFLICT (team, name) DO UPDATE SET spec_json = excluded.spec_json, "
                     "sealed_secret = excluded.sealed_secret, created_at_ms = excluded.created_at_ms",
                     {r.team, r.name, r.spec_json, r.sealed_secret, r.created_at_ms});
  }

  Result<CredentialRecord> GetCredential(const std::string& team, const std::string& name) override {
    ASSIGN_OR_RETURN(auto all, QueryCredentials("WHERE team = ? AND name = ?", {team, name}));
    if (all.empty()) return NotFound("credential " + name + " not found");
    return all[0];
  }

  Result<std::vector<CredentialRecord>> ListCredentials(const std::string& team) override {
    return QueryCredentials("WHERE team = ? ORDER BY name", {team});
  }

  Status DeleteCredential(const std::string& team, const std::string& name) override {
    RETURN_IF_ERROR(GetCredential(team, name).status());
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("DELETE FROM credentials WHERE team = ? AND name = ?", {team, name});
  }

  Status PutEgressProfile(const EgressProfileRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("INSERT INTO egress_profiles (team, name, spec_json, created_at_ms) VALUES (?,?,?,?) "
                     "ON CONFLICT (team, name) DO UPDATE SET spec_json = excluded.spec_json, "
                     "created_at_ms = excluded.created_at_ms",
                     {r.team, r.name, r.spec_json, r.created_at_ms});
  }

  Result<EgressProfileRecord> GetEgressProfile(const std::string& team, const std::string& name) override {
    ASSIGN_OR_RETURN(auto all, QueryProfiles("WHERE team = ? AND name = ?", {team, name}));
    if (all.empty()) return NotFound("egress profile " + name + " not found");
    return all[0];
  }

  Result<std::vector<EgressProfileRecord>> ListEgressProfiles(const std::string& team) override {
    return QueryProfiles("WHERE team = ? ORDER BY name", {team});
  }

  Status DeleteEgressProfile(const std::string& team, const std::string& name) override {
    RETURN_IF_ERROR(GetEgressProfile(team, name).status());
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("DELETE FROM egress_profiles WHERE team = ? AND name = ?", {team, name});
  }

  Status PutSandboxCredential(const SandboxCredentialRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("INSERT INTO sandbox_credentials (sandbox, name, placeholder) VALUES (?,?,?) "
                     "ON CONFLICT (sandbox, name) DO UPDATE SET placeholder = excluded.placeholder",
                     {r.sandbox, r.name, r.placeholder});
  }

  Result<std::vector<SandboxCredentialRecord>> ListSandboxCredentials(const std::string& sandbox) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT sandbox, name, placeholder FROM sandbox_credentials WHERE sandbox = ? ORDER BY name");
    RETURN_IF_ERROR(s.Bind({sandbox}));
    std::vector<SandboxCredentialRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Text(1), s.Text(2)});
    }
    return out;
  }

  Status PutPort(const PortRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked(
        "INSERT INTO ports (sandbox, port, team, is_public, auto_resume, token_sha256, created_at_ms) "
        "VALUES (?,?,?,?,?,?,?) ON CONFLICT (sandbox, port) DO UPDATE SET is_public = excluded.is_public, "
        "auto_resume = excluded.auto_resume, token_sha256 = excluded.token_sha256, created_at_ms = "
        "excluded.created_at_ms",
        {r.sandbox, r.port, r.team, int64_t{r.is_public}, int64_t{r.auto_resume}, r.token_sha256, r.created_at_ms});
  }

  Result<std::vector<PortRecord>> ListPorts(const std::string& sandbox) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_,
           "SELECT sandbox, port, team, is_public, auto_resume, token_sha256, created_at_ms FROM ports "
           "WHERE sandbox = ? ORDER BY port");
    RETURN_IF_ERROR(s.Bind({sandbox}));
    std::vector<PortRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Int(1), s.Text(2), s.Int(3) != 0, s.Int(4) != 0, s.Text(5), s.Int(6)});
    }
    return out;
  }

  Status DeletePort(const std::string& sandbox, int64_t port) override {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(RunLocked("DELETE FROM ports WHERE sandbox = ? AND port = ?", {sandbox, port}));
    if (sqlite3_changes(db_) == 0) return NotFound("port " + std::to_string(port) + " is not open");
    return Status::Ok();
  }

  Status PutOperation(const OperationRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked(
        "INSERT INTO operations (id, team, kind, target, state, error, created_at_ms, finished_at_ms) "
        "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
        "error = excluded.error, finished_at_ms = excluded.finished_at_ms",
        {r.id, r.team, r.kind, r.target, std::string(OperationStateName(r.state)), r.error, r.created_at_ms, r.finished_at_ms});
  }

  Result<OperationRecord> GetOperation(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT id, team, kind, target, state, error, created_at_ms, finished_at_ms FROM operations "
                "WHERE id = ?");
    RETURN_IF_ERROR(s.Bind({id}));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("operation " + id + " not found");
    return ReadOperation(s);
  }

  Result<std::vector<OperationRecord>> ListUnfinishedOperations() override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT id, team, kind, target, state, error, created_at_ms, finished_at_ms FROM operations "
                "WHERE state IN ('pending', 'running') ORDER BY created_at_ms");
    RETURN_IF_ERROR(s.Bind({}));
    std::vector<OperationRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(ReadOperation(s));
    }
    return out;
  }

  Status PutCommand(const CommandRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    Value exit = r.exit_code ? Value(static_cast<int64_t>(*r.exit_code)) : Value(nullptr);
    return RunLocked(
        "INSERT INTO commands (pid, sandbox, cmd_json, usr, cwd, started_at_ms, finished_at_ms, exit_code, sig, "
        "stdout_bytes, stderr_bytes) VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (pid) DO UPDATE SET "
        "finished_at_ms = excluded.finished_at_ms, exit_code = excluded.exit_code, sig = excluded.sig, "
        "stdout_bytes = excluded.stdout_bytes, stderr_bytes = excluded.stderr_bytes",
        {r.pid, r.sandbox, EncodeStringList(r.cmd), r.user, r.cwd, r.started_at_ms, r.finished_at_ms, exit, r.signal,
         r.stdout_bytes, r.stderr_bytes});
  }

  Result<std::vector<CommandRecord>> ListCommands(const std::string& sandbox) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT pid, sandbox, cmd_json, usr, cwd, started_at_ms, finished_at_ms, exit_code, sig, "
                "stdout_bytes, stderr_bytes FROM commands WHERE sandbox = ? ORDER BY started_at_ms, pid");
    RETURN_IF_ERROR(s.Bind({sandbox}));
    std::vector<CommandRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      CommandRecord r;
      r.pid = s.Text(0);
      r.sandbox = s.Text(1);
      r.cmd = ParseStringList(s.Text(2));
      r.user = s.Text(3);
      r.cwd = s.Text(4);
      r.started_at_ms = s.Int(5);
      r.finished_at_ms = s.Int(6);
      if (!s.IsNull(7)) r.exit_code = static_cast<int>(s.Int(7));
      r.signal = s.Text(8);
      r.stdout_bytes = s.Int(9);
      r.stderr_bytes = s.Int(10);
      out.push_back(std::move(r));
    }
    return out;
  }

  Status AppendAudit(const AuditEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("INSERT INTO audit (ts_ms, team, sandbox, kind, action, detail_json) VALUES (?,?,?,?,?,?)",
                     {e.ts_ms, e.team, e.sandbox, e.kind, e.action, e.detail.dump()});
  }

  Result<std::vector<AuditEvent>> ListAudit(const AuditFilter& f) override {
    std::string sql = "SELECT seq, ts_ms, team, sandbox, kind, action, detail_json FROM audit WHERE team = ?";
    std::vector<Value> args = {f.team};
    if (!f.sandbox.empty()) {
      sql += " AND sandbox = ?";
      args.emplace_back(f.sandbox);
    }
    if (!f.kind.empty()) {
      sql += " AND kind = ?";
      args.emplace_back(f.kind);
    }
    sql += " ORDER BY seq DESC LIMIT ?";
    args.emplace_back(static_cast<int64_t>(f.limit));
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, sql);
    RETURN_IF_ERROR(s.Bind(args));
    std::vector<AuditEvent> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      AuditEvent e;
      e.seq = s.Int(0);
      e.ts_ms = s.Int(1);
      e.team = s.Text(2);
      e.sandbox = s.Text(3);
      e.kind = s.Text(4);
      e.action = s.Text(5);
      e.detail = ParseObject(s.Text(6));
      out.push_back(std::move(e));
    }
    return out;
  }

  Status PutApiKey(const std::string& key_sha256, const std::string& team, const std::string& name) override {
    if (!IsSha256Hex(key_sha256)) return InvalidArgument("API keys are stored only as SHA-256 hex digests");
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("INSERT INTO api_keys (key_sha256, team, name) VALUES (?,?,?) ON CONFLICT (key_sha256) "
                     "DO UPDATE SET team = excluded.team, name = excluded.name",
                     {key_sha256, team, name});
  }

  Result<std::string> TeamForApiKey(const std::string& key_sha256) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT team FROM api_keys WHERE key_sha256 = ?");
    RETURN_IF_ERROR(s.Bind({key_sha256}));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("unknown API key");
    return s.Text(0);
  }

  Status PutTeam(const TeamRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(
        RunLocked("INSERT INTO teams (name, created_at_ms, quotas_json) VALUES (?,?,?) ON CONFLICT (name) DO NOTHING",
                  {r.name, r.created_at_ms, r.quotas.dump()}));
    if (sqlite3_changes(db_) == 0) return Conflict("team " + r.name + " exists");
    return Status::Ok();
  }

  Result<std::vector<TeamRecord>> ListTeams() override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT name, created_at_ms, quotas_json FROM teams ORDER BY name");
    std::vector<TeamRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Int(1), ParseObject(s.Text(2))});
    }
    return out;
  }

  Result<TeamRecord> GetTeam(const std::string& name) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT name, created_at_ms, quotas_json FROM teams WHERE name = ?");
    RETURN_IF_ERROR(s.Bind({name}));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("team " + name.substr(0, 64) + " not found");
    return TeamRecord{s.Text(0), s.Int(1), ParseObject(s.Text(2))};
  }

  Status SetTeamQuotas(const std::string& name, const nlohmann::json& quotas) override {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(RunLocked("UPDATE teams SET quotas_json = ? WHERE name = ?", {quotas.dump(), name}));
    if (sqlite3_changes(db_) == 0) return NotFound("team " + name.substr(0, 64) + " not found");
    return Status::Ok();
  }

  Status PutKey(const ApiKeyRecord& r) override {
    if (!IsSha256Hex(r.secret_sha256)) return InvalidArgument("keys are stored only as SHA-256 hex digests");
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(RunLocked("INSERT INTO scoped_keys (" KEY_COLS
                              ") VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING",
                              {r.id, r.team, r.name, r.salt, r.secret_sha256, EncodeStringList(r.scopes),
                               r.created_at_ms, r.expires_at_ms, r.revoked_at_ms}));
    if (sqlite3_changes(db_) == 0) return Conflict("key " + r.id + " exists");
    return Status::Ok();
  }

  Result<ApiKeyRecord> GetKey(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT " KEY_COLS " FROM scoped_keys WHERE id = ?");
    RETURN_IF_ERROR(s.Bind({id}));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("key " + id.substr(0, 80) + " not found");
    return KeyFromRow(s);
  }

  Result<std::vector<ApiKeyRecord>> ListKeys(const std::string& team) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, team.empty() ? "SELECT " KEY_COLS " FROM scoped_keys ORDER BY created_at_ms, id"
                             : "SELECT " KEY_COLS " FROM scoped_keys WHERE team = ? ORDER BY created_at_ms, id");
    if (!team.empty()) RETURN_IF_ERROR(s.Bind({team}));
    std::vector<ApiKeyRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(KeyFromRow(s));
    }
    return out;
  }

  Status RevokeKey(const std::string& id, int64_t at_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(RunLocked(
        "UPDATE scoped_keys SET revoked_at_ms = CASE WHEN revoked_at_ms = 0 THEN ? ELSE revoked_at_ms END WHERE id = ?",
        {at_ms, id}));
    if (sqlite3_changes(db_) == 0) return NotFound("key " + id.substr(0, 80) + " not found");
    return Status::Ok();
  }

  // Fleet: nodes and jobs. The SQL matches postgres_store.cc; SQLite has no SKIP LOCKED, and
  // needs none: its one connection serializes every claim.
  Status HeartbeatNode(const NodeRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked(
        "INSERT INTO nodes (name, url, state, capacity, live, templates_json, heartbeat_at_ms, started_at_ms) "
        "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (name) DO UPDATE SET url = excluded.url, "
        "state = CASE WHEN nodes.state = 'draining' THEN 'draining' ELSE excluded.state END, "
        "capacity = excluded.capacity, live = excluded.live, templates_json = excluded.templates_json, "
        "heartbeat_at_ms = excluded.heartbeat_at_ms, started_at_ms = excluded.started_at_ms",
        {r.name, r.url, std::string(NodeStateName(r.state)), r.capacity, r.live, EncodeStringList(r.templates), r.heartbeat_at_ms,
         r.started_at_ms});
  }

  Result<std::vector<NodeRecord>> ListNodes() override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT " + std::string(kNodeCols) + " FROM nodes ORDER BY name");
    RETURN_IF_ERROR(s.Bind({}));
    std::vector<NodeRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Text(1), ParseNodeState(s.Text(2)), s.Int(3), s.Int(4), ParseStringList(s.Text(5)),
                     s.Int(6), s.Int(7)});
    }
    return out;
  }

  Status SetNodeState(const std::string& name, NodeState state) override {
    ASSIGN_OR_RETURN(auto names, Column("UPDATE nodes SET state = ? WHERE name = ? RETURNING name",
                                        {std::string(NodeStateName(state)), name}));
    if (names.empty()) return NotFound("node " + name + " not found");
    return Status::Ok();
  }

  Result<std::vector<std::string>> ClaimLostNodes(int64_t cutoff_ms) override {
    return Column("UPDATE nodes SET state = 'lost' WHERE state <> 'lost' AND heartbeat_at_ms < ? RETURNING name",
                  {cutoff_ms});
  }

  Result<int64_t> FailSandboxesOfNode(const std::string& node, const std::string& reason) override {
    ASSIGN_OR_RETURN(auto back, Column("UPDATE sandboxes SET state = 'suspended', uid_slot = -1 "
                                       "WHERE node = ? AND state = 'resuming' RETURNING id",
                                       {node}));
    ASSIGN_OR_RETURN(auto failed, Column("UPDATE sandboxes SET state = 'failed', error = ?, uid_slot = -1 "
                                         "WHERE node = ? AND state NOT IN ('suspended', 'destroyed', 'failed') "
                                         "RETURNING id",
                                         {reason, node}));
    return static_cast<int64_t>(back.size() + failed.size());
  }

  Result<bool> ClaimSandbox(const std::string& id, SandboxState from_state, SandboxState to_state,
                            const std::string& node) override {
    ASSIGN_OR_RETURN(auto ids, Column("UPDATE sandboxes SET state = ?, node = ? WHERE id = ? AND state = ? RETURNING id",
                                      {std::string(StateName(to_state)), node, id, std::string(StateName(from_state))}));
    return !ids.empty();
  }

  Status PutJob(const JobRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked(std::string("INSERT INTO jobs (") + kJobCols +
                         ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET "
                         "payload_json = excluded.payload_json, state = excluded.state, holder = excluded.holder, "
                         "lease_until_ms = excluded.lease_until_ms, attempts = excluded.attempts, "
                         "error = excluded.error, finished_at_ms = excluded.finished_at_ms",
                     {r.id, r.kind, r.target, r.team, r.payload.dump(), std::string(JobStateName(r.state)), r.holder, r.lease_until_ms, r.attempts,
                      r.error, r.created_at_ms, r.finished_at_ms});
  }

  // One machine: SQLite's clock is this process's.
  Result<int64_t> NowMs() override { return WallNowMs(); }

  Result<bool> RenewJob(const std::string& id, const std::string& holder, int64_t lease_until_ms,
                        const nlohmann::json& payload) override {
    ASSIGN_OR_RETURN(auto ids, Column("UPDATE jobs SET lease_until_ms = ?, payload_json = ? WHERE id = ? AND holder = ? "
                                      "AND state = 'pending' RETURNING id",
                                      {lease_until_ms, payload.dump(), id, holder}));
    return !ids.empty();
  }

  Result<bool> FinishJob(const std::string& id, const std::string& holder, JobState state,
                         const std::string& error, int64_t finished_at_ms) override {
    ASSIGN_OR_RETURN(auto ids, Column("UPDATE jobs SET state = ?, error = ?, finished_at_ms = ? WHERE id = ? AND holder = ? "
                                      "AND state = 'pending' RETURNING id",
                                      {std::string(JobStateName(state)), error, finished_at_ms, id, holder}));
    return !ids.empty();
  }

  Result<std::vector<JobRecord>> ListJobs(const std::string& target) override {
    return QueryJobs(std::string("SELECT ") + kJobCols + " FROM jobs WHERE (? = '' OR target = ?) ORDER BY created_at_ms, id",
                     {target, target});
  }

  Result<std::optional<JobRecord>> ClaimJob(const std::string& holder, int64_t now_ms,
                                            int64_t lease_until_ms) override {
    ASSIGN_OR_RETURN(auto jobs, QueryJobs(std::string("UPDATE jobs SET holder = ?, lease_until_ms = ?, "
                                                      "attempts = attempts + 1 WHERE id = (SELECT id FROM jobs "
                                                      "WHERE state = 'pending' AND lease_until_ms < ? "
                                                      "ORDER BY created_at_ms, id LIMIT 1) RETURNING ") +
                                              kJobCols,
                                          {holder, lease_until_ms, now_ms}));
    if (jobs.empty()) return std::optional<JobRecord>();
    return std::optional<JobRecord>(jobs[0]);
  }

 private:
  static constexpr const char* kNodeCols =
      "name, url, state, capacity, live, templates_json, heartbeat_at_ms, started_at_ms";
  Status PutBlobLease(const BlobLeaseRecord& r) override {
    if (r.id == kBlobGateId) return InvalidArgument("blob lease id 'gate' is the gate's");
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked(
        "INSERT INTO blob_leases (id, holder, until_ms) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
        "holder = excluded.holder, until_ms = excluded.until_ms",
        {r.id, r.holder, r.until_ms});
  }
  Status DeleteBlobLease(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("DELETE FROM blob_leases WHERE id = ? AND id <> 'gate'", {id});
  }
  Result<std::vector<BlobLeaseRecord>> ListBlobLeases() override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT id, holder, until_ms FROM blob_leases ORDER BY id");
    std::vector<BlobLeaseRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Text(1), s.Int(2)});
    }
    return out;
  }
  Result<bool> ClaimBlobGate(const std::string& holder, int64_t now_ms, int64_t until_ms) override {
    ASSIGN_OR_RETURN(auto ids, Column("UPDATE blob_leases SET holder = ?, until_ms = ? WHERE id = 'gate' AND "
                                      "(holder = '' OR holder = ? OR until_ms < ?) RETURNING id",
                                      {holder, until_ms, holder, now_ms}));
    return !ids.empty();
  }
  Status ReleaseBlobGate(const std::string& holder) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("UPDATE blob_leases SET holder = '', until_ms = 0 WHERE id = 'gate' AND holder = ?", {holder});
  }

  static constexpr const char* kVolumeCols = "id, team, name, size_mb, created_at_ms, node, manifest, parent";
  static constexpr const char* kMountCols = "volume, sandbox, path, read_only, created_at_ms";

  Status PutVolume(const VolumeRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(RunLocked(
        std::string("INSERT INTO volumes (") + kVolumeCols + ") VALUES (?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
        {r.id, r.team, r.name, r.size_mb, r.created_at_ms, r.node, r.manifest, r.parent}));
    if (sqlite3_changes(db_) == 0) return Conflict("volume " + r.name + " exists");
    return Status::Ok();
  }
  Status UpdateVolume(const VolumeRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(RunLocked("UPDATE volumes SET node = ?, manifest = ?, size_mb = ? WHERE id = ?",
                              {r.node, r.manifest, r.size_mb, r.id}));
    if (sqlite3_changes(db_) == 0) return NotFound("volume " + r.id + " not found");
    return Status::Ok();
  }
  Result<VolumeRecord> GetVolume(const std::string& team, const std::string& name) override {
    ASSIGN_OR_RETURN(
        auto v,
        QueryVolumes(std::string("SELECT ") + kVolumeCols + " FROM volumes WHERE team = ? AND name = ?", {team, name}));
    if (v.empty()) return NotFound("volume " + name + " not found");
    return v[0];
  }
  Result<VolumeRecord> GetVolumeById(const std::string& id) override {
    ASSIGN_OR_RETURN(auto v, QueryVolumes(std::string("SELECT ") + kVolumeCols + " FROM volumes WHERE id = ?", {id}));
    if (v.empty()) return NotFound("volume " + id + " not found");
    return v[0];
  }
  Result<std::vector<VolumeRecord>> ListVolumes(const std::string& team) override {
    return QueryVolumes(
        std::string("SELECT ") + kVolumeCols + " FROM volumes WHERE (? = '' OR team = ?) ORDER BY name, id",
        {team, team});
  }
  Status DeleteVolume(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("DELETE FROM volumes WHERE id = ?", {id});
  }
  Status PutVolumeMount(const VolumeMountRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(RunLocked(
        std::string("INSERT INTO volume_mounts (") + kMountCols + ") VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
        {r.volume, r.sandbox, r.path, int64_t{r.read_only}, r.created_at_ms}));
    if (sqlite3_changes(db_) == 0) {
      return Conflict("volume " + r.volume + " is mounted read-write by another sandbox, or already by this one");
    }
    return Status::Ok();
  }
  Result<std::vector<VolumeMountRecord>> ListVolumeMounts(const std::string& volume,
                                                          const std::string& sandbox) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, std::string("SELECT ") + kMountCols +
                    " FROM volume_mounts WHERE (? = '' OR volume = ?) AND (? = '' OR sandbox = ?) "
                    "ORDER BY created_at_ms, volume, sandbox");
    RETURN_IF_ERROR(s.Bind({volume, volume, sandbox, sandbox}));
    std::vector<VolumeMountRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Text(1), s.Text(2), s.Int(3) != 0, s.Int(4)});
    }
    return out;
  }
  Status DeleteVolumeMounts(const std::string& sandbox) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RunLocked("DELETE FROM volume_mounts WHERE sandbox = ?", {sandbox});
  }
  Result<std::vector<VolumeRecord>> QueryVolumes(const std::string& sql, const std::vector<Value>& args) {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, sql);
    RETURN_IF_ERROR(s.Bind(args));
    std::vector<VolumeRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Text(1), s.Text(2), s.Int(3), s.Int(4), s.Text(5), s.Text(6), s.Text(7)});
    }
    return out;
  }

  static constexpr const char* kJobCols =
      "id, kind, target, team, payload_json, state, holder, lease_until_ms, attempts, error, created_at_ms, "
      "finished_at_ms";

  // Runs `sql` and returns its first column, one string per row.
  Result<std::vector<std::string>> Column(const std::string& sql, const std::vector<Value>& args) {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, sql);
    RETURN_IF_ERROR(s.Bind(args));
    std::vector<std::string> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(s.Text(0));
    }
    return out;
  }
  Result<std::vector<JobRecord>> QueryJobs(const std::string& sql, const std::vector<Value>& args) {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, sql);
    RETURN_IF_ERROR(s.Bind(args));
    std::vector<JobRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Text(1), s.Text(2), s.Text(3), ParseObject(s.Text(4)), ParseJobState(s.Text(5)), s.Text(6), s.Int(7),
                     s.Int(8), s.Text(9), s.Int(10), s.Int(11)});
    }
    return out;
  }

  Result<std::vector<CredentialRecord>> QueryCredentials(const std::string& where, const std::vector<Value>& args) {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT team, name, spec_json, sealed_secret, created_at_ms FROM credentials " + where);
    RETURN_IF_ERROR(s.Bind(args));
    std::vector<CredentialRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Text(1), s.Text(2), s.Text(3), s.Int(4)});
    }
    return out;
  }
  Result<std::vector<EgressProfileRecord>> QueryProfiles(const std::string& where, const std::vector<Value>& args) {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT team, name, spec_json, created_at_ms FROM egress_profiles " + where);
    RETURN_IF_ERROR(s.Bind(args));
    std::vector<EgressProfileRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), s.Text(1), s.Text(2), s.Int(3)});
    }
    return out;
  }

  Status ExecLocked(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return Internal("sqlite exec: " + msg);
    }
    return Status::Ok();
  }
  Status RunLocked(const std::string& sql, const std::vector<Value>& args) {
    Stmt s(db_, sql);
    RETURN_IF_ERROR(s.Bind(args));
    ASSIGN_OR_RETURN(bool row, s.Step());
    (void)row;
    return Status::Ok();
  }

  std::mutex mu_;
  sqlite3* db_;  // GUARDED_BY(mu_)
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return Unavailable("open store " + path + ": " + msg);
  }
  auto store = std::make_unique<SqliteStore>(db);
  RETURN_IF_ERROR(store->Init().Annotate("open store " + path));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace space::store
