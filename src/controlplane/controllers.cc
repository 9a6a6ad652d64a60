#include "controlplane/controllers.h"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "controlplane/node_client.h"
#include "controlplane/scheduler.h"

namespace space::controlplane {

Controllers::Controllers(store::Store* store, ControllersConfig config) : store_(store), config_(std::move(config)) {}

Controllers::~Controllers() { Stop(); }

void Controllers::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Controllers::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Controllers::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(config_.tick_ms), [this] { return stopping_; })) {
    lock.unlock();
    Tick();
    lock.lock();
  }
}

void Controllers::Tick() {
  FailLostNodes();
  // A few jobs per tick, so losing a node is noticed between long migrations too.
  for (int i = 0; i < 4; ++i) {
    auto now = store_->NowMs();
    if (!now.ok()) {
      LogWarn("controllers", now.status().ToString());
      return;
    }
    auto job = store_->ClaimJob(config_.replica, *now, *now + config_.lease_ms);
    if (!job.ok()) {
      LogWarn("controllers", job.status().ToString());
      return;
    }
    if (!job->has_value()) return;
    RunJob(std::move(**job));
  }
}

void Controllers::FailLostNodes() {
  auto now = store_->NowMs();
  if (!now.ok()) {
    LogWarn("controllers", now.status().ToString());
    return;
  }
  auto lost = store_->ClaimLostNodes(*now - config_.lost_after_ms);
  if (!lost.ok()) {
    LogWarn("controllers", lost.status().ToString());
    return;
  }
  for (const auto& name : *lost) {
    auto n = store_->FailSandboxesOfNode(
        name, "node " + name + " lost: no heartbeat for " + std::to_string(config_.lost_after_ms / 1000) + " s");
    LogWarn("controllers", "node " + name + " is lost; " +
                               (n.ok() ? std::to_string(*n) + " of its sandboxes failed or returned to suspended"
                                       : "failing its sandboxes: " + n.status().ToString()));
  }
}

void Controllers::RunJob(store::JobRecord job) {
  bool taken_over = false;
  Status st = job.kind == "migrate" ? Migrate(&job, &taken_over) : InvalidArgument("unknown job kind " + job.kind);
  if (taken_over) {
    LogInfo("controllers", job.kind + " " + job.target + ": " + st.message());
    return;  // another replica holds it now and records the outcome
  }
  auto now = store_->NowMs();
  auto done = store_->FinishJob(job.id, config_.replica, st.ok() ? store::JobState::kSucceeded : store::JobState::kFailed, st.ok() ? "" : st.message(),
                                now.ok() ? *now : WallNowMs());
  if (!done.ok()) LogWarn("controllers", done.status().ToString());
  LogInfo("controllers", job.kind + " " + job.target + ": " + (st.ok() ? "done" : st.ToString()));
}

Status Controllers::Act(const std::string& node_name, const store::JobRecord& job, const std::string& action) {
  ASSIGN_OR_RETURN(auto nodes, store_->ListNodes());
  std::string url;
  for (const auto& n : nodes) {
    if (n.name == node_name) url = n.url;
  }
  if (url.empty()) return NotFound("node " + node_name + " is not registered");
  // Bounded below the lease, so a step never outlives the lease that covers it.
  const int timeout_ms = static_cast<int>(std::max<int64_t>(1000, config_.lease_ms / 2));
  ASSIGN_OR_RETURN(CallResult r, Call(url, "POST", "/v1/sandboxes/" + job.target + "/" + action + "?wait=true", "{}",
                                      {{"Authorization", "Bearer " + config_.fleet_token}, {"X-Space-Team", job.team}},
                                      timeout_ms));
  if (r.status == 409) return Conflict(action + " on " + node_name + ": " + r.body.substr(0, 300));
  if (r.status / 100 != 2) {
    return Unavailable(action + " on " + node_name + " answered " + std::to_string(r.status) + ": " + r.body.substr(0, 300));
  }
  return Status::Ok();
}

Status Controllers::Migrate(store::JobRecord* job, bool* taken_over) {
  nlohmann::json& payload = job->payload;
  if (!payload.is_object() || !payload.contains("from") || !payload["from"].is_string()) {
    return InvalidArgument("migrate job without a source node");
  }
  const std::string from = payload["from"];
  // The payload remembers what this job did, so a replica taking it over knows too: a sandbox
  // suspended by someone else stays suspended, and one that was paused is paused again.
  auto renew = [&]() -> Status {
    ASSIGN_OR_RETURN(int64_t now, store_->NowMs());
    ASSIGN_OR_RETURN(bool held, store_->RenewJob(job->id, config_.replica, now + config_.lease_ms, job->payload));
    if (!held) {
      *taken_over = true;
      return Conflict("job " + job->id + " was taken over by another replica");
    }
    return Status::Ok();
  };
  // At most a handful of steps: suspend, wait out an in-flight transition, resume.
  for (int step = 0; step < 40; ++step) {
    ASSIGN_OR_RETURN(store::Sandbox rec, store_->GetSandbox(job->target));
    RETURN_IF_ERROR(renew());  // taken over: stop here
    const bool ours = payload.value("suspended", false);
    Status acted;
    if ((rec.state == store::SandboxState::kRunning || rec.state == store::SandboxState::kPaused) && rec.node == from) {
      payload["was"] = store::StateName(rec.state);
      payload["suspended"] = true;  // before the call: a takeover must not mistake it for another's
      RETURN_IF_ERROR(renew());
      acted = Act(from, *job, "suspend");
    } else if (rec.state == store::SandboxState::kSuspended && ours) {
      ASSIGN_OR_RETURN(auto nodes, store_->ListNodes());
      ASSIGN_OR_RETURN(int64_t now, store_->NowMs());
      ASSIGN_OR_RETURN(store::NodeRecord to, PickNode(nodes, {rec.template_name, from}, now, config_.stale_ms));
      acted = Act(to.name, *job, "resume");
      const auto was = store::ParseSandboxState(payload.value("was", ""));
      if (acted.ok() && was.ok() && *was == store::SandboxState::kPaused) acted = Act(to.name, *job, "pause");
      if (acted.ok()) return Status::Ok();
    } else if (rec.state == store::SandboxState::kSuspended) {
      return Status::Ok();  // suspended by its owner or its timeout, not by this job: left so
    } else if (rec.state == store::SandboxState::kRunning || rec.state == store::SandboxState::kPaused) {
      return Status::Ok();  // on another node now
    } else if (rec.state == store::SandboxState::kSuspending || rec.state == store::SandboxState::kResuming || rec.state == store::SandboxState::kCreating) {
      acted = Conflict("a step is in flight");  // someone else's: wait for it
    } else {
      return Status::Ok();  // destroyed or failed meanwhile: nothing left to move
    }
    if (acted.code() == StatusCode::kConflict) {
      // The sandbox moved on under us (its owner, or a replica that took this job over after
      // our lease ran out, acted first): look again shortly.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    RETURN_IF_ERROR(acted);
  }
  return DeadlineExceeded("sandbox " + job->target + " did not settle");
}

}  // namespace space::controlplane
