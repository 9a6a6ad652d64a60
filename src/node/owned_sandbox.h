// Looking a sandbox up on behalf of a team: another team's sandbox answers not_found, exactly
// like one that does not exist, so ids never leak across teams.
#pragma once

#include <initializer_list>
#include <string>

#include "store/store.h"

namespace space::node {

Result<store::Sandbox> GetOwned(store::Store* store, const std::string& team, const std::string& id);
// The sandbox, when it is in one of `states`; conflict naming `action` otherwise.
Result<store::Sandbox> GetOwnedInState(store::Store* store, const std::string& team, const std::string& id,
                                       std::initializer_list<store::SandboxState> states, const std::string& action);

}  // namespace space::node
