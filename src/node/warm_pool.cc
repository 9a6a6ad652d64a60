#include "node/warm_pool.h"

#include <charconv>

#include "storage/names.h"

namespace space::node {
namespace {

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::map<std::string, int>> ParseWarmPoolSpec(std::string_view text) {
  std::map<std::string, int> out;
  if (text.size() > kMaxWarmSpecBytes) return InvalidArgument("--warm-pool: longer than 4096 bytes");
  if (TrimSpace(text).empty()) return out;
  int total = 0;
  while (true) {
    size_t comma = text.find(',');
    std::string_view item = TrimSpace(text.substr(0, comma));
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument("--warm-pool: expected TEMPLATE=COUNT, got \"" + std::string(item) + "\"");
    }
    std::string name(TrimSpace(item.substr(0, eq)));
    std::string_view count_text = TrimSpace(item.substr(eq + 1));
    bool vm = false;
    if (size_t colon = name.find(':'); colon != std::string::npos) {
      const std::string runtime = name.substr(colon + 1);
      if (runtime != "vm" && runtime != "ns") {
        return InvalidArgument("--warm-pool: runtime of \"" + name + "\" must be ns or vm");
      }
      vm = runtime == "vm";
      name.resize(colon);
    }
    if (Status st = storage::ValidateTemplateName(name); !st.ok()) {
      return InvalidArgument("--warm-pool: bad template name \"" + name + "\": " + st.message());
    }
    name = WarmPoolKey(name, vm);
    int count = -1;
    auto [end, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    if (count_text.empty() || ec != std::errc() || end != count_text.data() + count_text.size() || count < 0 ||
        count > kMaxWarmPerTemplate) {
      return InvalidArgument("--warm-pool: count for " + name + " must be an integer 0.." +
                             std::to_string(kMaxWarmPerTemplate));
    }
    if (!out.emplace(name, count).second) return InvalidArgument("--warm-pool: template " + name + " given twice");
    total += count;
    if (total > kMaxWarmTotal) {
      return InvalidArgument("--warm-pool: at most " + std::to_string(kMaxWarmTotal) + " sandboxes in all");
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::string WarmPoolKey(const std::string& template_name, bool vm) {
  return vm ? template_name + ":vm" : template_name;
}

std::string WarmPoolTemplate(const std::string& key, bool* vm) {
  const size_t colon = key.find(':');
  *vm = colon != std::string::npos;
  return key.substr(0, colon);
}

std::string WarmPoolMetricsText(const std::map<std::string, WarmCounters>& pools) {
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    uint64_t (*get)(const WarmCounters&);
  };
  static constexpr Family kFamilies[] = {
      {"space_warm_pool_size", "gauge", "Pre-created sandboxes ready to be handed out, per template.",
       [](const WarmCounters& c) { return static_cast<uint64_t>(c.ready); }},
      {"space_warm_pool_target", "gauge", "Configured warm pool size, per template.",
       [](const WarmCounters& c) { return static_cast<uint64_t>(c.target); }},
      {"space_warm_pool_filling", "gauge", "Pooled sandboxes being created right now, per template.",
       [](const WarmCounters& c) { return static_cast<uint64_t>(c.filling); }},
      {"space_warm_pool_hits_total", "counter", "Creates served from the warm pool.",
       [](const WarmCounters& c) { return c.hits; }},
      {"space_warm_pool_misses_total", "counter",
       "Creates for a pooled template served cold (pool empty, or memory_mb other than the pool's).",
       [](const WarmCounters& c) { return c.misses; }},
      {"space_warm_pool_refills_total", "counter", "Pooled sandboxes created.",
       [](const WarmCounters& c) { return c.refills; }},
      {"space_warm_pool_refill_failures_total", "counter", "Pooled sandbox creations that failed.",
       [](const WarmCounters& c) { return c.refill_failures; }},
      {"space_warm_pool_discarded_total", "counter", "Pooled sandboxes dropped at hand-out (dead or failing).",
       [](const WarmCounters& c) { return c.discarded; }},
  };
  std::string out;
  if (pools.empty()) return out;
  for (const Family& f : kFamilies) {
    out += std::string("# HELP ") + f.name + " " + f.help + "\n# TYPE " + f.name + " " + f.type + "\n";
    // Template names are [a-z0-9._-]: nothing to escape inside the label value.
    for (const auto& [key, c] : pools) {
      bool vm = false;
      const std::string name = WarmPoolTemplate(key, &vm);
      // ns pools keep the one label they always had; vm pools add theirs.
      out += std::string(f.name) + "{template=\"" + name + (vm ? "\",runtime=\"vm" : "") + "\"} " +
             std::to_string(f.get(c)) + "\n";
    }
  }
  return out;
}

}  // namespace space::node
