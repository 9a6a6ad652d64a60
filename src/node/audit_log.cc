#include "node/audit_log.h"

#include "common/clock.h"
#include "common/log.h"

namespace space::node {

void AuditLog::Record(const std::string& team, const std::string& sandbox, const std::string& kind,
                      const std::string& action, const nlohmann::json& detail) {
  store::AuditEvent e;
  e.ts_ms = WallNowMs();
  e.team = team;
  e.sandbox = sandbox;
  e.kind = kind;
  e.action = action;
  e.detail = detail;
  if (Status st = store_->AppendAudit(e); !st.ok()) LogError("audit", st.ToString());
}

}  // namespace space::node
