#include "console/console.h"

#include "console/console_assets.h"

namespace space::console {
namespace {

void SecurityHeaders(api::Responder& res) {
  res.AddHeader("Content-Security-Policy", kContentSecurityPolicy);
  res.AddHeader("X-Content-Type-Options", "nosniff");
  res.AddHeader("X-Frame-Options", "DENY");
  res.AddHeader("Referrer-Policy", "no-referrer");
  res.AddHeader("Cross-Origin-Opener-Policy", "same-origin");
  res.AddHeader("Cross-Origin-Resource-Policy", "same-origin");
  res.AddHeader("Cache-Control", "no-cache");
}

}  // namespace

bool Serve(const api::Request& req, api::Responder& res) {
  const std::string& p = req.path;
  const bool console = p == "/console" || p.rfind("/console/", 0) == 0;
  if (p != "/" && !console) return false;
  if (req.method != "GET" && req.method != "HEAD") {
    res.SendError(InvalidArgument("the console's files answer GET only"));
    return true;
  }
  if (p == "/") {
    res.AddHeader("Location", "/console");
    res.Send(302, "text/plain; charset=utf-8", "");
    return true;
  }
  std::string name = p == "/console" || p == "/console/" ? "index.html" : p.substr(sizeof "/console/" - 1);
  for (const Asset& a : Assets()) {
    if (a.name != name) continue;
    SecurityHeaders(res);
    res.Send(200, a.content_type, std::string(a.data));
    return true;
  }
  res.SendError(NotFound("the console has no file " + name.substr(0, 100)));
  return true;
}

}  // namespace space::console
