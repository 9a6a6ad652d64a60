// S3BlobStore: a BlobStore in an S3 bucket (path-style requests, SigV4), the same key layout as
// the local store under an optional prefix.
//
// Signing is libcurl's own (CURLOPT_AWS_SIGV4, curl >= 7.75): it is the same code every curl
// user relies on, and Debian 12 packages no S3 SDK for C++. We supply what curl does not: the
// x-amz-content-sha256 header (the body's SHA-256 on every PUT, so the server rejects a body
// damaged on the way), a sorted, percent-encoded query string and an encoded path.
//
//   Put     one PUT, or a multipart upload above `multipart_threshold` (parts of `part_size`,
//           aborted when any part fails). Manifests and templates are written with
//           `If-None-Match: *`: a second writer of the same key with other bytes gets
//           kConflict instead of replacing what the first wrote (the same bytes again is OK),
//           so two nodes never corrupt one object. Chunk objects are content-addressed: every
//           writer of a key writes the same bytes.
//   Get     streams into the result and gives up as soon as more than `max_bytes` arrive.
//   List    ListObjectsV2, every page.
//   RemoveStaleTemp  aborts multipart uploads under the prefix initiated before the cutoff.
// Every request is retried on a transport error, 429, 500, 502, 503 or 504, with exponential
// backoff and jitter, up to `attempts` times; a transfer slower than 1 KiB/s for
// `stall_timeout_s` is a timeout. Requests, bytes and retries are counted (stats()).
// Thread-safe: each request uses its own curl easy handle, taken from a small pool so the
// connection to the server is reused.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "snapshot/blob_store.h"
#include "snapshot/s3_location.h"

namespace space::snapshot {

struct S3Options {
  size_t multipart_threshold = 32u << 20;  // larger values go up in parts
  size_t part_size = 8u << 20;             // S3's minimum part is 5 MiB (but the last)
  int attempts = 5;
  int backoff_ms = 100;  // first retry's wait; doubles, with jitter
  int connect_timeout_ms = 5000;
  int stall_timeout_s = 30;
  int list_page_keys = 1000;  // max-keys of one List page
};

struct S3Stats {
  uint64_t requests = 0;
  uint64_t retries = 0;
  uint64_t failures = 0;  // requests that failed after every attempt
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

class S3BlobStore final : public BlobStore {
 public:
  // Checks the bucket answers (a HEAD on it) with these credentials, so a wrong endpoint, key
  // or bucket fails at start-up with the server's reason.
  static Result<std::unique_ptr<S3BlobStore>> Open(const S3Location& location, const S3Credentials& credentials,
                                                   const S3Options& options = {});
  ~S3BlobStore() override;

  Status Put(const std::string& key, std::string_view bytes) override;
  Result<std::string> Get(const std::string& key, size_t max_bytes) override;
  Result<bool> Exists(const std::string& key) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<std::string>> List(std::string_view prefix) override;
  Result<uint64_t> RemoveStaleTemp(int64_t older_than_ms) override;

  S3Stats stats() const;
  const S3Location& location() const { return location_; }

  struct Request;  // one HTTP exchange (s3_blob_store.cc)
  struct Response;

 private:
  S3BlobStore(S3Location location, S3Credentials credentials, S3Options options);

  // Runs `req` with retries; the last response (or the transport error) comes back.
  Result<Response> Send(const Request& req);
  Result<Response> SendOnce(const Request& req);
  CURL* TakeHandle();
  void ReturnHandle(CURL* h);

  Status PutMultipart(const std::string& object, std::string_view bytes);
  Status PutIfAbsent(const std::string& key, std::string_view bytes);

  S3Location location_;
  S3Credentials credentials_;
  S3Options options_;
  std::mutex handles_mu_;
  std::vector<CURL*> handles_;  // idle easy handles, each keeping its connection

  std::atomic<uint64_t> requests_{0}, retries_{0}, failures_{0}, bytes_sent_{0}, bytes_received_{0};
};

}  // namespace space::snapshot
