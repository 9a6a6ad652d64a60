#include "node/guest_files.h"

#include <memory>

#include "node/file_transfer.h"

namespace space::node {
namespace {

constexpr int64_t kGuestAnswerMs = 15000;

// One file op with no body either way: its JSON result.
Result<nlohmann::json> RunFileOp(LiveSandbox* live, const nlohmann::json& request) {
  auto t = std::make_shared<FileTransfer>(0);
  uint32_t stream = live->guest->OpenStream(t);
  Status st = live->guest->Send(guest::FrameType::kFileOp, stream, request.dump());
  Result<nlohmann::json> res = st;
  if (st.ok()) res = t->WaitResult(kGuestAnswerMs * 4);
  live->guest->CloseStream(stream);
  return res;
}

Result<std::string> BoundedString(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_string() || it->get_ref<const std::string&>().size() > 4096) {
    return Internal(std::string("the guest sent a file entry without a valid '") + key + "'");
  }
  return it->get<std::string>();
}

Result<uint64_t> Unsigned(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_number_unsigned()) {
    return Internal(std::string("the guest sent a file entry without a valid '") + key + "'");
  }
  return it->get<uint64_t>();
}

}  // namespace

Result<FileEntry> ParseFileEntry(const nlohmann::json& e) {
  if (!e.is_object()) return Internal("the guest sent a malformed file entry");
  FileEntry out;
  ASSIGN_OR_RETURN(out.name, BoundedString(e, "name"));
  ASSIGN_OR_RETURN(out.path, BoundedString(e, "path"));
  ASSIGN_OR_RETURN(out.mtime, BoundedString(e, "mtime"));
  ASSIGN_OR_RETURN(std::string type, BoundedString(e, "type"));
  if (type == "file") {
    out.type = FileType::kFile;
  } else if (type == "dir") {
    out.type = FileType::kDir;
  } else if (type == "symlink") {
    out.type = FileType::kSymlink;
  } else if (type == "other") {
    out.type = FileType::kOther;
  } else {
    return Internal("the guest sent a file entry of unknown type");
  }
  ASSIGN_OR_RETURN(out.size, Unsigned(e, "size"));
  ASSIGN_OR_RETURN(uint64_t mode, Unsigned(e, "mode"));
  out.mode = static_cast<uint32_t>(mode & 07777);
  // Owners are optional: shown when the guest gave them, as numbers within uid_t.
  for (auto [key, field] : {std::pair{"uid", &out.uid}, std::pair{"gid", &out.gid}}) {
    auto it = e.find(key);
    if (it != e.end() && it->is_number_unsigned() && it->get<uint64_t>() <= 0xffffffffu) {
      *field = static_cast<int64_t>(it->get<uint64_t>());
    }
  }
  return out;
}

Result<std::string> GuestReadFile(LiveSandbox* live, const std::string& path) {
  auto t = std::make_shared<FileTransfer>(kMaxFileBytes);
  uint32_t stream = live->guest->OpenStream(t);
  Status st =
      live->guest->Send(guest::FrameType::kFileOp, stream, nlohmann::json{{"op", "read"}, {"path", path}}.dump());
  Result<std::string> body = st;
  if (st.ok()) {
    auto res = t->WaitResult(kGuestAnswerMs);
    body = res.ok() ? t->WaitBody(kGuestAnswerMs * 8) : Result<std::string>(res.status());
  }
  live->guest->CloseStream(stream);
  return body;
}

Status GuestWriteFile(LiveSandbox* live, const std::string& path, int mode, std::string_view data,
                      const std::string& owner) {
  if (data.size() > kMaxFileBytes) return PayloadTooLarge("file exceeds 100 MiB");
  auto t = std::make_shared<FileTransfer>(0);
  uint32_t stream = live->guest->OpenStream(t);
  auto send_all = [&]() -> Status {
    nlohmann::json op = {{"op", "write"}, {"path", path}, {"mode", mode}};
    if (!owner.empty()) op["owner"] = owner;
    RETURN_IF_ERROR(live->guest->Send(guest::FrameType::kFileOp, stream, op.dump()));
    for (size_t off = 0; off < data.size(); off += guest::kChunkSize) {
      RETURN_IF_ERROR(live->guest->Send(guest::FrameType::kFileData, stream, data.substr(off, guest::kChunkSize)));
    }
    return live->guest->Send(guest::FrameType::kFileData, stream, "");
  };
  Status st = send_all();
  if (st.ok()) st = t->WaitResult(kGuestAnswerMs * 4).status();
  live->guest->CloseStream(stream);
  return st;
}

Result<FileEntry> GuestStat(LiveSandbox* live, const std::string& path) {
  ASSIGN_OR_RETURN(nlohmann::json r, RunFileOp(live, {{"op", "stat"}, {"path", path}}));
  return ParseFileEntry(r);
}

Result<std::vector<FileEntry>> GuestList(LiveSandbox* live, const std::string& path, int depth) {
  if (depth < 1 || depth > 8) return InvalidArgument("depth must be between 1 and 8");
  ASSIGN_OR_RETURN(nlohmann::json r, RunFileOp(live, {{"op", "list"}, {"path", path}, {"depth", depth}}));
  auto it = r.find("entries");
  if (it == r.end() || !it->is_array()) return Internal("the guest sent a malformed directory listing");
  std::vector<FileEntry> out;
  out.reserve(it->size());
  for (const auto& e : *it) {
    ASSIGN_OR_RETURN(FileEntry entry, ParseFileEntry(e));
    out.push_back(std::move(entry));
  }
  return out;
}

Status GuestMakeDir(LiveSandbox* live, const std::string& path, const std::string& owner) {
  nlohmann::json op = {{"op", "mkdir"}, {"path", path}};
  if (!owner.empty()) op["owner"] = owner;
  return RunFileOp(live, op).status();
}

Status GuestMove(LiveSandbox* live, const std::string& from, const std::string& to) {
  return RunFileOp(live, {{"op", "move"}, {"path", from}, {"to", to}}).status();
}

Status GuestRemove(LiveSandbox* live, const std::string& path, bool recursive) {
  return RunFileOp(live, {{"op", "delete"}, {"path", path}, {"recursive", recursive}}).status();
}

}  // namespace space::node
