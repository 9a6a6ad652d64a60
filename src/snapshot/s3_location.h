// Where an S3 BlobStore lives and how it signs in: parsed from the operator's
// `--object-store s3://BUCKET/PREFIX?endpoint=URL&region=REGION` and the credentials that come
// from the environment or a file, never from the URL (a URL lands in logs, shell history and
// process listings; keys must not).
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace space::snapshot {

struct S3Location {
  std::string endpoint;  // scheme://host[:port], no trailing '/', no path
  std::string bucket;    // 3-63 of [a-z0-9.-]
  std::string prefix;    // "" or segments of [A-Za-z0-9._-] each followed by '/'
  std::string region = "us-east-1";

  // "s3://bucket/prefix/?endpoint=...&region=..." (no credentials: safe to log).
  std::string ToString() const;
};

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
};

// Parses the URL form above. `endpoint` is required (http or https); a query parameter other
// than endpoint and region, user info in either URL, or a query inside the endpoint are
// refused, so a secret pasted into the URL fails loudly instead of being logged.
Result<S3Location> ParseS3Location(std::string_view url);

// Credentials from `file` when it is not empty (JSON {"access_key_id", "secret_access_key"},
// which must not be readable by group or others), else from AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY in the environment.
Result<S3Credentials> LoadS3Credentials(const std::string& file);

}  // namespace space::snapshot
