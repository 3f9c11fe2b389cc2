// core/file.h
//
// Owns: reading whole files and the append-only line writer used for raw records, so an
// interrupted run keeps every line written before the interruption.
//
// Thread-safety: LineWriter::Append may be called from many threads; each line is written whole
// (one write(2) under a mutex) and reaches the kernel before Append returns.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>

#include "core/result.h"

namespace bakeoff {

Result<std::string> ReadFile(const std::filesystem::path& path);

// Writes `content` to `path` through a temporary file and rename, so readers never see half.
// On failure (full disk, `path` a folder) the temporary file is removed and `path` is untouched.
Status WriteFileAtomically(const std::filesystem::path& path, std::string_view content);

class LineWriter {
 public:
  // Creates or truncates `path`.
  static Result<std::unique_ptr<LineWriter>> Open(const std::filesystem::path& path);
  ~LineWriter();
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  // Appends `line` and a '\n'. REQUIRES: line has no '\n'.
  Status Append(std::string_view line);
  const std::filesystem::path& path() const { return path_; }

 private:
  LineWriter(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  std::mutex mutex_;
  int fd_;
  std::filesystem::path path_;
  std::string scratch_;  // GUARDED_BY(mutex_)
};

}  // namespace bakeoff
