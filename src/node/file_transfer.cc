#include "node/file_transfer.h"

#include "node/guest_error.h"

namespace space::node {

Result<nlohmann::json> FileTransfer::WaitResult(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return result_ || !error_.ok(); })) {
    return Unavailable("the guest did not answer the file operation in time");
  }
  if (result_) return *result_;
  return error_;
}

Result<std::string> FileTransfer::WaitBody(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return body_done_ || !error_.ok(); })) {
    return Unavailable("the guest did not finish sending the file in time");
  }
  if (!error_.ok()) return error_;
  return std::move(body_);
}

void FileTransfer::OnFrame(guest::Frame frame) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok() || body_done_) return;
  switch (frame.type) {
    case guest::FrameType::kFileResult: {
      if (result_) break;
      auto j = nlohmann::json::parse(frame.payload, nullptr, false);
      if (!j.is_object()) {
        error_ = Internal("the guest sent a malformed file result");
      } else {
        result_ = std::move(j);
      }
      break;
    }
    case guest::FrameType::kFileData:
      if (!result_) {
        error_ = Internal("the guest sent file data before its result");
      } else if (frame.payload.empty()) {
        body_done_ = true;
      } else if (body_.size() + frame.payload.size() > max_body_bytes_) {
        error_ = PayloadTooLarge("file is larger than the " + std::to_string(max_body_bytes_ >> 20) +
                                 " MiB a single transfer may move");
      } else {
        body_ += frame.payload;
      }
      break;
    case guest::FrameType::kError: {
      // Only the words a file operation may legitimately fail with are honoured.
      error_ = GuestErrorStatus(frame.payload, "file operation failed in the guest",
                                {StatusCode::kNotFound, StatusCode::kInvalidArgument, StatusCode::kConflict,
                                 StatusCode::kPermissionDenied, StatusCode::kResourceExhausted});
      break;
    }
    default:
      break;
  }
  cv_.notify_all();
}

void FileTransfer::OnChannelClosed(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok() && !body_done_) error_ = why;
  cv_.notify_all();
}

}  // namespace space::node
