#!/usr/bin/env bash
# Installs the Debian packages SPACE builds and runs with, only those that are missing, so a
# second run is a no-op. Debian 12, as root.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config          # toolchain
  libboost-dev nlohmann-json3-dev           # Boost.Beast/Asio HTTP, JSON
  libseccomp-dev libcap-dev                 # sandbox confinement
  libsqlite3-dev libssl-dev libzstd-dev     # store, hashing
  libbtrfsutil-dev btrfs-progs              # storage pool
  libcli11-dev                              # command line
  libgtest-dev libgmock-dev libbenchmark-dev  # tests and benchmarks
  busybox-static debootstrap                # templates
  bubblewrap util-linux                     # benchmark baselines (bwrap, unshare)
  python3 iproute2 sqlite3                  # integration tests
)

missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
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
