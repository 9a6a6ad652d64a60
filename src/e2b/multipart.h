// multipart/form-data bodies (RFC 7578) as the SDK's uploads send them: one part per file,
// name="file", filename = the sandbox path. Hostile input: the boundary, the number of
// parts and each part's header block are bounded, and parts never read past the body.
// Stateless and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace space::e2b {

inline constexpr size_t kMaxParts = 1000;
inline constexpr size_t kMaxPartHeaderBytes = 16 * 1024;

struct Part {
  std::string name;      // form field name
  std::string filename;  // "" when absent
  std::string_view data; // points into the body passed to ParseMultipart
};

// The boundary parameter of a multipart/form-data Content-Type; invalid_argument otherwise.
Result<std::string> MultipartBoundary(std::string_view content_type);

// Splits `body` into parts. The returned views point into `body`.
Result<std::vector<Part>> ParseMultipart(std::string_view body, std::string_view boundary);

}  // namespace space::e2b
