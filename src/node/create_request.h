// A create request after the API (or the E2B layer) validated its shape: what the lifecycle
// needs to make a sandbox, typed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/sandbox.h"

namespace space::node {

// Mount volume `name` (node/volumes.h) at `path` in the sandbox.
struct VolumeRequest {
  std::string name;
  std::string path;
  bool read_only = false;
};

struct CreateRequest {
  std::string team;
  std::string template_name = "base";
  // Exactly this digest of the template ("name@sha256:..."); "": its current one.
  std::string template_digest;
  // Set only by template builds (node/template_builds.h): `template_digest` is a build layer,
  // which the name need not have held.
  bool build_layer = false;
  store::Resources resources;
  int64_t timeout_s = 300;
  store::OnTimeout on_timeout = store::OnTimeout::kDestroy;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> egress_profiles;
  std::string from_snapshot;  // restore this snapshot instead of cloning the template
  store::SnapshotPolicy snapshot_policy;
  std::vector<std::string> credentials;                  // names; the sandbox gets placeholders, never secrets
  std::vector<VolumeRequest> volumes;                    // ns only; never from a warm pool
  store::RuntimeKind runtime = store::RuntimeKind::kNs;  // a restore keeps its origin's
  // A fork's egress policy: its parent's copy of the profiles (Sandbox::egress), not the
  // profiles' current state. Unset: resolve `egress_profiles` now.
  std::optional<nlohmann::json> inherited_egress;
  int64_t received_mono_ns = 0;  // when the API got the request, for timings.create_ms
  double pull_template_ms = 0;   // set when the template was pulled from the fleet's store
};

}  // namespace space::node
