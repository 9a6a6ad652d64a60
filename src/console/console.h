// The web console (web/console, docs/console.md): static files served at /console by the
// node and by fleet servers. They need no key, as they hold no data: everything the console
// shows it fetches from the public API with the key its user enters, so it can do nothing a
// key cannot. Every answer carries a Content-Security-Policy that allows scripts from this
// origin only (no inline script, no other site) and forbids framing.
#pragma once

#include "http/http.h"

namespace space::console {

// The policy sent with every console file. Styles allow 'unsafe-inline' because xterm.js
// writes its theme into a <style> element; no script may be inline.
inline constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
    "img-src 'self' data: blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

// Answers GET/HEAD of "/" (a redirect), "/console" and "/console/<file>"; false for any
// other path (nothing sent).
bool Serve(const api::Request& req, api::Responder& res);

}  // namespace space::console
