// The stored (public) form of a credential spec, shared by the credential API
// (node_credentials.cc) and the gateway wiring (node_egress.cc). Internal to src/node.
#pragma once

#include <string>

#include "common/result.h"
#include "credentials/credential.h"

namespace space::node {

Result<credentials::CredentialSpec> CredentialSpecFromStored(const std::string& name, const std::string& json);

}  // namespace space::node
