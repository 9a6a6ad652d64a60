// CredentialService: a team's credentials (write-only secrets, sealed with the node's key-
// encryption key) and egress profiles, and the placeholders a sandbox holds in place of a
// secret. Validation and sealing live in src/credentials; this stores and hands out. Nothing
// here ever returns or logs a secret: the gateway alone unseals one.
//
// Borrows the store, the key and the audit log; thread-safe as they are.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "credentials/credential.h"
#include "credentials/egress_profile.h"
#include "credentials/kek.h"
#include "node/audit_log.h"
#include "store/store.h"

namespace space::node {

// A credential as it may be shown: its spec and when it was stored.
struct CredentialInfo {
  credentials::CredentialSpec spec;
  int64_t created_at_ms = 0;
};

// A credential a sandbox holds: its spec and the placeholder standing in for its secret.
struct HeldCredential {
  credentials::CredentialSpec spec;
  std::string placeholder;
};

class CredentialService {
 public:
  CredentialService(store::Store* store, const credentials::Kek* kek, AuditLog* audit)
      : store_(store), kek_(kek), audit_(audit) {}

  // Seals `secret` (wiped before return) and stores it with `spec` (credentials::
  // ParseCredentialRequest made both), replacing a credential of the same name.
  Result<CredentialInfo> Put(const std::string& team, const credentials::CredentialSpec& spec, std::string secret);
  Result<CredentialInfo> Get(const std::string& team, const std::string& name);  // not_found
  Result<std::vector<CredentialInfo>> List(const std::string& team);
  Status Delete(const std::string& team, const std::string& name);  // not_found

  Status PutProfile(const std::string& team, const credentials::EgressProfile& profile);
  Result<credentials::EgressProfile> GetProfile(const std::string& team, const std::string& name);  // not_found
  Result<std::vector<credentials::EgressProfile>> ListProfiles(const std::string& team);
  Status DeleteProfile(const std::string& team, const std::string& name);  // not_found

  // Gives a new sandbox a placeholder per named credential (in `env` under the credential's
  // env name) after checking that each exists, has not expired and is in scope. Every one is
  // checked before any is attached, so a refused create leaves nothing.
  Status Attach(const std::string& team, const std::string& sandbox_id, const std::vector<std::string>& names,
                const std::map<std::string, std::string>& metadata, std::map<std::string, std::string>* env);
  // The credentials a fork of `parent_id` keeps (its parent's, but those scoped to the parent
  // alone); removes the env variables of those it drops from `env`.
  Result<std::vector<std::string>> InheritedBy(const std::string& team, const std::string& parent_id,
                                               std::map<std::string, std::string>* env);
  // What a sandbox holds now; credentials deleted since are left out (their placeholders stay
  // inert).
  Result<std::vector<HeldCredential>> HeldBy(const std::string& team, const std::string& sandbox_id);
  // The secret itself, for the egress gateway alone (which injects it into a request upstream
  // and is answered only for credentials of sandboxes registered with it).
  Result<std::string> Unseal(const std::string& team, const std::string& name);

 private:
  Result<credentials::CredentialSpec> StoredSpec(const store::CredentialRecord& rec);
  Result<credentials::EgressProfile> StoredProfile(const store::EgressProfileRecord& rec);

  store::Store* const store_;
  const credentials::Kek* const kek_;
  AuditLog* const audit_;
};

}  // namespace space::node
