#!/usr/bin/env bash
# A throwaway S3 server for tests: Debian's Ceph RGW on a one-monitor, one-OSD cluster.
#
#   s3-test-cluster.sh start          creates and starts one; prints SPACE_TEST_S3_DIR=...,
#                                     SPACE_TEST_S3_URL=..., SPACE_TEST_S3_ACCESS_KEY=... and
#                                     SPACE_TEST_S3_SECRET_KEY=... lines (eval-able)
#   s3-test-cluster.sh stop DIR       stops it and removes DIR
#   s3-test-cluster.sh run -- CMD...  start, run CMD with those variables exported, stop (also
#                                     on failure or Ctrl-C); exits with CMD's status
#
# Everything lives in a fresh temp dir and listens on 127.0.0.1 only; S3_TEST_LISTEN (IPv4
# addresses, space-separated) adds addresses radosgw also listens on, on the same port (a
# fleet test's nodes reach it from their network namespaces at the host ends of their veths). The OSD keeps its
# objects in memory (memstore) and cephx is off: the data is thrown away, and nothing but this
# machine can reach the ports. The S3 user's keys are random per cluster. The bucket
# `space-test` exists when `start` returns.
set -euo pipefail

die() { echo "s3-test-cluster: $*" >&2; exit 1; }

for tool in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph curl; do
  command -v "$tool" >/dev/null 2>&1 || die "no $tool (apt-get install radosgw ceph-mon ceph-osd curl)"
done

# A TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 20000))
    if ! ss -Hltn "sport = :$p" | grep -q .; then echo "$p"; return 0; fi
  done
  die "no free port found"
}

wait_for() {  # wait_for SECONDS DESCRIPTION CMD...
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

cmd_start() {
  local dir mon_port rgw_port fsid conf access secret
  dir=$(mktemp -d "${TMPDIR:-/tmp}/space-s3.XXXXXX")
  mkdir -p "$dir"/{run,log,mon,osd/ceph-0,rgw}
  mon_port=$(free_port)
  rgw_port=$(free_port)
  fsid=$(cat /proc/sys/kernel/random/uuid)
  access=$(head -c 10 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)
  secret=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
  conf=$dir/ceph.conf
  local endpoints="endpoint=127.0.0.1:$rgw_port" addr
  for addr in ${S3_TEST_LISTEN:-}; do
    [[ "$addr" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || { rm -rf "$dir"; die "S3_TEST_LISTEN: '$addr' is not an IPv4 address"; }
    endpoints+=" endpoint=$addr:$rgw_port"
  done
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon initial members = a
mon host = [v2:127.0.0.1:$mon_port]
public addr = 127.0.0.1
ms bind ipv4 = true
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon allow pool delete = true
osd crush chooseleaf type = 0
mon data avail crit = 0
mon data avail warn = 0
paxos propose interval = 0.05
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
keyring = $dir/keyring
[mon]
mon data = $dir/mon/\$cluster-\$id
[osd]
osd data = $dir/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = 2147483648
osd max object size = 134217728
[client.rgw]
rgw frontends = beast $endpoints
rgw data = $dir/rgw
rgw dns name = 127.0.0.1
ms mon client mode = crc
EOF
  # A keyring with a mon. key: --mkfs wants one even with cephx off.
  ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
  if ! ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >"$dir/log/mkfs.log" 2>&1; then
    cat "$dir/log/mkfs.log" >&2; rm -rf "$dir"; die "ceph-mon --mkfs failed"
  fi
  ceph-mon -c "$conf" -i a >>"$dir/log/start.log" 2>&1 || { cmd_stop "$dir"; die "ceph-mon failed to start"; }
  local osd_uuid
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  if ! ceph -c "$conf" --connect-timeout 20 osd new "$osd_uuid" >"$dir/log/osd-new.log" 2>&1; then
    cat "$dir/log/osd-new.log" >&2; cmd_stop "$dir"; die "ceph osd new failed (monitor not answering)"
  fi
  if ! ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >"$dir/log/osd-mkfs.log" 2>&1; then
    cat "$dir/log/osd-mkfs.log" >&2; cmd_stop "$dir"; die "ceph-osd --mkfs failed"
  fi
  ceph-osd -c "$conf" -i 0 >>"$dir/log/start.log" 2>&1 || { cmd_stop "$dir"; die "ceph-osd failed to start"; }
  radosgw-admin -c "$conf" user create --uid=space-test --display-name=space-test \
    --access-key="$access" --secret-key="$secret" >"$dir/log/user.log" 2>&1 ||
    { cat "$dir/log/user.log" >&2; cmd_stop "$dir"; die "radosgw-admin user create failed"; }
  radosgw -c "$conf" -n client.rgw >>"$dir/log/start.log" 2>&1 || { cmd_stop "$dir"; die "radosgw failed to start"; }
  if ! wait_for 60 radosgw curl -sf -o /dev/null "http://127.0.0.1:$rgw_port/"; then
    tail -n 30 "$dir/log/client.rgw.log" >&2 || true
    cmd_stop "$dir"; die "radosgw did not answer on 127.0.0.1:$rgw_port"
  fi
  # The bucket, signed as the user (curl signs SigV4 itself).
  local code
  code=$(curl -s -o "$dir/log/bucket.out" -w '%{http_code}' -X PUT \
    --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access:$secret" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "http://127.0.0.1:$rgw_port/space-test")
  [ "$code" = 200 ] || { cat "$dir/log/bucket.out" >&2; cmd_stop "$dir"; die "bucket create answered $code"; }
  echo "SPACE_TEST_S3_DIR=$dir"
  echo "SPACE_TEST_S3_URL=s3://space-test/?endpoint=http://127.0.0.1:$rgw_port&region=us-east-1"
  echo "SPACE_TEST_S3_ACCESS_KEY=$access"
  echo "SPACE_TEST_S3_SECRET_KEY=$secret"
}

cmd_stop() {
  local dir=${1:-}
  [ -n "$dir" ] || die "usage: $0 stop DIR"
  [ -f "$dir/ceph.conf" ] || { rm -rf "$dir"; return 0; }
  local pids=() f
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] && pids+=("$(cat "$f")")
  done
  [ ${#pids[@]} -gt 0 ] && kill -9 "${pids[@]}" 2>/dev/null || true
  # A daemon may have forked before writing its pid file: anything still running with this
  # cluster's config goes too.
  pkill -9 -f -- "-c $dir/ceph.conf" 2>/dev/null || true
  rm -rf "$dir"
}

cmd_run() {
  [ "${1:-}" = "--" ] && shift
  [ $# -gt 0 ] || die "usage: $0 run -- CMD..."
  local out
  out=$(cmd_start)
  export SPACE_TEST_S3_DIR SPACE_TEST_S3_URL SPACE_TEST_S3_ACCESS_KEY SPACE_TEST_S3_SECRET_KEY
  SPACE_TEST_S3_DIR=$(sed -n 's/^SPACE_TEST_S3_DIR=//p' <<<"$out")
  SPACE_TEST_S3_URL=$(sed -n 's/^SPACE_TEST_S3_URL=//p' <<<"$out")
  SPACE_TEST_S3_ACCESS_KEY=$(sed -n 's/^SPACE_TEST_S3_ACCESS_KEY=//p' <<<"$out")
  SPACE_TEST_S3_SECRET_KEY=$(sed -n 's/^SPACE_TEST_S3_SECRET_KEY=//p' <<<"$out")
  trap 'cmd_stop "$SPACE_TEST_S3_DIR"' EXIT
  trap 'exit 130' INT TERM
  local rc=0
  "$@" || rc=$?
  exit "$rc"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) shift; cmd_stop "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) die "usage: $0 start | stop DIR | run -- CMD..." ;;
esac
