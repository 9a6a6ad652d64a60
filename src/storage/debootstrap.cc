#include "storage/debootstrap.h"


#include <cctype>
#include <map>
#include <sstream>

#include "common/log.h"
#include "common/subprocess.h"
#include "common/syscall.h"
#include "storage/fs_util.h"

namespace space::storage {
namespace {

constexpr char kDebootstrap[] = "/usr/sbin/debootstrap";
constexpr char kPackages[] = "python3,ca-certificates,curl,git";

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  for (const auto& s : v) {
    if (s == x) return true;
  }
  return false;
}

bool IsHttp(const std::string& uri) { return uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0; }

// "deb [opts] uri suite comp..." lines.
std::string FromOneLine(const std::string& content, const std::string& suite) {
  std::istringstream in(content);
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    std::vector<std::string> w = Words(line);
    if (w.empty() || w[0] != "deb") continue;
    size_t i = 1;
    if (i < w.size() && w[i].front() == '[') {
      while (i < w.size() && w[i].back() != ']') ++i;
      ++i;
    }
    if (i + 2 >= w.size()) continue;
    std::vector<std::string> comps(w.begin() + static_cast<long>(i) + 2, w.end());
    if (IsHttp(w[i]) && w[i + 1] == suite && Contains(comps, "main")) return w[i];
  }
  return "";
}

// deb822 stanzas separated by blank lines; continuation lines start with whitespace.
std::string FromDeb822(const std::string& content, const std::string& suite) {
  std::istringstream in(content);
  std::map<std::string, std::string> fields;
  std::string last;
  auto check = [&]() -> std::string {
    std::string found;
    auto get = [&](const char* k) { return Words(fields.count(k) ? fields[k] : ""); };
    std::vector<std::string> enabled = get("enabled");
    if (Contains(get("types"), "deb") && Contains(get("suites"), suite) && Contains(get("components"), "main") &&
        !Contains(enabled, "no")) {
      for (const auto& uri : get("uris")) {
        if (IsHttp(uri)) return uri;
      }
    }
    return "";
  };
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '#') continue;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (std::string u = check(); !u.empty()) return u;
      fields.clear();
      last.clear();
      continue;
    }
    if (line[0] == ' ' || line[0] == '\t') {
      if (!last.empty()) fields[last] += " " + line;
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    last = line.substr(0, colon);
    for (char& c : last) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    fields[last] = line.substr(colon + 1);
  }
  return check();
}

}  // namespace

Result<std::string> FindDebianMirror(const std::vector<AptSource>& sources, const std::string& suite) {
  for (const auto& src : sources) {
    bool deb822 = src.file.size() >= 8 && src.file.compare(src.file.size() - 8, 8, ".sources") == 0;
    std::string uri = deb822 ? FromDeb822(src.content, suite) : FromOneLine(src.content, suite);
    if (!uri.empty()) return uri;
  }
  return NotFound("no http(s) apt source for Debian '" + suite +
                  "' main in /etc/apt/sources.list or /etc/apt/sources.list.d; cannot pick a mirror for debootstrap");
}

Result<std::string> FindHostDebianMirror(const std::string& suite) {
  std::vector<AptSource> sources;
  auto add = [&](const std::string& path) {
    Result<std::string> text = ReadFileToString(path);
    if (text.ok()) sources.push_back({path, std::move(*text)});
  };
  add("/etc/apt/sources.list");
  Result<std::vector<std::string>> names = ListDir("/etc/apt/sources.list.d");
  if (names.ok()) {
    for (const auto& n : *names) {
      bool list = n.size() > 5 && n.compare(n.size() - 5, 5, ".list") == 0;
      bool deb822 = n.size() > 8 && n.compare(n.size() - 8, 8, ".sources") == 0;
      if (list || deb822) add("/etc/apt/sources.list.d/" + n);
    }
  }
  return FindDebianMirror(sources, suite);
}

std::vector<std::string> DebootstrapArgv(const std::string& target, const std::string& mirror) {
  return {kDebootstrap, "--variant=minbase", std::string("--include=") + kPackages, "bookworm", target, mirror};
}

}  // namespace space::storage
