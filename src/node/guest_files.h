// File operations on a booted sandbox, carried out by its guest (spaced), which resolves every
// path inside the sandbox's own root: the node never touches a sandbox's files on the host.
// What the guest answers is untrusted: an entry is rebuilt field by field (ParseFileEntry)
// before anything above the node sees it.
//
// Free functions over a LiveSandbox's channel; thread-safe as the channel is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "node/file_entry.h"
#include "node/live.h"

namespace space::node {

// The most a single read or write may move.
inline constexpr size_t kMaxFileBytes = 100u << 20;

// A guest's entry, strictly: name, path and mtime strings of at most 4096 bytes, a known type,
// unsigned size and mode. internal otherwise (the guest broke the protocol).
Result<FileEntry> ParseFileEntry(const nlohmann::json& guest_entry);

Result<std::string> GuestReadFile(LiveSandbox* live, const std::string& path);
// `owner` (user name or uid, "" = root) owns the file and the parents the write creates.
Status GuestWriteFile(LiveSandbox* live, const std::string& path, int mode, std::string_view data,
                      const std::string& owner = "");
Result<FileEntry> GuestStat(LiveSandbox* live, const std::string& path);
// Entries down to `depth` levels (1..8).
Result<std::vector<FileEntry>> GuestList(LiveSandbox* live, const std::string& path, int depth);
// mkdir -p; `owner` as for GuestWriteFile.
Status GuestMakeDir(LiveSandbox* live, const std::string& path, const std::string& owner = "");
Status GuestMove(LiveSandbox* live, const std::string& from, const std::string& to);
Status GuestRemove(LiveSandbox* live, const std::string& path, bool recursive);

}  // namespace space::node
