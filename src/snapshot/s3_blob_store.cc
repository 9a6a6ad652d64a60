#include "snapshot/s3_blob_store.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/hmac.h"
#include "common/random.h"

namespace space::snapshot {

struct S3BlobStore::Request {
  std::string method = "GET";                              // GET HEAD PUT POST DELETE
  std::string object;                                      // key under the bucket ("" = the bucket)
  std::vector<std::pair<std::string, std::string>> query;  // unencoded; sorted before signing
  std::vector<std::string> headers;                        // "Name: value"
  std::string_view body;
  size_t max_response = 1u << 20;  // more is an error (PayloadTooLarge)
};

struct S3BlobStore::Response {
  long status = 0;
  std::string body;
  std::string etag;
};

namespace {

constexpr size_t kMaxErrorBody = 64 * 1024;
constexpr size_t kMaxListPage = 16u << 20;  // a ListObjectsV2 page of 1000 keys is ~300 KiB
constexpr int kMaxListPages = 1 << 20;

bool Unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == '~';
}

// RFC 3986 percent-encoding as SigV4 wants it (uppercase hex); '/' kept in paths only.
std::string Encode(std::string_view s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (Unreserved(ch) || (keep_slash && ch == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string XmlUnescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    static const std::pair<std::string_view, char> kEntities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool matched = false;
    for (const auto& [entity, ch] : kEntities) {
      if (s.substr(i, entity.size()) == entity) {
        out += ch;
        i += entity.size() - 1;
        matched = true;
        break;
      }
    }
    if (!matched) out += s[i];
  }
  return out;
}

// The text of every <tag>...</tag> in `xml` at any depth, in order. The server is not trusted:
// callers validate what comes out (keys against the layout, ids by use).
std::vector<std::string> XmlValues(std::string_view xml, std::string_view tag) {
  std::vector<std::string> out;
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  while ((pos = xml.find(open, pos)) != std::string_view::npos) {
    const size_t start = pos + open.size();
    const size_t end = xml.find(close, start);
    if (end == std::string_view::npos) break;
    out.push_back(XmlUnescape(xml.substr(start, end - start)));
    pos = end + close.size();
  }
  return out;
}

std::string XmlValue(std::string_view xml, std::string_view tag) {
  auto v = XmlValues(xml, tag);
  return v.empty() ? std::string() : v.front();
}

// The server's reason for a failed request, for the operator: "HTTP 403 SignatureDoesNotMatch".
std::string Reason(const S3BlobStore::Response& r) {
  std::string reason = "HTTP " + std::to_string(r.status);
  const std::string code = XmlValue(r.body, "Code");
  if (!code.empty()) reason += " " + code.substr(0, 128);
  const std::string message = XmlValue(r.body, "Message");
  if (!message.empty()) reason += ": " + message.substr(0, 256);
  return reason;
}

Status StatusFor(const S3BlobStore::Response& r, const std::string& what) {
  const std::string m = what + ": " + Reason(r);
  switch (r.status) {
    case 404:
      return NotFound(m);
    case 401:
    case 403:
      return PermissionDenied(m);
    case 409:
    case 412:
      return Conflict(m);
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return Unavailable(m);
    default:
      return Internal(m);
  }
}

bool Retryable(long status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

bool RetryableCurl(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_COULDNT_RESOLVE_HOST:
      return true;
    default:
      return false;
  }
}

struct Sink {
  std::string* body;
  size_t max;
  bool too_large = false;
  std::string* etag;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t len = size * n;
  if (s->body->size() + len > s->max) {
    s->too_large = true;
    return 0;  // aborts the transfer: never hold more than asked for
  }
  s->body->append(data, len);
  return len;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t len = size * n;
  std::string_view line(data, len);
  constexpr std::string_view kEtag = "etag:";
  if (line.size() > kEtag.size() && line.size() < 512) {
    std::string lower(line.substr(0, kEtag.size()));
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower == kEtag) {
      std::string_view v = line.substr(kEtag.size());
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
      *s->etag = std::string(v);
    }
  }
  return len;
}

const std::string kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

}  // namespace

S3BlobStore::S3BlobStore(S3Location location, S3Credentials credentials, S3Options options)
    : location_(std::move(location)), credentials_(std::move(credentials)), options_(options) {}

S3BlobStore::~S3BlobStore() {
  for (CURL* h : handles_) curl_easy_cleanup(h);
}

Result<std::unique_ptr<S3BlobStore>> S3BlobStore::Open(const S3Location& location, const S3Credentials& credentials,
                                                       const S3Options& options) {
  // Once per process, before any thread makes a handle (curl_global_init is not thread-safe).
  static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (global != CURLE_OK) return Internal(std::string("curl_global_init: ") + curl_easy_strerror(global));
  std::unique_ptr<S3BlobStore> store(new S3BlobStore(location, credentials, options));
  Request head;
  head.method = "HEAD";
  ASSIGN_OR_RETURN(Response r, store->Send(head));
  if (r.status != 200) {
    return StatusFor(r, "object store " + location.ToString() + ": bucket " + location.bucket + " did not answer");
  }
  return store;
}

CURL* S3BlobStore::TakeHandle() {
  {
    std::lock_guard<std::mutex> lock(handles_mu_);
    if (!handles_.empty()) {
      CURL* h = handles_.back();
      handles_.pop_back();
      curl_easy_reset(h);  // keeps the live connection and the DNS cache
      return h;
    }
  }
  return curl_easy_init();
}

void S3BlobStore::ReturnHandle(CURL* h) {
  std::lock_guard<std::mutex> lock(handles_mu_);
  if (handles_.size() < 16) {
    handles_.push_back(h);
    return;
  }
  curl_easy_cleanup(h);
}

Result<S3BlobStore::Response> S3BlobStore::SendOnce(const Request& req) {
  CURL* h = TakeHandle();
  if (h == nullptr) return Internal("curl_easy_init failed");
  std::string url = location_.endpoint + "/" + location_.bucket;
  if (!req.object.empty()) url += "/" + Encode(req.object, /*keep_slash=*/true);
  if (!req.query.empty()) {
    auto query = req.query;
    std::sort(query.begin(), query.end());
    for (size_t i = 0; i < query.size(); ++i) {
      // A parameter without a value still needs its '=' (SigV4's canonical query string).
      url += (i == 0 ? "?" : "&") + Encode(query[i].first, false) + "=" + Encode(query[i].second, false);
    }
  }
  const std::string sigv4 = "aws:amz:" + location_.region + ":s3";
  curl_slist* headers = nullptr;
  const std::string content_sha = "x-amz-content-sha256: " + (req.body.empty() ? kEmptySha256 : Sha256Hex(req.body));
  headers = curl_slist_append(headers, content_sha.c_str());
  for (const auto& hdr : req.headers) headers = curl_slist_append(headers, hdr.c_str());
  Response resp;
  Sink sink{.body = &resp.body, .max = std::max(req.max_response, kMaxErrorBody), .etag = &resp.etag};

  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(h, CURLOPT_USERNAME, credentials_.access_key_id.c_str());
  curl_easy_setopt(h, CURLOPT_PASSWORD, credentials_.secret_access_key.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.stall_timeout_s));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &sink);
  if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method == "PUT" || req.method == "POST") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  requests_++;
  const CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp.status);
  curl_off_t up = 0, down = 0;
  curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
  curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down);
  bytes_sent_ += static_cast<uint64_t>(up);
  bytes_received_ += static_cast<uint64_t>(down);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    curl_easy_cleanup(h);  // its connection may be half-used: not worth keeping
    if (sink.too_large) {
      return PayloadTooLarge(req.method + " " + req.object + ": the response is larger than " +
                             std::to_string(sink.max) + " bytes");
    }
    const Status st = Unavailable(req.method + " " + location_.endpoint + "/" + location_.bucket + "/" + req.object +
                                  ": " + curl_easy_strerror(rc));
    if (RetryableCurl(rc)) return st;
    return Internal(st.message());
  }
  ReturnHandle(h);
  return resp;
}

Result<S3BlobStore::Response> S3BlobStore::Send(const Request& req) {
  Result<Response> last = Internal("not sent");
  for (int attempt = 0; attempt < std::max(1, options_.attempts); ++attempt) {
    if (attempt > 0) {
      retries_++;
      const int base = options_.backoff_ms << std::min(attempt - 1, 10);
      const int jitter = static_cast<int>(std::stoul(RandomHex(2), nullptr, 16) % static_cast<unsigned>(base + 1));
      std::this_thread::sleep_for(std::chrono::milliseconds(base + jitter));
    }
    last = SendOnce(req);
    if (last.ok() ? !Retryable(last->status) : last.status().code() != StatusCode::kUnavailable) return last;
  }
  failures_++;
  return last;
}

S3Stats S3BlobStore::stats() const {
  return {.requests = requests_.load(),
          .retries = retries_.load(),
          .failures = failures_.load(),
          .bytes_sent = bytes_sent_.load(),
          .bytes_received = bytes_received_.load()};
}

Status S3BlobStore::Put(const std::string& key, std::string_view bytes) {
  RETURN_IF_ERROR(ValidateKey(key));
  if (SnapIdFromManifestKey(key).ok()) return PutIfAbsent(key, bytes);
  if (bytes.size() > options_.multipart_threshold) return PutMultipart(location_.prefix + key, bytes);
  Request put;
  put.method = "PUT";
  put.object = location_.prefix + key;
  put.body = bytes;
  put.headers = {"Content-Type: application/octet-stream"};
  ASSIGN_OR_RETURN(Response r, Send(put));
  if (r.status != 200) return StatusFor(r, "put " + key);
  return Status::Ok();
}

Status S3BlobStore::PutIfAbsent(const std::string& key, std::string_view bytes) {
  Request put;
  put.method = "PUT";
  put.object = location_.prefix + key;
  put.body = bytes;
  put.headers = {"Content-Type: application/octet-stream", "If-None-Match: *"};
  ASSIGN_OR_RETURN(Response r, Send(put));
  if (r.status == 200) return Status::Ok();
  if (r.status != 412) return StatusFor(r, "put " + key);
  // Already there: a retry of our own write (its first answer lost) is fine, another writer's
  // different value is not to be replaced.
  ASSIGN_OR_RETURN(std::string have, Get(key, bytes.size() + 1));
  if (have == bytes) return Status::Ok();
  return Conflict("put " + key + ": another writer already stored different bytes under this key");
}

Status S3BlobStore::PutMultipart(const std::string& object, std::string_view bytes) {
  Request init;
  init.method = "POST";
  init.object = object;
  init.query = {{"uploads", ""}};
  init.headers = {"Content-Type: application/octet-stream"};
  ASSIGN_OR_RETURN(Response ir, Send(init));
  if (ir.status != 200) return StatusFor(ir, "initiate multipart upload of " + object);
  const std::string upload_id = XmlValue(ir.body, "UploadId");
  if (upload_id.empty() || upload_id.size() > 1024)
    return Internal("initiate multipart upload of " + object + ": no UploadId");
  auto abort = [&](Status why) {
    Request del;
    del.method = "DELETE";
    del.object = object;
    del.query = {{"uploadId", upload_id}};
    (void)Send(del);  // best effort: RemoveStaleTemp aborts what is left
    return why;
  };
  std::string complete = "<CompleteMultipartUpload>";
  const size_t part = std::max<size_t>(options_.part_size, 5u << 20);
  int number = 1;
  for (size_t off = 0; off < bytes.size(); off += part, ++number) {
    Request up;
    up.method = "PUT";
    up.object = object;
    up.query = {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}};
    up.body = bytes.substr(off, part);
    Result<Response> ur = Send(up);
    if (!ur.ok()) return abort(ur.status().Annotate("upload part " + std::to_string(number) + " of " + object));
    if (ur->status != 200 || ur->etag.empty()) {
      return abort(StatusFor(*ur, "upload part " + std::to_string(number) + " of " + object));
    }
    complete += "<Part><PartNumber>" + std::to_string(number) + "</PartNumber><ETag>" + ur->etag + "</ETag></Part>";
  }
  complete += "</CompleteMultipartUpload>";
  Request done;
  done.method = "POST";
  done.object = object;
  done.query = {{"uploadId", upload_id}};
  done.body = complete;
  done.headers = {"Content-Type: application/xml"};
  Result<Response> dr = Send(done);
  if (!dr.ok()) return abort(dr.status().Annotate("complete multipart upload of " + object));
  // S3 may answer 200 and still report an error in the body.
  if (dr->status != 200 || dr->body.find("<Error>") != std::string::npos) {
    return abort(StatusFor(*dr, "complete multipart upload of " + object));
  }
  return Status::Ok();
}

Result<std::string> S3BlobStore::Get(const std::string& key, size_t max_bytes) {
  RETURN_IF_ERROR(ValidateKey(key));
  Request get;
  get.object = location_.prefix + key;
  get.max_response = max_bytes;
  Result<Response> r = Send(get);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kPayloadTooLarge) {
      return PayloadTooLarge("get " + key + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
    return r.status();
  }
  if (r->status != 200) return StatusFor(*r, "get " + key);
  if (r->body.size() > max_bytes) {  // an error-sized allowance above a tiny max_bytes
    return PayloadTooLarge("get " + key + ": larger than " + std::to_string(max_bytes) + " bytes");
  }
  return std::move(r->body);
}

Result<bool> S3BlobStore::Exists(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  Request head;
  head.method = "HEAD";
  head.object = location_.prefix + key;
  ASSIGN_OR_RETURN(Response r, Send(head));
  if (r.status == 200) return true;
  if (r.status == 404) return false;
  return StatusFor(r, "head " + key);
}

Status S3BlobStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  Request del;
  del.method = "DELETE";
  del.object = location_.prefix + key;
  ASSIGN_OR_RETURN(Response r, Send(del));
  if (r.status == 200 || r.status == 204 || r.status == 404) return Status::Ok();
  return StatusFor(r, "delete " + key);
}

Result<std::vector<std::string>> S3BlobStore::List(std::string_view prefix) {
  std::vector<std::string> keys;
  std::string token;
  for (int page = 0; page < kMaxListPages; ++page) {
    Request list;
    list.query = {{"list-type", "2"},
                  {"max-keys", std::to_string(options_.list_page_keys)},
                  {"prefix", location_.prefix + std::string(prefix)}};
    if (!token.empty()) list.query.emplace_back("continuation-token", token);
    list.max_response = kMaxListPage;
    ASSIGN_OR_RETURN(Response r, Send(list));
    if (r.status != 200) return StatusFor(r, "list " + std::string(prefix));
    for (std::string& full : XmlValues(r.body, "Key")) {
      if (full.compare(0, location_.prefix.size(), location_.prefix) != 0) continue;
      std::string key = full.substr(location_.prefix.size());
      // Anything else in the bucket (an operator's file, a hostile name) is not a key.
      if (ValidateKey(key).ok() && key.compare(0, prefix.size(), prefix) == 0) keys.push_back(std::move(key));
    }
    if (XmlValue(r.body, "IsTruncated") != "true") return keys;
    std::string next = XmlValue(r.body, "NextContinuationToken");
    if (next.empty() || next == token)
      return Internal("list " + std::string(prefix) + ": the server's page token does not advance");
    token = std::move(next);
  }
  return Internal("list " + std::string(prefix) + ": more than " + std::to_string(kMaxListPages) + " pages");
}

Result<uint64_t> S3BlobStore::RemoveStaleTemp(int64_t older_than_ms) {
  const int64_t cutoff = WallNowMs() - older_than_ms;
  uint64_t removed = 0;
  std::string key_marker, id_marker;
  for (int page = 0; page < kMaxListPages; ++page) {
    Request list;
    list.query = {{"uploads", ""}, {"prefix", location_.prefix}};
    if (!key_marker.empty()) {
      list.query.emplace_back("key-marker", key_marker);
      list.query.emplace_back("upload-id-marker", id_marker);
    }
    list.max_response = kMaxListPage;
    ASSIGN_OR_RETURN(Response r, Send(list));
    if (r.status != 200) return StatusFor(r, "list multipart uploads");
    for (const std::string& upload : XmlValues(r.body, "Upload")) {
      const std::string key = XmlValue(upload, "Key"), id = XmlValue(upload, "UploadId");
      Result<int64_t> initiated = ParseRfc3339Utc(XmlValue(upload, "Initiated"));
      if (key.empty() || id.empty() || !initiated.ok() || *initiated > cutoff) continue;
      // The server's word names the path aborted: only an object key of this store's layout
      // (no "..", no other bucket), as the uploads this store starts are.
      if (key.compare(0, location_.prefix.size(), location_.prefix) != 0) continue;
      if (!ValidateKey(key.substr(location_.prefix.size())).ok()) continue;
      Request del;
      del.method = "DELETE";
      del.object = key;
      del.query = {{"uploadId", id}};
      ASSIGN_OR_RETURN(Response d, Send(del));
      if (d.status != 204 && d.status != 200 && d.status != 404) return StatusFor(d, "abort upload of " + key);
      ++removed;
    }
    if (XmlValue(r.body, "IsTruncated") != "true") return removed;
    std::string next_key = XmlValue(r.body, "NextKeyMarker"), next_id = XmlValue(r.body, "NextUploadIdMarker");
    if (next_key.empty() || (next_key == key_marker && next_id == id_marker)) return removed;
    key_marker = std::move(next_key);
    id_marker = std::move(next_id);
  }
  return removed;
}

}  // namespace space::snapshot
