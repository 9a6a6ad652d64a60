#!/usr/bin/env bash
# Installs the Debian packages SPACE builds and runs with, only those that are missing, so a
# second run is a no-op. Debian 12, as root.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config          # toolchain
  clang libclang-rt-dev                     # make fuzz (libFuzzer's runtime is only a Recommends of clang)
  clang-tidy clang-format                   # make lint
  libboost-dev nlohmann-json3-dev           # Boost.Beast/Asio HTTP, JSON
  libseccomp-dev libcap-dev                 # sandbox confinement
  libsqlite3-dev libssl-dev libzstd-dev     # store, hashing
  libpq-dev                                 # PostgreSQL store (libpq)
  libbtrfsutil-dev btrfs-progs              # storage pool
  libmnl-dev libnftables-dev nftables       # sandbox network: veth via netlink, firewall
  libcli11-dev                              # command line
  libgtest-dev libgmock-dev libbenchmark-dev  # tests and benchmarks
  busybox-static debootstrap                # templates
  bubblewrap util-linux runc                # benchmark baselines (bwrap, unshare, runc)
  python3 iproute2 sqlite3 openssl          # integration tests (openssl: the egress tests' CA)
  qemu-system-x86 e2fsprogs                 # the vm runtime: QEMU microVMs, ext4 disk images
  postgresql                                # throwaway cluster for the store tests (pg-test-cluster.sh)
  libcurl4-openssl-dev curl                 # the S3 object store client (libcurl signs SigV4)
  radosgw ceph-mon ceph-osd                 # throwaway S3 server for the tests (s3-test-cluster.sh)
  chromium                                  # browser tests (driven by playwright-core from npm)
)

missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# The E2B end-to-end test runs the real JavaScript SDK (tests/e2b). A node/npm already on the
# PATH (e.g. a newer one from elsewhere) is used as is; otherwise Debian's.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
