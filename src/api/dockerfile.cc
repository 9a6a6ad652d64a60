#include "api/dockerfile.h"

#include <cctype>
#include <vector>

namespace space::api {
namespace {

struct Instruction {
  int line = 0;         // where it starts (1-based)
  std::string keyword;  // upper case
  std::string args;     // the rest, continuation lines joined
};

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

Status LineError(int line, const std::string& what) {
  return InvalidArgument("Dockerfile line " + std::to_string(line) + ": " + what);
}

// Splits into instructions: comments and blank lines dropped, "\" continuations joined.
std::vector<Instruction> Split(const std::string& text) {
  std::vector<Instruction> out;
  Instruction cur;
  bool continuing = false;
  int n = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++n;
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#') {
      if (pos > text.size() && continuing) out.push_back(cur);
      continue;
    }
    bool more = !t.empty() && t.back() == '\\';
    if (more) t = Trim(t.substr(0, t.size() - 1));
    if (!continuing) {
      cur = Instruction{};
      cur.line = n;
      size_t sp = t.find_first_of(" \t");
      cur.keyword = t.substr(0, sp);
      for (char& c : cur.keyword) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      cur.args = sp == std::string::npos ? "" : Trim(t.substr(sp));
    } else {
      cur.args += (cur.args.empty() ? "" : " ") + t;
    }
    continuing = more;
    if (!continuing) out.push_back(cur);
    if (pos > text.size() && continuing) out.push_back(cur);
  }
  return out;
}

// $NAME and ${NAME} of known args; other '$' text stays as written.
std::string Substitute(const std::string& s, const std::map<std::string, std::string>& args) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '$' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    size_t start = i + 1, end;
    bool braced = s[start] == '{';
    if (braced) {
      end = s.find('}', start);
      if (end == std::string::npos) {
        out += s[i];
        continue;
      }
      std::string name = s.substr(start + 1, end - start - 1);
      auto it = args.find(name);
      if (it == args.end()) {
        out += s.substr(i, end - i + 1);
      } else {
        out += it->second;
      }
      i = end;
      continue;
    }
    end = start;
    while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_')) ++end;
    auto it = args.find(s.substr(start, end - start));
    if (end == start || it == args.end()) {
      out += s[i];
      continue;
    }
    out += it->second;
    i = end - 1;
  }
  return out;
}

// A shell word for an exec-form argument.
std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,@%+") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// RUN and CMD: shell form as written; exec form (a JSON array) as a quoted command line.
Result<std::string> CommandLine(const Instruction& in) {
  if (!in.args.empty() && in.args[0] == '[') {
    nlohmann::json arr = nlohmann::json::parse(in.args, nullptr, false);
    if (arr.is_discarded() || !arr.is_array() || arr.empty()) {
      return LineError(in.line, in.keyword + " exec form must be a JSON array of strings");
    }
    std::string out;
    for (const auto& a : arr) {
      if (!a.is_string()) return LineError(in.line, in.keyword + " exec form must be a JSON array of strings");
      out += (out.empty() ? "" : " ") + ShellQuote(a.get<std::string>());
    }
    return out;
  }
  if (in.args.empty()) return LineError(in.line, in.keyword + " needs a command");
  return in.args;
}

// Whitespace-separated words, honouring "..." and '...' (ENV, COPY).
Result<std::vector<std::string>> Words(const Instruction& in) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (size_t i = 0; i < in.args.size(); ++i) {
    char c = in.args[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < in.args.size()) {
        cur += in.args[++i];
      } else {
        cur += c;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
      have = true;
    } else if (c == ' ' || c == '\t') {
      if (have) out.push_back(cur);
      cur.clear();
      have = false;
    } else if (c == '\\' && i + 1 < in.args.size()) {
      cur += in.args[++i];
      have = true;
    } else {
      cur += c;
      have = true;
    }
  }
  if (quote) return LineError(in.line, "unterminated quote");
  if (have) out.push_back(cur);
  return out;
}

std::string JoinPath(const std::string& base, const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  std::string b = base.empty() ? "/" : base;
  if (b.back() != '/') b += '/';
  return b + p;
}

// "name" or "name@sha256:<hex>" (the server checks the rest); an image reference ("python:3.12",
// "docker.io/x") is not a template.
bool IsTemplateRef(const std::string& ref) {
  size_t at = ref.find('@');
  std::string name = ref.substr(0, at);
  if (name.empty()) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) return false;
  }
  return at == std::string::npos || ref.compare(at + 1, 7, "sha256:") == 0;
}

}  // namespace

bool RecipeNeedsContext(const nlohmann::json& recipe) {
  if (!recipe.is_object() || !recipe.contains("steps") || !recipe["steps"].is_array()) return false;
  for (const auto& step : recipe["steps"]) {
    if (step.is_object() && step.contains("copy")) return true;
  }
  return false;
}

Result<nlohmann::json> DockerfileToRecipe(const std::string& text,
                                          const std::map<std::string, std::string>& build_args) {
  if (text.size() > (1u << 20)) return InvalidArgument("the Dockerfile is larger than 1 MiB");
  nlohmann::json out = nlohmann::json::object();
  nlohmann::json steps = nlohmann::json::array();
  std::map<std::string, std::string> args;  // declared ARGs and their values
  std::string workdir;
  bool have_from = false;
  for (const Instruction& raw : Split(text)) {
    Instruction in = raw;
    // Textual, as the build sees them: an ARG's value where $NAME or ${NAME} is written.
    if (in.keyword != "ARG") in.args = Substitute(in.args, args);
    if (!have_from && in.keyword != "FROM" && in.keyword != "ARG") {
      return LineError(in.line, in.keyword + " before FROM");
    }
    if (in.keyword == "FROM") {
      if (have_from) return LineError(in.line, "a second FROM (multi-stage builds are not supported)");
      ASSIGN_OR_RETURN(std::vector<std::string> w, Words(in));
      if (w.size() != 1)
        return LineError(in.line, "FROM takes one template (FROM name or name@sha256:...; no AS, no --platform)");
      if (!IsTemplateRef(w[0])) {
        return LineError(in.line, "FROM '" + w[0] + "' is not a template name (a SPACE template or name@sha256:...)");
      }
      out["from"] = w[0];
      have_from = true;
    } else if (in.keyword == "ARG") {
      ASSIGN_OR_RETURN(std::vector<std::string> w, Words(in));
      if (w.size() != 1) return LineError(in.line, "ARG takes one NAME[=default]");
      size_t eq = w[0].find('=');
      std::string name = w[0].substr(0, eq);
      auto given = build_args.find(name);
      if (given != build_args.end()) {
        args[name] = given->second;
      } else if (eq != std::string::npos) {
        args[name] = Substitute(w[0].substr(eq + 1), args);
      } else {
        args[name] = "";
      }
    } else if (in.keyword == "RUN") {
      ASSIGN_OR_RETURN(std::string cmd, CommandLine(in));
      steps.push_back({{"run", cmd}});
    } else if (in.keyword == "CMD") {
      ASSIGN_OR_RETURN(std::string cmd, CommandLine(in));
      out["start"] = cmd;
    } else if (in.keyword == "ENV") {
      ASSIGN_OR_RETURN(std::vector<std::string> w, Words(in));
      if (w.empty()) return LineError(in.line, "ENV needs KEY=value");
      nlohmann::json env = nlohmann::json::object();
      if (w[0].find('=') == std::string::npos) {
        // The legacy form: ENV KEY value with spaces.
        if (w.size() < 2) return LineError(in.line, "ENV needs KEY=value or KEY value");
        std::string value;
        for (size_t i = 1; i < w.size(); ++i) value += (i > 1 ? " " : "") + w[i];
        env[w[0]] = value;
      } else {
        for (const auto& kv : w) {
          size_t eq = kv.find('=');
          if (eq == std::string::npos || eq == 0) return LineError(in.line, "ENV entries are KEY=value");
          env[kv.substr(0, eq)] = kv.substr(eq + 1);
        }
      }
      steps.push_back({{"env", env}});
    } else if (in.keyword == "WORKDIR") {
      ASSIGN_OR_RETURN(std::vector<std::string> w, Words(in));
      if (w.size() != 1) return LineError(in.line, "WORKDIR takes one path");
      workdir = JoinPath(workdir, w[0]);
      steps.push_back({{"workdir", workdir}});
    } else if (in.keyword == "USER") {
      ASSIGN_OR_RETURN(std::vector<std::string> w, Words(in));
      if (w.size() != 1) return LineError(in.line, "USER takes one user");
      steps.push_back({{"user", w[0]}});
    } else if (in.keyword == "COPY" || in.keyword == "ADD") {
      ASSIGN_OR_RETURN(std::vector<std::string> w, Words(in));
      if (!w.empty() && w[0].rfind("--", 0) == 0) {
        return LineError(in.line, in.keyword + " " + w[0] + " is not supported (files are copied as root)");
      }
      if (w.size() < 2) return LineError(in.line, in.keyword + " takes SRC... DEST");
      std::string dest = w.back();
      if (w.size() > 2 && dest.back() != '/') {
        return LineError(in.line, in.keyword + " with several sources needs a DEST ending in '/'");
      }
      if (dest[0] != '/') dest = JoinPath(workdir, dest);
      for (size_t i = 0; i + 1 < w.size(); ++i) {
        std::string src = w[i];
        if (src.find("://") != std::string::npos || src.rfind("git@", 0) == 0) {
          return LineError(in.line, in.keyword + " of a URL is not supported (local files only)");
        }
        if (src.find_first_of("*?[") != std::string::npos) {
          return LineError(in.line, in.keyword + " with wildcards is not supported");
        }
        while (src.rfind("./", 0) == 0) src = src.substr(2);
        while (!src.empty() && src[0] == '/') src = src.substr(1);
        if (src.empty()) src = ".";
        steps.push_back({{"copy", {{"src", src}, {"dest", dest}}}});
      }
    } else {
      return LineError(in.line, in.keyword + " is not supported (FROM, RUN, COPY, ADD, ENV, WORKDIR, USER, ARG, CMD)");
    }
  }
  if (!have_from) return InvalidArgument("the Dockerfile has no FROM");
  out["steps"] = steps;
  return out;
}

}  // namespace space::api
