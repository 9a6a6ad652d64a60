#include "gateway/worker_seccomp.h"

#include <sys/socket.h>

#include <iterator>

#include "common/seccomp_denylist.h"

namespace space::gateway {
namespace {

// Socket families the gateway never opens: routing and firewall control (netlink), raw
// frames (packet, XDP), kernel crypto (AF_ALG) and rarely used protocol stacks.
constexpr int kRefusedFamilies[] = {AF_NETLINK, AF_PACKET, AF_KEY,  AF_ALG, AF_VSOCK, AF_XDP,
                                    AF_TIPC,    AF_RDS,    AF_LLC,  AF_BLUETOOTH, AF_CAN, AF_NFC};

}  // namespace

Status LoadWorkerSeccomp() {
  DenyList list;
  list.syscalls = HelperRefusedSyscalls();
  list.socket_families.assign(std::begin(kRefusedFamilies), std::end(kRefusedFamilies));
  return LoadDenyList(list);  // no new namespaces, signals only to itself
}

}  // namespace space::gateway
