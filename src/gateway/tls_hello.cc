#include "gateway/tls_hello.h"

#include <cctype>
#include <cstdint>

namespace space::gateway {
namespace {

class Reader {
 public:
  explicit Reader(std::string_view d) : d_(d) {}
  bool U8(size_t* v) {
    if (d_.size() < 1) return false;
    *v = static_cast<uint8_t>(d_[0]);
    d_.remove_prefix(1);
    return true;
  }
  bool U16(size_t* v) {
    if (d_.size() < 2) return false;
    *v = static_cast<size_t>(static_cast<uint8_t>(d_[0]) << 8 | static_cast<uint8_t>(d_[1]));
    d_.remove_prefix(2);
    return true;
  }
  bool U24(size_t* v) {
    if (d_.size() < 3) return false;
    *v = static_cast<size_t>(static_cast<uint8_t>(d_[0])) << 16 | static_cast<size_t>(static_cast<uint8_t>(d_[1])) << 8 |
         static_cast<uint8_t>(d_[2]);
    d_.remove_prefix(3);
    return true;
  }
  bool Skip(size_t n) {
    if (d_.size() < n) return false;
    d_.remove_prefix(n);
    return true;
  }
  bool Sub(size_t n, Reader* out) {
    if (d_.size() < n) return false;
    *out = Reader(d_.substr(0, n));
    d_.remove_prefix(n);
    return true;
  }
  bool empty() const { return d_.empty(); }
  std::string_view rest() const { return d_; }

 private:
  std::string_view d_;
};

}  // namespace

HelloResult ParseClientHelloSni(std::string_view data, std::string* sni) {
  if (data.size() < 5) {
    // Decide early on what cannot be TLS, so a plain client is not kept waiting.
    if (!data.empty() && data[0] != 0x16) return HelloResult::kNotTls;
    return HelloResult::kNeedMore;
  }
  if (data[0] != 0x16 || data[1] != 0x03) return HelloResult::kNotTls;
  size_t rec_len = static_cast<size_t>(static_cast<uint8_t>(data[3]) << 8 | static_cast<uint8_t>(data[4]));
  if (rec_len == 0 || rec_len > 16384) return HelloResult::kNotTls;
  if (data.size() < 5 + rec_len) return HelloResult::kNeedMore;
  Reader r(data.substr(5, rec_len));
  size_t type, len, v;
  if (!r.U8(&type) || type != 1 || !r.U24(&len)) return HelloResult::kNotTls;
  Reader hello(std::string_view{});
  // A ClientHello split over several records: its extensions are cut off, so there is no
  // name to read; the caller treats that like a missing SNI (refused unless CIDR allows).
  if (!r.Sub(len, &hello)) return HelloResult::kNoSni;
  if (!hello.Skip(2 + 32)) return HelloResult::kNotTls;           // version, random
  if (!hello.U8(&v) || !hello.Skip(v)) return HelloResult::kNotTls;   // session id
  if (!hello.U16(&v) || !hello.Skip(v)) return HelloResult::kNotTls;  // cipher suites
  if (!hello.U8(&v) || !hello.Skip(v)) return HelloResult::kNotTls;   // compression
  if (hello.empty()) return HelloResult::kNoSni;
  Reader exts(std::string_view{});
  if (!hello.U16(&len) || !hello.Sub(len, &exts)) return HelloResult::kNotTls;
  while (!exts.empty()) {
    size_t ext_type, ext_len;
    Reader ext(std::string_view{});
    if (!exts.U16(&ext_type) || !exts.U16(&ext_len) || !exts.Sub(ext_len, &ext)) return HelloResult::kNotTls;
    if (ext_type != 0) continue;
    Reader list(std::string_view{});
    if (!ext.U16(&len) || !ext.Sub(len, &list)) return HelloResult::kNotTls;
    while (!list.empty()) {
      size_t name_type, name_len;
      if (!list.U8(&name_type) || !list.U16(&name_len)) return HelloResult::kNotTls;
      Reader name(std::string_view{});
      if (!list.Sub(name_len, &name)) return HelloResult::kNotTls;
      if (name_type != 0) continue;
      if (name_len == 0 || name_len > 253) return HelloResult::kNotTls;
      sni->clear();
      for (char c : name.rest()) sni->push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
      return HelloResult::kSni;
    }
    return HelloResult::kNoSni;
  }
  return HelloResult::kNoSni;
}

}  // namespace space::gateway
