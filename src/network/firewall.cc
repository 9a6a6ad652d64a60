#include "network/firewall.h"

#include <nftables/libnftables.h>

#include <cstdio>
#include <memory>

namespace space::network {
namespace {

// Runs one nft script as a single transaction; the error names what nft printed.
Status RunNft(const std::string& script, const std::string& what) {
  std::unique_ptr<nft_ctx, void (*)(nft_ctx*)> ctx(nft_ctx_new(NFT_CTX_DEFAULT), nft_ctx_free);
  if (!ctx) return Internal("nft_ctx_new failed");
  nft_ctx_buffer_output(ctx.get());
  nft_ctx_buffer_error(ctx.get());
  if (nft_run_cmd_from_buffer(ctx.get(), script.c_str()) != 0) {
    std::string err = nft_ctx_get_error_buffer(ctx.get());
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return Internal(what + ": nftables: " + err);
  }
  return Status::Ok();
}

}  // namespace

std::string FirewallTableName(int net_slot) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "space_%02d", net_slot);
  return buf;
}

std::string FirewallRules(int net_slot, const GatewayPorts& p) {
  char ifs[16];
  std::snprintf(ifs, sizeof ifs, "\"sp%02d-*\"", net_slot);
  const std::string i = ifs;
  const std::string gw = kGatewayAddress;
  auto n = [](uint16_t v) { return std::to_string(v); };
  std::string t = "table inet " + FirewallTableName(net_slot) + " {\n";
  t += " chain prerouting {\n  type nat hook prerouting priority dstnat; policy accept;\n";
  t += "  iifname " + i + " meta nfproto ipv4 meta l4proto { tcp, udp } th dport 53 redirect to :" + n(p.dns) + "\n";
  t += "  iifname " + i + " meta nfproto ipv4 tcp dport 80 redirect to :" + n(p.http) + "\n";
  t += "  iifname " + i + " meta nfproto ipv4 tcp dport 443 redirect to :" + n(p.tls) + "\n";
  t += "  iifname " + i + " ip daddr " + gw + " tcp dport " + n(kPublishedProxyPort) + " redirect to :" + n(p.proxy) + "\n";
  t += "  iifname " + i + " meta nfproto ipv4 tcp dport != { " + n(p.dns) + ", " + n(p.http) + ", " + n(p.tls) + ", " +
       n(p.proxy) + ", " + n(p.tcp) + " } redirect to :" + n(p.tcp) + "\n";
  t += " }\n";
  t += " chain input {\n  type filter hook input priority filter; policy accept;\n";
  t += "  iifname " + i + " meta nfproto != ipv4 drop\n";
  t += "  iifname " + i + " fib saddr . iif oif missing drop\n";
  t += "  iifname " + i + " ip daddr " + gw + " tcp dport { " + n(p.http) + ", " + n(p.tls) + ", " + n(p.proxy) + ", " +
       n(p.tcp) + " } accept\n";
  t += "  iifname " + i + " ip daddr " + gw + " udp dport " + n(p.dns) + " accept\n";
  t += "  iifname " + i + " drop\n";
  t += " }\n";
  t += " chain forward {\n  type filter hook forward priority filter; policy accept;\n";
  t += "  iifname " + i + " drop\n  oifname " + i + " drop\n";
  t += " }\n}\n";
  return t;
}

Status InstallFirewall(int net_slot, const GatewayPorts& ports) {
  // "add table" first makes the delete valid whether or not the table existed; all three
  // commands are one transaction, so the node is never without rules once it had them.
  const std::string table = "inet " + FirewallTableName(net_slot);
  return RunNft("add table " + table + "\ndelete table " + table + "\n" + FirewallRules(net_slot, ports),
                "install firewall " + table);
}

Status RemoveFirewall(int net_slot) {
  const std::string table = "inet " + FirewallTableName(net_slot);
  return RunNft("add table " + table + "\ndelete table " + table + "\n", "remove firewall " + table);
}

}  // namespace space::network
