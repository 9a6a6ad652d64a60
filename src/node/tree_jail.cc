#include "node/tree_jail.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/capabilities.h"
#include "common/datagram.h"
#include "common/helper_spawn.h"
#include "common/seccomp_denylist.h"
#include "common/syscall.h"
#include "common/unique_fd.h"
#include "node/jail_spawn.h"
#include "runtime/ns/mounts.h"
#include "snapshot/blob_channel.h"
#include "snapshot/chunk_codec.h"
#include "snapshot/exporter.h"
#include "snapshot/manifest.h"
#include "snapshot/read_ahead_store.h"
#include "snapshot/restorer.h"
#include "storage/digest.h"
#include "storage/names.h"

namespace space::node {
namespace {

constexpr DatagramLimits kChannel = {64, 2, "tree jail channel"};
constexpr size_t kMaxEntriesLimit = 1000000;

// What each mode keeps of its namespace's capabilities: a read needs only to pass permission
// checks on reads; a restore writes a tree of other owners (chown, then modes and times, setgid
// bits kept) into directories it has already given away.
const std::vector<int> kReadCaps = {CAP_DAC_READ_SEARCH};
const std::vector<int> kRestoreCaps = {CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID};

std::vector<int> AllBut(const std::vector<int>& keep) {
  std::vector<int> caps;
  for (int c = 0; c <= LastCapability(); ++c) {
    if (std::find(keep.begin(), keep.end(), c) == keep.end()) caps.push_back(c);
  }
  return caps;
}

// The jail's side once it holds its trees: a readable descriptor of each root, then no new
// privileges, only `keep` of its capabilities and a seccomp fence: no new sockets (so no
// network, not even the host's loopback; the channel to the node it already holds), and
// nothing of what no helper does (exec, ptrace, mounts, namespaces...). An error message, or
// empty.
std::string Confine(const Datagram& d, size_t trees, const std::vector<int>& keep, std::vector<UniqueFd>* roots) {
  if (d.fds.size() != trees || d.bytes != "trees") return "receiving the trees: unexpected message";
  // The clones come as O_PATH-like descriptors; their directories must be read.
  for (const UniqueFd& clone : d.fds) {
    UniqueFd root(::openat(clone.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root.valid()) return std::string("opening a tree: ") + std::strerror(errno);
    roots->push_back(std::move(root));
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::string("no_new_privs: ") + std::strerror(errno);
  if (Status st = DropCapabilities(AllBut(keep)); !st.ok()) return st.ToString();
  DenyList fence;
  fence.syscalls = HelperRefusedSyscalls();
  fence.syscalls.insert(fence.syscalls.end(), {"socket", "socketpair", "connect", "accept", "accept4", "bind", "listen"});
  if (Status st = LoadDenyList(fence); !st.ok()) return st.ToString();
  return "";
}

Status WriteAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = RetryEintr([&] { return ::write(fd, bytes.data() + off, bytes.size() - off); });
    if (n < 0) return ErrnoStatus("write", "tree jail output", errno);
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Reads `fd` to its end, at most `limit` bytes: more is an error.
Result<std::string> ReadBounded(int fd, size_t limit) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(fd, buf, sizeof buf); });
    if (n < 0) return ErrnoStatus("read", "tree jail output", errno);
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > limit) {
      return ResourceExhausted("tree jail: output exceeds " + std::to_string(limit) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

Result<std::vector<std::string>> PathList(const nlohmann::json& j, const char* name, size_t* budget) {
  if (!j.contains(name) || !j[name].is_array()) return Internal(std::string("tree jail: no list ") + name);
  std::vector<std::string> out;
  for (const auto& p : j[name]) {
    if (*budget == 0) return Internal("tree jail: more paths than asked for");
    --*budget;
    if (!p.is_string()) return Internal(std::string("tree jail: a non-string in ") + name);
    const std::string& s = p.get_ref<const std::string&>();
    if (s.empty() || s[0] != '/' || s.size() > PATH_MAX || s.find('\0') != std::string::npos) {
      return Internal(std::string("tree jail: a malformed path in ") + name);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

Result<storage::TreeDiff> ParseTreeDiff(const std::string& json, size_t max_entries) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Internal("tree jail: output is not a JSON object");
  if (j.contains("error")) {
    std::string e = j["error"].is_string() ? j["error"].get<std::string>() : "unknown";
    if (e.size() > 1024) e.resize(1024);
    return Internal("tree jail: " + e);
  }
  // A diff may list one entry past the limit in each list before it notices; allow for it.
  size_t budget = max_entries + 3;
  storage::TreeDiff d;
  ASSIGN_OR_RETURN(d.added, PathList(j, "added", &budget));
  ASSIGN_OR_RETURN(d.changed, PathList(j, "changed", &budget));
  ASSIGN_OR_RETURN(d.removed, PathList(j, "removed", &budget));
  if (!j.contains("truncated") || !j["truncated"].is_boolean()) return Internal("tree jail: no truncated flag");
  d.truncated = j["truncated"].get<bool>();
  return d;
}

namespace {

// One run of the jail: `space tree-jail MODE_ARGS...` with idmapped clones of `dirs` (read-only
// unless `writable`), `serve` (when set) talking to it over a stream socket (its fd 5)
// meanwhile; then what it wrote to its output (bounded) and its wait status, once it has exited.
struct JailOutput {
  std::string output;
  int status = 0;
};

Result<JailOutput> RunTreeJail(const TreeJailConfig& config, const std::vector<std::string>& mode_args,
                               const std::vector<std::string>& dirs, bool writable,
                               const std::function<Status(int)>& serve) {
  std::vector<UniqueFd> dir_fds;
  for (const std::string& d : dirs) {
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(d, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    dir_fds.push_back(std::move(fd));
  }
  ASSIGN_OR_RETURN(int64_t slot, config.acquire_slot());
  SlotLease lease(slot, config.release_slot);

  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return ErrnoStatus("socketpair", "tree jail", errno);
  UniqueFd ctl(sp[0]), ctl_child(sp[1]);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "tree jail", errno);
  UniqueFd out_r(out[0]), out_w(out[1]);
  UniqueFd rpc, rpc_child;
  if (serve) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return ErrnoStatus("socketpair", "tree jail", errno);
    rpc.reset(sp[0]);
    rpc_child.reset(sp[1]);
  }

  HelperSpec spec;
  spec.args = {"space", "tree-jail"};
  spec.args.insert(spec.args.end(), mode_args.begin(), mode_args.end());
  spec.fds = {{ctl_child.get(), 3}, {out_w.get(), 4}};
  if (serve) spec.fds.push_back({rpc_child.get(), 5});
  ASSIGN_OR_RETURN(JailChild child, SpawnJailChild(std::move(spec), lease.uid_base(), "tree jail", config.privileged));
  ctl_child.reset();
  out_w.reset();
  rpc_child.reset();
  std::vector<UniqueFd> clones;
  std::vector<int> send;
  for (const UniqueFd& dir : dir_fds) {
    Result<UniqueFd> clone = runtime::ns::IdmapTree(
        config.privileged, {.dir_fd = dir.get(), .pidfd = child.pidfd.get(), .pid = child.pid, .uid_base = lease.uid_base(),
         .read_only = !writable});
    if (!clone.ok()) return child.GiveUp(clone.status().Annotate("tree jail"));
    send.push_back(clone->get());
    clones.push_back(std::move(*clone));
  }
  if (Status st = SendDatagram(ctl.get(), "trees", send, kChannel); !st.ok()) return child.GiveUp(st);
  clones.clear();
  if (serve) {
    if (Status st = serve(rpc.get()); !st.ok()) return child.GiveUp(st);
    rpc.reset();
  }
  Result<std::string> output = ReadBounded(out_r.get(), kMaxTreeJailOutputBytes);
  if (!output.ok()) return child.GiveUp(output.status());
  JailOutput result;
  result.output = std::move(*output);
  if (RetryEintr([&] { return ::waitpid(child.pid, &result.status, 0); }) != child.pid) {
    return ErrnoStatus("waitpid", "tree jail", errno);
  }
  return result;
}

// The jail's JSON result: the error it reports, or (when it reports none) a clean exit.
Result<nlohmann::json> JailJson(const JailOutput& run) {
  auto j = nlohmann::json::parse(run.output, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Internal("tree jail: output is not a JSON object");
  if (j.contains("error")) {
    std::string e = j["error"].is_string() ? j["error"].get<std::string>() : "unknown";
    if (e.size() > 1024) e.resize(1024);
    return Internal("tree jail: " + e);
  }
  if (!WIFEXITED(run.status) || WEXITSTATUS(run.status) != 0) {
    return Internal("tree jail: ended with status " + std::to_string(run.status) + " after a complete result");
  }
  return j;
}

uint64_t Count(const nlohmann::json& j, const char* name) {
  return j.contains(name) && j[name].is_number_unsigned() ? j[name].get<uint64_t>() : 0;
}

}  // namespace

Result<storage::TreeDiff> DiffInTreeJail(const TreeJailConfig& config, const std::string& a_dir,
                                         const std::string& b_dir, size_t max_entries) {
  if (max_entries == 0 || max_entries > kMaxEntriesLimit) return InvalidArgument("diff: max_entries out of range");
  ASSIGN_OR_RETURN(JailOutput run, RunTreeJail(config, {"diff", "--max-entries", std::to_string(max_entries)},
                                               {a_dir, b_dir}, /*writable=*/false, nullptr));
  RETURN_IF_ERROR(JailJson(run).status());
  return ParseTreeDiff(run.output, max_entries);
}

Result<snapshot::ExportStats> ExportInTreeJail(const TreeJailConfig& config, const std::string& tree_dir,
                                               const std::string& snap_id, const std::string& parent_id,
                                               snapshot::BlobStore& store) {
  RETURN_IF_ERROR(snapshot::ValidateSnapId(snap_id));
  if (!parent_id.empty()) RETURN_IF_ERROR(snapshot::ValidateSnapId(parent_id));
  snapshot::BlobChannelStats served;
  auto serve = [&](int fd) -> Status {
    ASSIGN_OR_RETURN(served, snapshot::ServeBlobChannel(fd, store, snapshot::ExportPolicy(snap_id, parent_id)));
    return Status::Ok();
  };
  ASSIGN_OR_RETURN(JailOutput run,
                   RunTreeJail(config, {"export", "--snap-id", snap_id, "--parent", parent_id}, {tree_dir},
                               /*writable=*/false, serve));
  ASSIGN_OR_RETURN(nlohmann::json j, JailJson(run));
  if (!served.manifest_written) return Internal("tree jail: the export ended without its manifest");
  // The counts of what was read come from the jail (they are only reported); what was written,
  // the node counted itself.
  snapshot::ExportStats stats;
  stats.files = Count(j, "files");
  stats.dirs = Count(j, "dirs");
  stats.symlinks = Count(j, "symlinks");
  stats.skipped_special = Count(j, "skipped_special");
  stats.files_reused = Count(j, "files_reused");
  stats.bytes_total = Count(j, "bytes_total");
  stats.bytes_read = Count(j, "bytes_read");
  stats.duration_ms = static_cast<int64_t>(Count(j, "duration_ms"));
  stats.objects_written = served.objects_written;
  stats.bytes_written = served.bytes_written;
  return stats;
}

Result<storage::TreeDigest> DigestInTreeJail(const TreeJailConfig& config, const std::string& tree_dir) {
  ASSIGN_OR_RETURN(JailOutput run, RunTreeJail(config, {"digest"}, {tree_dir}, /*writable=*/false, nullptr));
  ASSIGN_OR_RETURN(nlohmann::json j, JailJson(run));
  storage::TreeDigest d;
  d.digest = j.contains("digest") && j["digest"].is_string() ? j["digest"].get<std::string>() : "";
  if (!storage::DigestHex(d.digest).ok()) return Internal("tree jail: no digest of the form sha256:<64 hex>");
  if (!j.contains("size_bytes") || !j["size_bytes"].is_number_unsigned()) return Internal("tree jail: no size");
  d.size_bytes = j["size_bytes"].get<uint64_t>();
  return d;
}

Status RestoreInTreeJail(const TreeJailConfig& config, const std::string& snap_id, snapshot::BlobStore& store,
                         const std::string& dest_dir) {
  RETURN_IF_ERROR(snapshot::ValidateSnapId(snap_id));
  // Read here only to know which objects the jail may ask for; the jail reads it again.
  ASSIGN_OR_RETURN(snapshot::Manifest m, snapshot::LoadManifest(store, snap_id));
  const snapshot::BlobChannelPolicy policy = snapshot::RestorePolicy(m);
  // The jail asks for one object at a time, in manifest order: the next ones are fetched ahead.
  snapshot::ReadAheadStore ahead(&store, snapshot::RestoreReadOrder(m), kRestoreReadAhead, snapshot::MaxObjectSize());
  auto serve = [&](int fd) { return snapshot::ServeBlobChannel(fd, ahead, policy).status(); };
  ASSIGN_OR_RETURN(JailOutput run, RunTreeJail(config, {"restore", "--snap-id", snap_id}, {dest_dir},
                                               /*writable=*/true, serve));
  return JailJson(run).status();
}

int TreeJailMain(int argc, char** argv) {
  // space tree-jail MODE --flag value ...; fds 3 (the trees), 4 (the result), 5 (an export's or
  // a restore's store channel).
  const std::string mode = argc >= 3 ? argv[2] : "";
  std::map<std::string, std::string> flags;
  bool ok = (mode == "diff" || mode == "export" || mode == "restore" || mode == "digest") && argc % 2 == 1;
  for (int i = 3; ok && i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    ok = flag.rfind("--", 0) == 0 && flags.emplace(flag.substr(2), argv[i + 1]).second;
  }
  long max_entries = 0;
  if (ok && mode == "diff") {
    max_entries = flags.count("max-entries") ? std::strtol(flags["max-entries"].c_str(), nullptr, 10) : 0;
    ok = flags.size() == 1 && max_entries >= 1 && max_entries <= static_cast<long>(kMaxEntriesLimit);
  }
  if (ok && mode == "export") ok = flags.size() == 2 && flags.count("snap-id") && flags.count("parent");
  if (ok && mode == "restore") ok = flags.size() == 1 && flags.count("snap-id");
  if (ok && mode == "digest") ok = flags.empty();
  if (!ok) {
    std::fprintf(stderr,
                 "space tree-jail: started by the node only (diff --max-entries K | export --snap-id S --parent P | "
                 "restore --snap-id S | digest)\n");
    return 2;
  }
  constexpr int kCtl = 3, kOut = 4, kRpc = 5;
  auto fail = [](const std::string& message) {
    (void)WriteAll(kOut, nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return 1;
  };
  Result<Datagram> d = ReceiveDatagram(kCtl, kChannel);
  if (!d.ok()) return fail("receiving the trees: " + d.status().ToString());
  ::close(kCtl);
  std::vector<UniqueFd> roots;
  if (std::string err = Confine(*d, mode == "diff" ? 2 : 1, mode == "restore" ? kRestoreCaps : kReadCaps, &roots);
      !err.empty()) {
    return fail(err);
  }
  d->fds.clear();
  std::string json;
  if (mode == "diff") {
    Result<storage::TreeDiff> diff = storage::DiffTreesAt(roots[0].get(), roots[1].get(), static_cast<size_t>(max_entries));
    if (!diff.ok()) return fail(diff.status().ToString());
    // Names come from the sandbox: not always UTF-8; replaced rather than refused.
    json = nlohmann::json{{"added", diff->added},
                          {"changed", diff->changed},
                          {"removed", diff->removed},
                          {"truncated", diff->truncated}}
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else if (mode == "digest") {
    Result<storage::TreeDigest> d = storage::DigestTreeAt(roots[0].get());
    if (!d.ok()) return fail(d.status().ToString());
    json = nlohmann::json{{"digest", d->digest}, {"size_bytes", d->size_bytes}}.dump();
  } else if (mode == "restore") {
    snapshot::ChannelBlobStore store(kRpc);
    Status st = snapshot::RestoreAt(flags["snap-id"], store, roots[0].get());
    ::close(kRpc);
    if (!st.ok()) return fail(st.ToString());
    json = nlohmann::json{{"restored", true}}.dump();
  } else {
    snapshot::ChannelBlobStore store(kRpc);
    Result<snapshot::ExportStats> st = snapshot::ExportAt(roots[0].get(), flags["snap-id"], flags["parent"], store);
    ::close(kRpc);  // the node's side of the channel ends here, before the result
    if (!st.ok()) return fail(st.status().ToString());
    json = nlohmann::json{{"files", st->files},
                          {"dirs", st->dirs},
                          {"symlinks", st->symlinks},
                          {"skipped_special", st->skipped_special},
                          {"files_reused", st->files_reused},
                          {"bytes_total", st->bytes_total},
                          {"bytes_read", st->bytes_read},
                          {"duration_ms", st->duration_ms}}
               .dump();
  }
  return WriteAll(kOut, json).ok() ? 0 : 1;
}

}  // namespace space::node
