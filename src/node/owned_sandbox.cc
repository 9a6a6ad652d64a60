#include "node/owned_sandbox.h"

namespace space::node {

Result<store::Sandbox> GetOwned(store::Store* store, const std::string& team, const std::string& id) {
  auto rec = store->GetSandbox(id);
  if (!rec.ok() || rec->team != team) return NotFound("sandbox " + id + " not found");
  return rec;
}

Result<store::Sandbox> GetOwnedInState(store::Store* store, const std::string& team, const std::string& id,
                                       std::initializer_list<store::SandboxState> states, const std::string& action) {
  ASSIGN_OR_RETURN(store::Sandbox rec, GetOwned(store, team, id));
  for (store::SandboxState s : states) {
    if (rec.state == s) return rec;
  }
  return Conflict("cannot " + action + " sandbox " + id + " while it is " + std::string(store::StateName(rec.state)));
}

}  // namespace space::node
