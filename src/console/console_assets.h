// The console's bundled files, built into the binary (console_assets.cc.in).
#pragma once

#include <string_view>
#include <vector>

namespace space::console {

struct Asset {
  std::string_view name;  // "index.html", "app.js", "app.css"
  std::string_view content_type;
  std::string_view data;
};

std::vector<Asset> Assets();

}  // namespace space::console
