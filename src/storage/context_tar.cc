#include "storage/context_tar.h"

#include <algorithm>
#include <optional>

#include "storage/digest.h"

namespace space::storage {
namespace {

constexpr size_t kBlock = 512;
constexpr size_t kMaxExtHeader = 1 << 20;  // a pax or GNU long-name record

bool AllZero(std::string_view block) {
  return std::all_of(block.begin(), block.end(), [](char c) { return c == 0; });
}

std::string Field(std::string_view block, size_t off, size_t len) {
  std::string_view f = block.substr(off, len);
  size_t nul = f.find('\0');
  return std::string(f.substr(0, nul));
}

// An octal field (NUL/space padded), or GNU base-256 when the first byte's high bit is set.
Result<uint64_t> Number(std::string_view block, size_t off, size_t len, const char* what) {
  std::string_view f = block.substr(off, len);
  if (!f.empty() && (static_cast<unsigned char>(f[0]) & 0x80)) {
    uint64_t v = static_cast<unsigned char>(f[0]) & 0x7f;
    for (size_t i = 1; i < f.size(); ++i) {
      if (v >> 55) return InvalidArgument(std::string("tar: ") + what + " is too large");
      v = (v << 8) | static_cast<unsigned char>(f[i]);
    }
    return v;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  for (; i < f.size() && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 60) return InvalidArgument(std::string("tar: ") + what + " is too large");
    v = v * 8 + static_cast<uint64_t>(f[i] - '0');
  }
  for (; i < f.size(); ++i) {
    if (f[i] != ' ' && f[i] != '\0') return InvalidArgument(std::string("tar: ") + what + " is not an octal number");
  }
  return v;
}

Status CheckSum(std::string_view block) {
  ASSIGN_OR_RETURN(uint64_t want, Number(block, 148, 8, "checksum"));
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const char c = (i >= 148 && i < 156) ? ' ' : block[i];
    unsigned_sum += static_cast<unsigned char>(c);
    signed_sum += static_cast<signed char>(c);
  }
  if (want != unsigned_sum && static_cast<int64_t>(want) != signed_sum)
    return InvalidArgument("tar: bad header checksum");
  return Status::Ok();
}

// "./a//b/" -> "a/b"; "" or "./" -> "."; refuses "..", absolute names and NUL.
Result<std::string> Normalize(const std::string& raw) {
  if (raw.find('\0') != std::string::npos) return InvalidArgument("tar: a member name holds a NUL byte");
  if (!raw.empty() && raw[0] == '/') return InvalidArgument("tar: member '" + raw.substr(0, 200) + "' is absolute");
  std::string out;
  size_t start = 0;
  while (start <= raw.size()) {
    size_t slash = raw.find('/', start);
    if (slash == std::string::npos) slash = raw.size();
    std::string part = raw.substr(start, slash - start);
    if (part == "..") return InvalidArgument("tar: member '" + raw.substr(0, 200) + "' contains '..'");
    if (!part.empty() && part != ".") {
      if (!out.empty()) out += '/';
      out += part;
    }
    start = slash + 1;
  }
  return out.empty() ? std::string(".") : out;
}

// Applies the records of a pax extended header ("<len> <key>=<value>\n") we act on.
struct PaxValues {
  std::string path, link;
  std::optional<uint64_t> size, uid, gid;
};

Result<uint64_t> PaxNumber(const std::string& value, const char* what) {
  uint64_t v = 0;
  if (value.empty() || value.size() > 18) return InvalidArgument(std::string("tar: bad pax ") + what);
  for (char c : value) {
    if (c < '0' || c > '9') return InvalidArgument(std::string("tar: bad pax ") + what);
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

Status ParsePax(std::string_view data, PaxValues* pax) {
  while (!data.empty()) {
    size_t space = data.find(' ');
    if (space == std::string_view::npos || space == 0 || space > 20) return InvalidArgument("tar: bad pax record");
    uint64_t len = 0;
    for (size_t i = 0; i < space; ++i) {
      if (data[i] < '0' || data[i] > '9') return InvalidArgument("tar: bad pax record length");
      len = len * 10 + static_cast<uint64_t>(data[i] - '0');
    }
    if (len <= space + 1 || len > data.size() || data[len - 1] != '\n') return InvalidArgument("tar: bad pax record");
    std::string_view rec = data.substr(space + 1, len - space - 2);
    size_t eq = rec.find('=');
    if (eq == std::string_view::npos) return InvalidArgument("tar: bad pax record");
    std::string_view key = rec.substr(0, eq);
    std::string value(rec.substr(eq + 1));
    if (key == "path") pax->path = value;
    if (key == "linkpath") pax->link = value;
    if (key == "size") {
      ASSIGN_OR_RETURN(pax->size, PaxNumber(value, "size"));
    }
    if (key == "uid") {
      ASSIGN_OR_RETURN(pax->uid, PaxNumber(value, "uid"));
    }
    if (key == "gid") {
      ASSIGN_OR_RETURN(pax->gid, PaxNumber(value, "gid"));
    }
    data.remove_prefix(len);
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<TarMember>> ListTar(std::string_view tar, size_t* end) {
  std::vector<TarMember> out;
  PaxValues next;  // from a pax 'x' or GNU 'L'/'K' header
  size_t off = 0;
  for (;;) {
    if (end != nullptr) *end = off;
    if (off + kBlock > tar.size()) {
      if (off == tar.size() && !out.empty()) break;  // no end blocks: tolerated, as GNU tar does
      return InvalidArgument("tar: truncated archive");
    }
    std::string_view block = tar.substr(off, kBlock);
    if (AllZero(block)) break;
    RETURN_IF_ERROR(CheckSum(block));
    ASSIGN_OR_RETURN(uint64_t size, Number(block, 124, 12, "size"));
    const char type = block[156];
    if (next.size && type != 'x' && type != 'g' && type != 'L' && type != 'K') size = *next.size;
    off += kBlock;
    if (size > tar.size() - off) return InvalidArgument("tar: a member runs past the end of the archive");
    std::string_view data = tar.substr(off, size);
    off += (size + kBlock - 1) / kBlock * kBlock;
    if (off > tar.size()) off = tar.size();
    if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
      if (size > kMaxExtHeader) return InvalidArgument("tar: an extended header is larger than 1 MiB");
      if (type == 'x') RETURN_IF_ERROR(ParsePax(data, &next));
      std::string text(data.substr(0, data.find('\0')));
      if (type == 'L') next.path = text;
      if (type == 'K') next.link = text;
      continue;
    }
    std::string raw = next.path;
    if (raw.empty()) {
      raw = Field(block, 0, 100);
      const bool ustar = block.substr(257, 6) == std::string_view("ustar\0", 6);
      std::string prefix = ustar ? Field(block, 345, 155) : "";
      if (!prefix.empty()) raw = prefix + "/" + raw;
    }
    TarMember m;
    ASSIGN_OR_RETURN(m.path, Normalize(raw));
    m.link = next.link.empty() ? Field(block, 157, 100) : next.link;
    if (next.uid) {
      m.uid = *next.uid;
    } else {
      ASSIGN_OR_RETURN(m.uid, Number(block, 108, 8, "uid"));
    }
    if (next.gid) {
      m.gid = *next.gid;
    } else {
      ASSIGN_OR_RETURN(m.gid, Number(block, 116, 8, "gid"));
    }
    next = PaxValues{};
    ASSIGN_OR_RETURN(uint64_t mode, Number(block, 100, 8, "mode"));
    m.mode = static_cast<uint32_t>(mode & 07777);
    switch (type) {
      case '0':
      case '\0':
      case '7':
        m.type = '0';
        m.data = data;
        break;
      case '5':
        m.type = '5';
        break;
      case '2':
        m.type = '2';
        if (m.link.empty() || m.link.find('\0') != std::string::npos) {
          return InvalidArgument("tar: symlink '" + m.path + "' has no target");
        }
        break;
      case '1': {
        m.type = '1';
        // A hard link names another member; one that climbs out would link a file outside.
        ASSIGN_OR_RETURN(m.link, Normalize(m.link));
        break;
      }
      default:
        return InvalidArgument("tar: member '" + m.path.substr(0, 200) + "' has type '" + std::string(1, type) +
                               "' (device, FIFO or unknown): only files, directories and links are allowed");
    }
    if (out.size() >= kMaxTarMembers) return InvalidArgument("tar: more than 100000 members");
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::string> ContextDigest(const std::vector<TarMember>& members, const std::string& src) {
  std::string want = src;
  while (want.size() > 1 && want.back() == '/') want.pop_back();
  ASSIGN_OR_RETURN(want, Normalize(want));
  std::vector<std::string> records;
  for (const auto& m : members) {
    std::string rel;
    if (want == ".") {
      rel = m.path;
    } else if (m.path == want) {
      rel = ".";
    } else if (m.path.size() > want.size() && m.path.compare(0, want.size(), want) == 0 && m.path[want.size()] == '/') {
      rel = m.path.substr(want.size() + 1);
    } else {
      continue;
    }
    records.push_back(rel + '\0' + m.type + '\0' + std::to_string(m.mode) + '\0' + m.link + '\0' +
                      (m.type == '0' ? Sha256Hex(m.data) : std::string()) + '\n');
  }
  if (records.empty()) return InvalidArgument("copy source '" + src.substr(0, 200) + "' is not in the context");
  std::sort(records.begin(), records.end());
  std::string all;
  for (const auto& r : records) all += r;
  return Sha256Hex(all);
}

namespace {

// `len - 1` zero-padded octal digits and a NUL; the caller keeps `v` in range.
void Octal(std::string* h, size_t off, size_t len, uint64_t v) {
  for (size_t i = len - 1; i-- > 0;) {
    (*h)[off + i] = static_cast<char>('0' + (v & 7));
    v >>= 3;
  }
  (*h)[off + len - 1] = '\0';
}

}  // namespace

std::string UstarHeader(const std::string& name, char type, uint32_t mode, uint64_t uid, uint64_t gid, uint64_t size,
                        const std::string& link) {
  std::string h(512, '\0');
  h.replace(0, std::min<size_t>(name.size(), 100), name.substr(0, 100));
  Octal(&h, 100, 8, mode);
  Octal(&h, 108, 8, uid & 07777777);
  Octal(&h, 116, 8, gid & 07777777);
  Octal(&h, 124, 12, size);
  Octal(&h, 136, 12, 0);
  h[156] = type;
  h.replace(157, std::min<size_t>(link.size(), 100), link.substr(0, 100));
  h.replace(257, 6, std::string("ustar\0", 6));
  h.replace(263, 2, "00");
  h.replace(148, 8, "        ");
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  Octal(&h, 148, 7, sum);
  h[155] = ' ';
  return h;
}

Result<std::string> ConcatTars(const std::vector<std::string>& tars, size_t cap) {
  std::string out;
  for (const std::string& t : tars) {
    size_t end = 0;
    RETURN_IF_ERROR(ListTar(t, &end).status());
    if (out.size() + end + 2 * kBlock > cap) {
      return PayloadTooLarge("the tarballs together are larger than " + std::to_string(cap) + " bytes");
    }
    out.append(t, 0, end);
  }
  out.append(2 * kBlock, '\0');
  return out;
}

}  // namespace space::storage
