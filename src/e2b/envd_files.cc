// envd's REST file transfer: GET /files (download) and POST /files (upload, multipart or
// raw), relayed to the guest through the Node.
#include "e2b/control_errors.h"
#include "e2b/e2b.h"
#include "e2b/multipart.h"
#include "e2b/proto_json.h"

namespace space::e2b {
namespace {

std::string BaseName(const std::string& path) {
  size_t end = path.find_last_not_of('/');
  if (end == std::string::npos) return "/";
  size_t slash = path.rfind('/', end);
  return path.substr(slash + 1, end - slash);
}

}  // namespace

void E2b::FilesDownload(api::Request& req, api::Responder& res, const Target& t) {
  if (!req.HasQuery("path")) return SendControlError(res, 400, "query parameter 'path' is required");
  auto path = ResolvePath(req.Query("path"), t.home);
  if (!path.ok()) return SendControlError(res, path.status());
  auto data = node_->io().ReadFile(t.team, t.id, *path);
  if (!data.ok()) return SendControlError(res, data.status());
  res.Send(200, "application/octet-stream", std::move(*data));
}

void E2b::FilesUpload(api::Request& req, api::Responder& res, const Target& t) {
  if (!req.Header("content-encoding").empty() && req.Header("content-encoding") != "identity") {
    return SendControlError(res, 400, "compressed uploads are not supported by SPACE; send the file uncompressed");
  }
  std::string query_path = req.Query("path");
  // (target path, data) for every file in the request.
  std::vector<std::pair<std::string, std::string_view>> files;
  std::string ct = req.Header("content-type");
  if (ct.compare(0, 19, "multipart/form-data") == 0) {
    auto boundary = MultipartBoundary(ct);
    if (!boundary.ok()) return SendControlError(res, boundary.status());
    auto parts = ParseMultipart(req.body, *boundary);
    if (!parts.ok()) return SendControlError(res, parts.status());
    for (const auto& p : *parts) {
      if (p.name != "file") continue;
      // ?path wins over the part's filename (envd's resolvePath); without it the filename
      // is the full sandbox path (writeFiles).
      std::string target = !query_path.empty() ? query_path : p.filename;
      if (target.empty()) return SendControlError(res, 400, "a file part has neither ?path nor a filename");
      files.emplace_back(target, p.data);
    }
  } else {
    if (query_path.empty()) return SendControlError(res, 400, "a raw upload needs the query parameter 'path'");
    files.emplace_back(query_path, req.body);
  }
  if (files.empty()) return SendControlError(res, 400, "the upload carries no file");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [target, data] : files) {
    auto path = ResolvePath(target, t.home);
    if (!path.ok()) return SendControlError(res, path.status());
    if (data.size() > node::kMaxFileBytes) return SendControlError(res, 413, "file exceeds 100 MiB");
    Status written = node_->io().WriteFile(t.team, t.id, *path, 0644, data, t.user == "root" ? "" : t.user);
    if (!written.ok()) return SendControlError(res, written);
    out.push_back({{"name", BaseName(*path)}, {"type", "file"}, {"path", *path}});
  }
  res.SendJson(200, out);
}

}  // namespace space::e2b
