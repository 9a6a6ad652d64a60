// Pause, resume, snapshots, fork, rollback and diff.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "common/ids.h"
#include "http/validate.h"

namespace space::api {
namespace {

constexpr int64_t kWaitMs = 120000;

bool WantsWait(const Request& req) { return req.Query("wait") == "true" || req.Query("wait") == "1"; }

}  // namespace

Status Api::AutoResume(Request& req, const std::string& id) {
  if (req.Query("auto_resume") != "true") return Status::Ok();
  auto rec = node_->lifecycle().Get(req.team, id);
  if (!rec.ok() || rec->state != store::SandboxState::kPaused) return Status::Ok();
  ASSIGN_OR_RETURN(store::OperationRecord op, node_->lifecycle().Resume(req.team, id));
  ASSIGN_OR_RETURN(store::OperationRecord done, node_->lifecycle().WaitOperation(req.team, op.id, kWaitMs));
  if (done.state != store::OperationState::kSucceeded) return Conflict("could not resume sandbox " + id + ": " + done.error);
  return Status::Ok();
}

void Api::Lifecycle(Request& req, Responder& res, const std::string& id, const std::string& action) {
  if (action == "list_snapshots") {
    auto snaps = node_->snapshots().List(req.team, id);
    if (!snaps.ok()) return res.SendError(snaps.status());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : *snaps) out.push_back(SnapshotJson(s));
    return res.SendJson(200, {{"snapshots", out}});
  }
  auto body = ParseObject(req.body);
  if (!body.ok()) return res.SendError(body.status());
  if (action == "pause" || action == "resume" || action == "suspend") {
    if (Status st = CheckKnownFields(*body, {}); !st.ok()) return res.SendError(st);
    auto op = action == "pause"    ? node_->lifecycle().Pause(req.team, id)
              : action == "resume" ? node_->lifecycle().Resume(req.team, id)
                                   : node_->lifecycle().Suspend(req.team, id);
    if (!op.ok()) return res.SendError(op.status());
    if (!WantsWait(req)) return res.SendJson(202, OperationJson(*op));
    auto done = node_->lifecycle().WaitOperation(req.team, op->id, kWaitMs);
    if (!done.ok()) return res.SendError(done.status());
    if (done->state == store::OperationState::kFailed) return res.SendError(Conflict(action + " failed: " + done->error));
    auto rec = node_->lifecycle().Get(req.team, id);
    if (!rec.ok()) return res.SendError(rec.status());
    return res.SendJson(200, SandboxJson(*rec));
  }
  if (action == "snapshots") {
    if (Status st = CheckKnownFields(*body, {"label"}); !st.ok()) return res.SendError(st);
    auto label = GetString(*body, "label", "", 256);
    if (!label.ok()) return res.SendError(label.status());
    auto snap = node_->snapshots().Take(req.team, id, *label);
    if (!snap.ok()) return res.SendError(snap.status());
    return res.SendJson(201, SnapshotJson(*snap));
  }
  if (action == "fork") {
    if (Status st = CheckKnownFields(*body, {"snapshot", "count"}); !st.ok()) return res.SendError(st);
    auto snap = GetString(*body, "snapshot", "", 80);
    auto count = GetInt(*body, "count", 1, 1, 16);
    if (!snap.ok()) return res.SendError(snap.status());
    if (!count.ok()) return res.SendError(count.status());
    if (!snap->empty() && !IsPublicId(*snap, "snap")) return res.SendError(NotFound("snapshot " + *snap + " not found"));
    auto kids = node_->lifecycle().Fork(req.team, id, *snap, static_cast<int>(*count));
    if (!kids.ok()) return res.SendError(kids.status());
    nlohmann::json out = nlohmann::json::array();
    nlohmann::json ops = nlohmann::json::array();
    for (auto& [rec, op] : *kids) {
      if (WantsWait(req)) {
        auto done = node_->lifecycle().WaitOperation(req.team, op.id, kWaitMs);
        auto now = node_->lifecycle().Get(req.team, rec.id);
        out.push_back(SandboxJson(now.ok() ? *now : rec));
        ops.push_back(OperationJson(done.ok() ? *done : op));
      } else {
        out.push_back(SandboxJson(rec));
        ops.push_back(OperationJson(op));
      }
    }
    return res.SendJson(WantsWait(req) ? 201 : 202, {{"sandboxes", out}, {"operations", ops}});
  }
  if (action == "rollback") {
    if (Status st = CheckKnownFields(*body, {"snapshot"}); !st.ok()) return res.SendError(st);
    auto snap = GetString(*body, "snapshot", "", 80);
    if (!snap.ok()) return res.SendError(snap.status());
    if (snap->empty()) return res.SendError(InvalidArgument("field 'snapshot' is required"));
    if (!IsPublicId(*snap, "snap")) return res.SendError(NotFound("snapshot " + *snap + " not found"));
    auto op = node_->lifecycle().Rollback(req.team, id, *snap);
    if (!op.ok()) return res.SendError(op.status());
    // Rollback answers with the sandbox once it runs again (the v1 API's "→ sandbox").
    auto done = node_->lifecycle().WaitOperation(req.team, op->id, kWaitMs);
    if (!done.ok()) return res.SendError(done.status());
    if (done->state == store::OperationState::kFailed) return res.SendError(Internal("rollback failed: " + done->error));
    auto rec = node_->lifecycle().Get(req.team, id);
    if (!rec.ok()) return res.SendError(rec.status());
    return res.SendJson(200, SandboxJson(*rec));
  }
  res.SendError(NotFound("no route for " + req.method + " " + req.path));
}

void Api::Snapshots(Request& req, Responder& res, const std::string& snap_id, const std::string& action) {
  if (action == "get") {
    auto snap = node_->snapshots().Get(req.team, snap_id);
    if (!snap.ok()) return res.SendError(snap.status());
    return res.SendJson(200, SnapshotJson(*snap));
  }
  if (action == "delete") {
    Status st = node_->snapshots().Delete(req.team, snap_id);
    if (!st.ok()) return res.SendError(st);
    return res.Send(204, "application/json", "");
  }
  std::string against = req.Query("against");
  if (!IsPublicId(against, "snap")) return res.SendError(InvalidArgument("query 'against' must name a snapshot"));
  auto diff = node_->snapshots().Diff(req.team, snap_id, against);
  if (!diff.ok()) return res.SendError(diff.status());
  res.SendJson(200, {{"snapshot", snap_id},
                     {"against", against},
                     {"added", diff->added},
                     {"changed", diff->changed},
                     {"removed", diff->removed},
                     {"truncated", diff->truncated}});
}

}  // namespace space::api
