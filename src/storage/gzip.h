// gzip (or zlib) streams from hostile clients (image layers, E2B template uploads), inflated
// with a cap on what comes out: a small input may inflate to anything. Stateless.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace space::storage {

// True when `data` starts with the gzip magic bytes.
bool IsGzip(std::string_view data);

// The inflated bytes of `in`; invalid_argument, naming `what`, for a stream that is not
// gzip or zlib, is truncated, or inflates to more than `cap` bytes.
Result<std::string> Inflate(std::string_view in, size_t cap, const std::string& what);

}  // namespace space::storage
