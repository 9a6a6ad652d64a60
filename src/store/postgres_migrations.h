// Schema of the store in PostgreSQL's dialect: the same versions as kMigrations (SQLite), one
// for one, so a version number means the same tables on either backend. PostgresStore records
// each applied version as a row of schema_migrations.
//
// Differences from the SQLite text, and why:
// - audit.seq is an identity column (SQLite's INTEGER PRIMARY KEY is its rowid alias).
// - Keys that pages and listings sort by are COLLATE "C": SQLite compares text bytewise, and a
//   database created with a linguistic collation (en_US.UTF-8) would order "sbx_B" and "sbx_a"
//   differently, which breaks after_id paging across backends.
#pragma once

#include <string_view>

namespace space::store {

inline constexpr std::string_view kPostgresMigrations[] = {
    R"sql(
CREATE TABLE sandboxes (
  id TEXT COLLATE "C" PRIMARY KEY,
  team TEXT NOT NULL,
  state TEXT NOT NULL,
  template_name TEXT NOT NULL,
  template_digest TEXT NOT NULL,
  runtime TEXT NOT NULL,
  node TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  timeout_s BIGINT NOT NULL,
  on_timeout TEXT NOT NULL,
  metadata_json TEXT NOT NULL,
  env_json TEXT NOT NULL,
  egress_json TEXT NOT NULL,
  resources_json TEXT NOT NULL,
  timings_json TEXT NOT NULL,
  uid_slot BIGINT NOT NULL,
  error TEXT NOT NULL
);
CREATE INDEX sandboxes_team_state ON sandboxes (team, state);
CREATE TABLE operations (
  id TEXT COLLATE "C" PRIMARY KEY,
  team TEXT NOT NULL,
  kind TEXT NOT NULL,
  target TEXT NOT NULL,
  state TEXT NOT NULL,
  error TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  finished_at_ms BIGINT NOT NULL
);
CREATE INDEX operations_state ON operations (state);
CREATE TABLE commands (
  pid TEXT COLLATE "C" PRIMARY KEY,
  sandbox TEXT NOT NULL,
  cmd_json TEXT NOT NULL,
  usr TEXT NOT NULL,
  cwd TEXT NOT NULL,
  started_at_ms BIGINT NOT NULL,
  finished_at_ms BIGINT NOT NULL,
  exit_code INTEGER,
  sig TEXT NOT NULL,
  stdout_bytes BIGINT NOT NULL,
  stderr_bytes BIGINT NOT NULL
);
CREATE INDEX commands_sandbox ON commands (sandbox, started_at_ms);
CREATE TABLE audit (
  seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  ts_ms BIGINT NOT NULL,
  team TEXT NOT NULL,
  sandbox TEXT NOT NULL,
  kind TEXT NOT NULL,
  action TEXT NOT NULL,
  detail_json TEXT NOT NULL
);
CREATE INDEX audit_team_kind ON audit (team, kind, seq);
CREATE TABLE api_keys (
  key_sha256 TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  name TEXT NOT NULL
);
)sql",
    // 2: snapshots (lifecycle issue). head_snapshot is the parent of a sandbox's next snapshot.
    R"sql(
ALTER TABLE sandboxes ADD COLUMN head_snapshot TEXT NOT NULL DEFAULT '';
CREATE TABLE snapshots (
  id TEXT COLLATE "C" PRIMARY KEY,
  team TEXT NOT NULL,
  sandbox TEXT NOT NULL,
  parent TEXT NOT NULL,
  label TEXT NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  size_bytes BIGINT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  error TEXT NOT NULL
);
CREATE INDEX snapshots_sandbox ON snapshots (sandbox, created_at_ms);
)sql",
    // 3: rolling snapshot policy per sandbox ({"every_s","keep","max_age_s"} or {}).
    R"sql(
ALTER TABLE sandboxes ADD COLUMN policy_json TEXT NOT NULL DEFAULT '{}';
)sql",
    // 4: credentials (secrets sealed with a key kept outside the database), egress profiles,
    // and which placeholder each sandbox got for each credential.
    R"sql(
CREATE TABLE credentials (
  team TEXT NOT NULL,
  name TEXT COLLATE "C" NOT NULL,
  spec_json TEXT NOT NULL,
  sealed_secret TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  PRIMARY KEY (team, name)
);
CREATE TABLE egress_profiles (
  team TEXT NOT NULL,
  name TEXT COLLATE "C" NOT NULL,
  spec_json TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  PRIMARY KEY (team, name)
);
CREATE TABLE sandbox_credentials (
  sandbox TEXT NOT NULL,
  name TEXT COLLATE "C" NOT NULL,
  placeholder TEXT NOT NULL,
  PRIMARY KEY (sandbox, name)
);
)sql",
    // 5: the fleet: node agents and their heartbeats, and leased control-plane jobs.
    R"sql(
CREATE TABLE nodes (
  name TEXT COLLATE "C" PRIMARY KEY,
  url TEXT NOT NULL,
  state TEXT NOT NULL,
  capacity BIGINT NOT NULL,
  live BIGINT NOT NULL,
  templates_json TEXT NOT NULL,
  heartbeat_at_ms BIGINT NOT NULL,
  started_at_ms BIGINT NOT NULL
);
CREATE TABLE jobs (
  id TEXT COLLATE "C" PRIMARY KEY,
  kind TEXT NOT NULL,
  target TEXT NOT NULL,
  team TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  state TEXT NOT NULL,
  holder TEXT NOT NULL,
  lease_until_ms BIGINT NOT NULL,
  attempts BIGINT NOT NULL,
  error TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  finished_at_ms BIGINT NOT NULL
);
CREATE INDEX jobs_state ON jobs (state, lease_until_ms);
CREATE INDEX sandboxes_node ON sandboxes (node, state);
)sql",
    // 6: preview ports.
    R"sql(
CREATE TABLE ports (
  sandbox TEXT COLLATE "C" NOT NULL,
  port BIGINT NOT NULL,
  team TEXT NOT NULL,
  is_public BIGINT NOT NULL,
  auto_resume BIGINT NOT NULL,
  token_sha256 TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  PRIMARY KEY (sandbox, port)
);
)sql",
    // 7: teams, and keys made through the API (salted digests).
    R"sql(
CREATE TABLE teams (
  name TEXT PRIMARY KEY,
  created_at_ms BIGINT NOT NULL
);
CREATE TABLE scoped_keys (
  id TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  name TEXT NOT NULL,
  salt TEXT NOT NULL,
  secret_sha256 TEXT NOT NULL,
  scopes_json TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  revoked_at_ms BIGINT NOT NULL
);
CREATE INDEX scoped_keys_team ON scoped_keys (team, created_at_ms);
)sql",
    // 8: per-team quotas.
    R"sql(
ALTER TABLE teams ADD COLUMN quotas_json TEXT NOT NULL DEFAULT '{}';
)sql",
    // 9: object-store leases (node/blob_locks.h): one gate row for the exclusive holder, one row
    // per shared holder.
    R"sql(
CREATE TABLE blob_leases (
  id TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  until_ms BIGINT NOT NULL
);
INSERT INTO blob_leases (id, holder, until_ms) VALUES ('gate', '', 0);
)sql",
    // 10: volumes (node/volumes.h) and their mounts; one read-write mount per volume.
    R"sql(
CREATE TABLE volumes (
  id TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  name TEXT COLLATE "C" NOT NULL,
  size_mb BIGINT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  node TEXT NOT NULL,
  manifest TEXT NOT NULL,
  parent TEXT NOT NULL
);
CREATE UNIQUE INDEX volumes_team_name ON volumes (team, name);
CREATE TABLE volume_mounts (
  volume TEXT NOT NULL,
  sandbox TEXT NOT NULL,
  path TEXT NOT NULL,
  read_only BIGINT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  PRIMARY KEY (volume, sandbox)
);
CREATE UNIQUE INDEX volume_mounts_one_writer ON volume_mounts (volume) WHERE read_only = 0;
CREATE INDEX volume_mounts_sandbox ON volume_mounts (sandbox);
)sql",
};

}  // namespace space::store
