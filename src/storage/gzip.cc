#include "storage/gzip.h"

#include <zlib.h>

namespace space::storage {

bool IsGzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b;
}

Result<std::string> Inflate(std::string_view in, size_t cap, const std::string& what) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return Internal("inflateInit2 failed");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  char buf[1 << 16];
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      return InvalidArgument(what + " is not valid gzip");
    }
    out.append(buf, sizeof(buf) - z.avail_out);
    if (out.size() > cap) {
      inflateEnd(&z);
      return InvalidArgument(what + " inflates to more than " + std::to_string(cap) + " bytes");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      return InvalidArgument(what + " is truncated gzip");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace space::storage
