// AuditLog: the node's record of who did what to which sandbox (lifecycle, exec, egress,
// credential events), kept in the store. A failed append is logged, never returned: an audit
// write must not fail the act it records.
//
// Borrows the store; thread-safe as the store is.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.h"

namespace space::node {

class AuditLog {
 public:
  explicit AuditLog(store::Store* store) : store_(store) {}

  void Record(const std::string& team, const std::string& sandbox, const std::string& kind, const std::string& action,
              const nlohmann::json& detail = nlohmann::json::object());
  // Newest first.
  Result<std::vector<store::AuditEvent>> List(const store::AuditFilter& filter) { return store_->ListAudit(filter); }

 private:
  store::Store* const store_;
};

}  // namespace space::node
