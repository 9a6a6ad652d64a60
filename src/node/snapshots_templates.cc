// Snapshots: templates carried to every node through the snapshot store.
#include <openssl/crypto.h>

#include <nlohmann/json.hpp>

#include "common/hmac.h"
#include "common/log.h"
#include "common/random.h"
#include "node/snapshots.h"
#include "snapshot/gc.h"
#include "snapshot/write_behind_store.h"

namespace space::node {
namespace {

constexpr size_t kMaxRecordBytes = 64 << 10;

// The manifest of a template's tree is named by its digest (one per tree, whoever names it),
// in the shape of a snapshot id, since the pool restores it as one: 88 bits of the digest.
std::string ManifestFor(const std::string& digest) { return "snap_" + digest.substr(digest.find(':') + 1, 22); }

bool IsDigest(const std::string& d) {
  return d.size() == 71 && d.compare(0, 7, "sha256:") == 0 && snapshot::IsSha256Hex(d.substr(7));
}

struct Published {
  std::string team;
  std::string digest;
  std::string manifest;
};

// HMAC-SHA256 of the record's fields (none holds a newline: names, teams and digests are
// validated narrower), hex.
std::string RecordMac(const std::string& key, const std::string& name, const Published& p) {
  return HmacSha256Hex(key, "space template record v1\n" + name + "\n" + p.team + "\n" + p.digest + "\n" + p.manifest);
}

// The store is untrusted: a record is read as hostile input, and its manifest name must be the
// one its digest gives (so a record cannot point a name at another template's tree).
Result<Published> ReadRecord(snapshot::BlobStore& blobs, const std::string& name, const std::string& key) {
  ASSIGN_OR_RETURN(std::string raw, blobs.Get(snapshot::TemplateKey(name), kMaxRecordBytes));
  auto j = nlohmann::json::parse(raw, nullptr, false);
  auto str = [&](const char* k) {
    return j.is_object() && j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "";
  };
  Published p{str("team"), str("digest"), str("manifest")};
  if (str("name") != name || !IsDigest(p.digest) || p.manifest != ManifestFor(p.digest) || p.team.size() > 64) {
    return Internal("the store's record of template " + name + " is malformed");
  }
  if (!key.empty()) {
    const std::string want = RecordMac(key, name, p);
    const std::string got = str("mac");
    if (got.size() != want.size() || CRYPTO_memcmp(got.data(), want.data(), want.size()) != 0) {
      return PermissionDenied("the store's record of template " + name +
                              " was not made by a node of this fleet (its MAC does not check out): refused");
    }
  }
  return p;
}

}  // namespace

Status Snapshots::PublishTemplate(const storage::TemplateInfo& t) {
  if (auto have = ReadRecord(*d_.blobs, t.name, d_.template_record_key);
      have.ok() && have->digest == t.digest && have->team == t.team) {
    return Status::Ok();
  }
  const std::string manifest = ManifestFor(t.digest);
  // Shared until the record is written: a withdrawal (exclusive) cannot drop the manifest
  // between the check that it is there and the record that names it.
  ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Shared());
  ASSIGN_OR_RETURN(bool exported, d_.blobs->Exists(snapshot::ManifestKey(manifest)));
  if (!exported) {
    // A template holds files of other owners: read in the tree jail, as a snapshot is.
    snapshot::WriteBehindStore uploads(d_.blobs, kExportUploads);
    ASSIGN_OR_RETURN(snapshot::ExportStats stats,
                     ExportInTreeJail(d_.tree_jail, d_.pool->TemplatePath(t.digest), manifest, "", uploads));
    LogInfo("store", "published template " + t.name + " (" + t.digest + "): " + std::to_string(stats.bytes_read) +
                         " bytes read, " + std::to_string(stats.bytes_written) + " stored");
  }
  nlohmann::json record = {{"name", t.name}, {"team", t.team}, {"digest", t.digest}, {"manifest", manifest}};
  if (!d_.template_record_key.empty()) {
    record["mac"] = RecordMac(d_.template_record_key, t.name, Published{t.team, t.digest, manifest});
  }
  return d_.blobs->Put(snapshot::TemplateKey(t.name), record.dump());
}

Result<storage::TemplateInfo> Snapshots::PullTemplate(const std::string& name, bool* restored) {
  if (restored != nullptr) *restored = false;
  auto record = ReadRecord(*d_.blobs, name, d_.template_record_key);
  if (!record.ok()) {
    if (record.status().code() == StatusCode::kNotFound) {
      return NotFound("template " + name + " is not on this node, and no node published it to the store");
    }
    return record.status();
  }
  if (auto local = d_.pool->GetTemplate(name); local.ok() && local->digest == record->digest) return local;
  // Only restores run one at a time (the check that the tree is missing is made again under
  // the lock): a create whose template is already here does not wait for another's pull.
  std::lock_guard<std::mutex> pulling(pull_mu_);
  if (!d_.pool->HasTemplateTree(record->digest)) {
    // Restored as a snapshot, cloned into a scratch root and committed as a layer: the pool
    // digests the tree itself. The scratch root has no record, so a crash in between leaves
    // what Reconcile removes.
    const std::string scratch = NewId("sbx");
    Status st;
    {
      ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Shared());
      st = d_.pool->ImportSnapshot(record->manifest, [&](const std::string& dir) {
        return RestoreInTreeJail(d_.tree_jail, record->manifest, *d_.blobs, dir);
      });
    }
    if (st.ok()) st = d_.pool->CreateRootFromSnapshot(scratch, record->manifest, 0).status();
    Result<storage::TemplateInfo> layer = st.ok() ? d_.pool->CommitRoot(scratch) : Result<storage::TemplateInfo>(st);
    if (Status d = d_.pool->DestroyRoot(scratch); !d.ok()) LogWarn("store", d.ToString());
    if (Status d = d_.pool->DeleteSnapshot(record->manifest); !d.ok()) LogWarn("store", d.ToString());
    if (!layer.ok()) return layer.status().Annotate("pull template " + name);
    if (layer->digest != record->digest) {
      return Internal("template " + name + " from the store digests to " + layer->digest + ", not the recorded " +
                      record->digest);
    }
    LogInfo("store", "pulled template " + name + " (" + record->digest + ")");
    if (restored != nullptr) *restored = true;
  }
  return d_.pool->NameTemplate(name, record->digest, record->team);
}

Status Snapshots::WithdrawTemplate(const std::string& name) {
  auto record = ReadRecord(*d_.blobs, name, d_.template_record_key);
  RETURN_IF_ERROR(d_.blobs->Delete(snapshot::TemplateKey(name)));
  if (!record.ok()) return Status::Ok();
  // Its tree's manifest goes too when no other record names it, so the store's garbage
  // collection can free the chunks. Exclusive: no pull is reading it meanwhile.
  ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Exclusive());
  ASSIGN_OR_RETURN(std::vector<std::string> keys, d_.blobs->List(snapshot::kTemplatesPrefix));
  for (const auto& key : keys) {
    auto other = snapshot::NameFromTemplateKey(key);
    if (!other.ok()) continue;
    auto r = ReadRecord(*d_.blobs, *other, d_.template_record_key);
    if (r.ok() && r->manifest == record->manifest) return Status::Ok();
  }
  return snapshot::DeleteManifest(*d_.blobs, record->manifest);
}

}  // namespace space::node
