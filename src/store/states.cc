#include "store/states.h"

namespace space::store {

std::string_view OperationStateName(OperationState state) {
  switch (state) {
    case OperationState::kPending:
      return "pending";
    case OperationState::kRunning:
      return "running";
    case OperationState::kSucceeded:
      return "succeeded";
    case OperationState::kFailed:
      return "failed";
  }
  return "failed";
}

OperationState ParseOperationState(std::string_view name) {
  if (name == "pending") return OperationState::kPending;
  if (name == "running") return OperationState::kRunning;
  if (name == "succeeded") return OperationState::kSucceeded;
  return OperationState::kFailed;
}

std::string_view SnapshotStateName(SnapshotState state) {
  switch (state) {
    case SnapshotState::kLocal:
      return "local";
    case SnapshotState::kExporting:
      return "exporting";
    case SnapshotState::kRestorable:
      return "restorable";
    case SnapshotState::kFailed:
      return "failed";
    case SnapshotState::kDeleted:
      return "deleted";
  }
  return "failed";
}

SnapshotState ParseSnapshotState(std::string_view name) {
  if (name == "local") return SnapshotState::kLocal;
  if (name == "exporting") return SnapshotState::kExporting;
  if (name == "restorable") return SnapshotState::kRestorable;
  if (name == "deleted") return SnapshotState::kDeleted;
  return SnapshotState::kFailed;
}

std::string_view NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kReady:
      return "ready";
    case NodeState::kDraining:
      return "draining";
    case NodeState::kLost:
      return "lost";
  }
  return "lost";
}

// A state this version does not know reads as lost: such a node is never sent sandboxes.
NodeState ParseNodeState(std::string_view name) {
  if (name == "ready") return NodeState::kReady;
  if (name == "draining") return NodeState::kDraining;
  return NodeState::kLost;
}

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kPending:
      return "pending";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
  }
  return "failed";
}

JobState ParseJobState(std::string_view name) {
  if (name == "pending") return JobState::kPending;
  if (name == "succeeded") return JobState::kSucceeded;
  return JobState::kFailed;
}

}  // namespace space::store
