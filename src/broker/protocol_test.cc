#include "broker/protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace space::broker {
namespace {

Request Decoded(const std::string& bytes, size_t fds = 0) {
  auto r = DecodeRequest(bytes, fds);
  EXPECT_TRUE(r.ok()) << bytes << ": " << r.status().ToString();
  return r.ok() ? *r : Request{};
}

void ExpectRefused(const std::string& bytes, size_t fds = 0) {
  auto r = DecodeRequest(bytes, fds);
  EXPECT_FALSE(r.ok()) << bytes;
  if (!r.ok()) {
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bytes;
  }
}

TEST(ProtocolTest, EveryOpRoundTrips) {
  Request fw;
  fw.op = Op::kFirewallInstall;
  fw.ports = {20000, 20001, 20002, 20003, 20004};
  Request got = Decoded(EncodeRequest(fw));
  EXPECT_EQ(got.op, Op::kFirewallInstall);
  EXPECT_EQ(got.ports.dns, 20000);
  EXPECT_EQ(got.ports.tcp, 20004);

  Request attach;
  attach.op = Op::kNetAttach;
  attach.uid_slot = 16383;
  EXPECT_EQ(Decoded(EncodeRequest(attach), 1).uid_slot, 16383);

  Request rec;
  rec.op = Op::kNetReconcile;
  rec.keep = {0, 5, 16383};
  EXPECT_EQ(Decoded(EncodeRequest(rec)).keep, rec.keep);

  Request pair;
  pair.op = Op::kSeqpacketPair;
  pair.send_buffer_bytes = 1 << 20;
  EXPECT_EQ(Decoded(EncodeRequest(pair)).send_buffer_bytes, 1 << 20);

  for (Op op : {Op::kHello, Op::kNetAcquire, Op::kNetRelease}) {
    Request r;
    r.op = op;
    EXPECT_EQ(Decoded(EncodeRequest(r)).op, op);
  }
}

TEST(ProtocolTest, CgroupRequestsRoundTrip) {
  Request create;
  create.op = Op::kCgroupCreate;
  create.runtime = CgroupRuntime::kVm;
  create.id = "sbx_AZaz09-_";
  create.limits = {.cpus = 0.5, .memory_bytes = 256ull << 20, .pids_max = 128};
  Request got = Decoded(EncodeRequest(create));
  EXPECT_EQ(got.op, Op::kCgroupCreate);
  EXPECT_EQ(got.runtime, CgroupRuntime::kVm);
  EXPECT_EQ(got.id, "sbx_AZaz09-_");
  EXPECT_EQ(got.limits.cpus, 0.5);
  EXPECT_EQ(got.limits.memory_bytes, 256ull << 20);
  EXPECT_EQ(got.limits.pids_max, 128u);

  Request freeze;
  freeze.op = Op::kCgroupFreeze;
  freeze.id = "sbx_1";
  freeze.frozen = true;
  got = Decoded(EncodeRequest(freeze));
  EXPECT_EQ(got.runtime, CgroupRuntime::kNs);
  EXPECT_TRUE(got.frozen);

  Request attach;
  attach.op = Op::kCgroupAttach;
  attach.id = "sbx_1";
  EXPECT_EQ(Decoded(EncodeRequest(attach), 1).id, "sbx_1");
  for (Op op : {Op::kCgroupUpdate, Op::kCgroupKill, Op::kCgroupRemove}) {
    Request r = create;
    r.op = op;
    EXPECT_EQ(Decoded(EncodeRequest(r)).op, op);
  }
}

TEST(ProtocolTest, RefusesCgroupRequestsOutsideTheirBounds) {
  const std::string limits = R"("limits":{"cpus":1,"memory_bytes":536870912,"pids_max":256})";
  Decoded(R"({"op":"cgroup_create","runtime":"ns","id":"sbx_1",)" + limits + "}");
  // Ids become path components: nothing that walks, nothing empty or long.
  for (const char* id : {"", "..", ".", "a/b", "../x", "sbx 1", "sbx_\\u0000", "x.y"}) {
    ExpectRefused(std::string(R"({"op":"cgroup_kill","runtime":"ns","id":")") + id + "\"}");
  }
  ExpectRefused(R"({"op":"cgroup_kill","runtime":"ns","id":")" + std::string(65, 'a') + "\"}");
  ExpectRefused(R"({"op":"cgroup_kill","runtime":"ns","id":1})");
  ExpectRefused(R"({"op":"cgroup_kill","runtime":"host","id":"sbx_1"})");
  ExpectRefused(R"({"op":"cgroup_kill","id":"sbx_1"})");
  ExpectRefused(R"({"op":"cgroup_kill","runtime":"ns","id":"sbx_1","path":"/sys"})");
  // Limits: every field, in range, nothing more.
  for (const char* l : {R"({"cpus":0,"memory_bytes":536870912,"pids_max":256})",
                        R"({"cpus":-1,"memory_bytes":536870912,"pids_max":256})",
                        R"({"cpus":5000,"memory_bytes":536870912,"pids_max":256})",
                        R"({"cpus":"1","memory_bytes":536870912,"pids_max":256})",
                        R"({"cpus":1,"memory_bytes":1024,"pids_max":256})",
                        R"({"cpus":1,"memory_bytes":-1,"pids_max":256})",
                        R"({"cpus":1,"memory_bytes":1e30,"pids_max":256})",
                        R"({"cpus":1,"memory_bytes":536870912,"pids_max":0})",
                        R"({"cpus":1,"memory_bytes":536870912,"pids_max":99999999})",
                        R"({"cpus":1,"memory_bytes":536870912})",
                        R"({"cpus":1,"memory_bytes":536870912,"pids_max":256,"swap":1})", R"([1,2,3])"}) {
    ExpectRefused(std::string(R"({"op":"cgroup_update","runtime":"ns","id":"sbx_1","limits":)") + l + "}");
  }
  ExpectRefused(R"({"op":"cgroup_freeze","runtime":"ns","id":"sbx_1","frozen":1})");
  // cgroup_attach takes exactly the process's pidfd.
  ExpectRefused(R"({"op":"cgroup_attach","runtime":"ns","id":"sbx_1"})", 0);
  ExpectRefused(R"({"op":"cgroup_attach","runtime":"ns","id":"sbx_1"})", 2);
  ExpectRefused(R"({"op":"cgroup_remove_parents","runtime":"ns"})");
}

TEST(ProtocolTest, KillChildTakesOnlyOnePidfd) {
  Request kill;
  kill.op = Op::kKillChild;
  EXPECT_EQ(EncodeRequest(kill), R"({"op":"kill_child"})");
  EXPECT_EQ(Decoded(EncodeRequest(kill), 1).op, Op::kKillChild);
  ExpectRefused(R"({"op":"kill_child"})", 0);
  ExpectRefused(R"({"op":"kill_child"})", 2);
  // No pid, signal or target by number: the descriptor is the whole request.
  ExpectRefused(R"({"op":"kill_child","pid":1})", 1);
  ExpectRefused(R"({"op":"kill_child","signal":15})", 1);
}

TEST(ProtocolTest, UsernsMapTakesASlotAShapeAndOnlyAVmmsKvmGroup) {
  Request map;
  map.op = Op::kUsernsMap;
  map.uid_slot = 7;
  map.shape = runtime::ns::IdMapShape::kOneId;
  map.kvm_gid = 108;
  Request got = Decoded(EncodeRequest(map), 1);
  EXPECT_EQ(got.uid_slot, 7);
  EXPECT_EQ(got.shape, runtime::ns::IdMapShape::kOneId);
  EXPECT_EQ(got.kvm_gid, 108);
  map.shape = runtime::ns::IdMapShape::kSandbox;
  map.kvm_gid = 0;
  EXPECT_EQ(Decoded(EncodeRequest(map), 1).shape, runtime::ns::IdMapShape::kSandbox);

  const std::string ok = R"({"op":"userns_map","uid_slot":7,"shape":"one_id","kvm_gid":0})";
  EXPECT_TRUE(DecodeRequest(ok, 1).ok());
  ExpectRefused(ok, 0);
  ExpectRefused(ok, 2);
  // The kvm group only for a VMM, never a slot's id or root's; no map text, no uid base.
  ExpectRefused(R"({"op":"userns_map","uid_slot":7,"shape":"sandbox","kvm_gid":108})", 1);
  ExpectRefused(R"({"op":"userns_map","uid_slot":7,"shape":"one_id","kvm_gid":1048576})", 1);
  ExpectRefused(R"({"op":"userns_map","uid_slot":7,"shape":"one_id","kvm_gid":-1})", 1);
  ExpectRefused(R"({"op":"userns_map","uid_slot":16384,"shape":"one_id","kvm_gid":0})", 1);
  ExpectRefused(R"({"op":"userns_map","uid_slot":7,"shape":"root","kvm_gid":0})", 1);
  ExpectRefused(R"({"op":"userns_map","uid_slot":7,"shape":"one_id"})", 1);
  ExpectRefused(R"({"op":"userns_map","uid_slot":7,"shape":"one_id","kvm_gid":0,"uid_map":"0 0 1"})", 1);
}

TEST(ProtocolTest, UidLeasesTakeOneSlot) {
  Request acquire;
  acquire.op = Op::kUidAcquire;
  EXPECT_EQ(Decoded(EncodeRequest(acquire)).preferred, -1);
  acquire.preferred = 16383;
  EXPECT_EQ(Decoded(EncodeRequest(acquire)).preferred, 16383);
  Request release;
  release.op = Op::kUidRelease;
  release.uid_slot = 5;
  EXPECT_EQ(Decoded(EncodeRequest(release)).uid_slot, 5);
  ExpectRefused(R"({"op":"uid_acquire","preferred":-2})");
  ExpectRefused(R"({"op":"uid_acquire","preferred":16384})");
  ExpectRefused(R"({"op":"uid_acquire"})");
  ExpectRefused(R"({"op":"uid_release","uid_slot":-1})");
  ExpectRefused(R"({"op":"uid_release","uid_slot":3})", 1);
}

TEST(ProtocolTest, IdmapTreeTakesASlotADirectoryAndAPidfdAndNoPath) {
  Request idmap;
  idmap.op = Op::kIdmapTree;
  idmap.uid_slot = 16383;
  auto r = DecodeRequest(EncodeRequest(idmap), 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->uid_slot, 16383);
  EXPECT_FALSE(r->read_only);
  idmap.read_only = true;
  EXPECT_TRUE(Decoded(EncodeRequest(idmap), 2).read_only);
  ExpectRefused(R"({"op":"idmap_tree","uid_slot":3,"read_only":1})", 2);
  ExpectRefused(R"({"op":"idmap_tree","uid_slot":3})", 2);
  ExpectRefused(EncodeRequest(idmap), 1);
  ExpectRefused(EncodeRequest(idmap), 0);
  ExpectRefused(R"({"op":"idmap_tree","uid_slot":16384})", 2);
  ExpectRefused(R"({"op":"idmap_tree"})", 2);
  ExpectRefused(R"({"op":"idmap_tree","uid_slot":3,"read_only":true,"path":"/etc"})", 2);
}

TEST(ProtocolTest, CgroupParentsTakeARuntimeAndABoolean) {
  Request r;
  r.op = Op::kCgroupParents;
  r.runtime = CgroupRuntime::kVm;
  r.present = true;
  Request back = Decoded(EncodeRequest(r), 0);
  EXPECT_EQ(back.runtime, CgroupRuntime::kVm);
  EXPECT_TRUE(back.present);
  ExpectRefused(EncodeRequest(r), 1);
  ExpectRefused(R"({"op":"cgroup_parents","runtime":"ns"})", 0);
  ExpectRefused(R"({"op":"cgroup_parents","runtime":"ns","present":"yes"})", 0);
  ExpectRefused(R"({"op":"cgroup_parents","runtime":"other","present":true})", 0);
  ExpectRefused(R"({"op":"cgroup_parents","runtime":"ns","present":true,"name":"../x"})", 0);
}

TEST(ProtocolTest, PoolActsTakeOneComponentABoundedLimitAndTheirDescriptors) {
  Request del;
  del.op = Op::kSubvolDelete;
  del.name = ".sbx_1.new";
  EXPECT_EQ(Decoded(EncodeRequest(del), 1).name, ".sbx_1.new");
  ExpectRefused(EncodeRequest(del), 0);
  for (const char* bad : {"", ".", "..", "a/b", "../x", "x\\0", "sbx 1", "sbx\\n"}) {
    ExpectRefused(nlohmann::json{{"op", "subvol_delete"}, {"name", bad}}.dump(), 1);
  }
  ExpectRefused(nlohmann::json{{"op", "subvol_delete"}, {"name", std::string(129, 'a')}}.dump(), 1);
  ExpectRefused(R"({"op":"subvol_delete","name":7})", 1);
  Request snap;
  snap.op = Op::kSubvolSnapshot;
  snap.name = "snap_1";
  snap.read_only = true;
  Request back = Decoded(EncodeRequest(snap), 2);
  EXPECT_EQ(back.name, "snap_1");
  EXPECT_TRUE(back.read_only);
  ExpectRefused(EncodeRequest(snap), 1);
  for (const char* bad : {"", ".", "..", "a/b", "../x"}) {
    ExpectRefused(nlohmann::json{{"op", "subvol_snapshot"}, {"name", bad}, {"read_only", true}}.dump(), 2);
  }
  ExpectRefused(R"({"op":"subvol_snapshot","name":"s"})", 2);
  ExpectRefused(R"({"op":"subvol_snapshot","name":"s","read_only":1})", 2);
  ExpectRefused(R"({"op":"subvol_snapshot","name":"s","read_only":true,"path":"/etc"})", 2);
  Request create;
  create.op = Op::kSubvolCreate;
  create.name = "tmp-0123456789abcdef";
  EXPECT_EQ(Decoded(EncodeRequest(create), 1).name, "tmp-0123456789abcdef");
  ExpectRefused(EncodeRequest(create), 0);
  ExpectRefused(EncodeRequest(create), 2);
  for (const char* bad : {"", ".", "..", "a/b", "../x"}) {
    ExpectRefused(nlohmann::json{{"op", "subvol_create"}, {"name", bad}}.dump(), 1);
  }
  ExpectRefused(R"({"op":"subvol_create","name":"s","mode":511})", 1);
  Request state;
  state.op = Op::kVmStateDir;
  EXPECT_EQ(Decoded(EncodeRequest(state), 1).op, Op::kVmStateDir);
  ExpectRefused(EncodeRequest(state), 0);
  ExpectRefused(R"({"op":"vm_state_dir","name":"x"})", 1);
  Request import;
  import.op = Op::kImportOpen;
  import.source = "/srv/imports/rootfs.tar";
  EXPECT_EQ(Decoded(EncodeRequest(import), 0).source, "/srv/imports/rootfs.tar");
  ExpectRefused(EncodeRequest(import), 1);
  for (const std::string& bad : {std::string(""), std::string("relative"), std::string("/a\0b", 4),
                                 "/" + std::string(kMaxImportSourceLen, 'a')}) {
    ExpectRefused(nlohmann::json{{"op", "import_open"}, {"source", bad}}.dump(), 0);
  }
  ExpectRefused(R"({"op":"import_open","source":7})", 0);
  ExpectRefused(R"({"op":"import_open"})", 0);
  Request limit;
  limit.op = Op::kQgroupLimit;
  limit.bytes = int64_t{1} << 60;
  EXPECT_EQ(Decoded(EncodeRequest(limit), 1).bytes, int64_t{1} << 60);
  ExpectRefused(R"({"op":"qgroup_limit","bytes":0})", 1);
  ExpectRefused(R"({"op":"qgroup_limit","bytes":1152921504606846977})", 1);
  ExpectRefused(R"({"op":"qgroup_limit","bytes":1048576})", 0);
  Request rescan;
  rescan.op = Op::kQuotaRescan;
  Decoded(EncodeRequest(rescan));
  ExpectRefused(R"({"op":"quota_rescan"})", 1);
  ExpectRefused(R"({"op":"quota_rescan","path":"/"})");
}

TEST(ProtocolTest, NiceRequestsTakeANormalOrLowerPriority) {
  Request child;
  child.op = Op::kChildNice;
  child.nice = 19;
  EXPECT_EQ(Decoded(EncodeRequest(child), 1).nice, 19);
  ExpectRefused(EncodeRequest(child), 0);
  Request thread;
  thread.op = Op::kNodeThreadNice;
  thread.tid = 4194304;
  thread.nice = 0;
  Request got = Decoded(EncodeRequest(thread));
  EXPECT_EQ(got.tid, 4194304);
  EXPECT_EQ(got.nice, 0);
  ExpectRefused(EncodeRequest(thread), 1);
  // Never above normal priority, never a tid the kernel cannot have, never a pid by number.
  ExpectRefused(R"({"op":"child_nice","nice":-1})", 1);
  ExpectRefused(R"({"op":"child_nice","nice":20})", 1);
  ExpectRefused(R"({"op":"child_nice","nice":"0"})", 1);
  ExpectRefused(R"({"op":"child_nice","nice":0,"pid":1})", 1);
  ExpectRefused(R"({"op":"node_thread_nice","tid":0,"nice":0})");
  ExpectRefused(R"({"op":"node_thread_nice","tid":4194305,"nice":0})");
  ExpectRefused(R"({"op":"node_thread_nice","tid":100,"nice":-20})");
  ExpectRefused(R"({"op":"node_thread_nice","nice":0})");
}

TEST(ProtocolTest, RefusesMalformedRequests) {
  ExpectRefused("");
  ExpectRefused("not json");
  ExpectRefused("[]");
  ExpectRefused("{}");
  ExpectRefused(R"({"op": 7})");
  ExpectRefused(R"({"op": "mount", "path": "/"})");
  ExpectRefused(R"({"op": "hello", "path": "/etc"})");      // a field the op does not take
  ExpectRefused(R"({"op": "net_detach"})");                  // a missing field
  ExpectRefused(R"({"op": "net_detach", "uid_slot": "3"})");  // mistyped
  ExpectRefused(R"({"op": "net_detach", "uid_slot": 1.5})");
  ExpectRefused(R"({"op": "net_detach", "uid_slot": -1})");
  ExpectRefused(R"({"op": "net_detach", "uid_slot": 16384})");
  ExpectRefused(R"({"op": "net_reconcile", "keep": 3})");
  ExpectRefused(R"({"op": "net_reconcile", "keep": [1, "sp00-1"]})");
  ExpectRefused(R"({"op": "net_reconcile", "keep": [99999]})");
  ExpectRefused(R"({"op": "seqpacket_pair", "send_buffer_bytes": 1073741824})");
  ExpectRefused(R"({"op": "seqpacket_pair", "send_buffer_bytes": 0})");
  ExpectRefused(std::string(kMaxMessageBytes + 1, ' '));
  std::string many = R"({"op": "net_reconcile", "keep": [)";
  for (int i = 0; i < 16385; ++i) many += (i ? "," : "") + std::to_string(i % 100);
  ExpectRefused(many + "]}");
}

TEST(ProtocolTest, RefusesBadGatewayPorts) {
  const std::string head = R"({"op": "firewall_install", "ports": )";
  ExpectRefused(head + R"({"dns": 53, "http": 20001, "tls": 20002, "proxy": 20003, "tcp": 20004}})");
  ExpectRefused(head + R"({"dns": 20000, "http": 20000, "tls": 20002, "proxy": 20003, "tcp": 20004}})");
  ExpectRefused(head + R"({"dns": 20000, "http": 20001, "tls": 20002, "proxy": 20003}})");
  ExpectRefused(head + R"({"dns": 20000, "http": 20001, "tls": 20002, "proxy": 20003, "tcp": 70000}})");
  ExpectRefused(head + R"({"dns": 20000, "http": 20001, "tls": 20002, "proxy": 20003, "tcp": 20004, "x": 1}})");
  ExpectRefused(head + R"("20000"})");
}

TEST(ProtocolTest, EachOpTakesExactlyItsDescriptors) {
  ExpectRefused(R"({"op": "net_attach", "uid_slot": 3})", 0);
  ExpectRefused(R"({"op": "net_attach", "uid_slot": 3})", 2);
  ExpectRefused(R"({"op": "hello"})", 1);
  EXPECT_TRUE(DecodeRequest(R"({"op": "net_attach", "uid_slot": 3})", 1).ok());
  // net_tap takes none: the broker makes the descriptor and sends it back.
  ExpectRefused(R"({"op": "net_tap", "uid_slot": 3})", 1);
  ExpectRefused(R"({"op": "net_tap", "uid_slot": -1})");
  ExpectRefused(R"({"op": "net_tap", "uid_slot": 3, "name": "eth0"})");
  EXPECT_TRUE(DecodeRequest(R"({"op": "net_tap", "uid_slot": 3})", 0).ok());
}

TEST(ProtocolTest, RepliesCarryTheBrokersErrorCode) {
  auto ok = DecodeReply(EncodeOk({{"net_slot", 4}}));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["net_slot"], 4);
  auto err = DecodeReply(EncodeError(PermissionDenied("not a sandbox")));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(err.status().message().find("not a sandbox"), std::string::npos);
  EXPECT_EQ(DecodeReply("garbage").status().code(), StatusCode::kInternal);
  EXPECT_EQ(DecodeReply(R"({"ok": false, "code": "no_such_code"})").status().code(), StatusCode::kInternal);
  // Not UTF-8 in a message is replaced, never thrown.
  EXPECT_FALSE(DecodeReply(EncodeError(InvalidArgument("bad \xff byte"))).ok());
}

TEST(ProtocolTest, DatagramsCarryTheirDescriptorsAndRefuseTooMany) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd pr(p[0]), pw(p[1]);
  ASSERT_TRUE(SendDatagram(a.get(), "hello", {pw.get()}).ok());
  auto d = ReceiveDatagram(b.get());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->bytes, "hello");
  ASSERT_EQ(d->fds.size(), 1u);
  ASSERT_EQ(::write(d->fds[0].get(), "x", 1), 1);  // it is the pipe's write end
  char c = 0;
  ASSERT_EQ(::read(pr.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');

  // Three descriptors, sent by hand (SendDatagram refuses to): refused, and none kept.
  int three[3] = {pw.get(), pw.get(), pw.get()};
  char ch = 'm';
  iovec iov{&ch, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof three)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof three);
  std::memcpy(CMSG_DATA(cm), three, sizeof three);
  ASSERT_EQ(::sendmsg(a.get(), &msg, 0), 1);
  auto refused = ReceiveDatagram(b.get());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(SendDatagram(a.get(), "x", {1, 1, 1}).ok());

  a.reset();
  EXPECT_EQ(ReceiveDatagram(b.get()).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace space::broker
