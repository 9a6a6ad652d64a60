// FileEntry: one file as a sandbox's guest describes it (stat, list), after the node checked
// every field (node/guest_files.h ParseFileEntry). Plain values; no dependencies, so the API
// and E2B layers render it without linking the node.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace space::node {

enum class FileType : uint8_t { kFile, kDir, kSymlink, kOther };

// "file", "dir", "symlink", "other": the words of the v1 API and of the guest protocol.
inline std::string_view FileTypeName(FileType type) {
  switch (type) {
    case FileType::kFile:
      return "file";
    case FileType::kDir:
      return "dir";
    case FileType::kSymlink:
      return "symlink";
    case FileType::kOther:
      return "other";
  }
  return "other";
}

struct FileEntry {
  std::string name;
  std::string path;
  FileType type = FileType::kOther;
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits (07777)
  std::string mtime;  // RFC 3339
  int64_t uid = -1;   // -1: the guest did not say
  int64_t gid = -1;
};

}  // namespace space::node
