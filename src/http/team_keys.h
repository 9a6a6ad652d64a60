// Teams, their quotas, and API keys over the API (/v1/teams, /v1/keys; docs/keys.md), answered from the
// store by nodes and fleet servers alike. Admin keys only, except GET /v1/keys/self. A key is
// shown once, when it is made; the store keeps a salt and a salted digest (store.h). Creating
// and revoking keys are audited (kind "admin") in the key's team.
#pragma once

#include "http/http.h"
#include "store/store.h"

namespace space::api {

// False when `req` is not for /v1/teams or /v1/keys (nothing sent); true once answered.
// `req` is authenticated (team and scopes set).
bool HandleTeamsAndKeys(store::Store* store, Request& req, Responder& res);

}  // namespace space::api
