#include "core/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace bakeoff {
namespace {

Error IoError(const std::filesystem::path& path, std::string_view what) {
  return MakeError(ErrorCode::kIo,
                   path.string() + ": " + std::string(what) + ": " + std::strerror(errno));
}

Status WriteAll(int fd, std::string_view bytes, const std::filesystem::path& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path, "write failed");
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return Ok{};
}

}  // namespace

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path, "cannot open for reading");
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return IoError(path, "read failed");
  return content.str();
}

Status WriteFileAtomically(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(temporary, "cannot open for writing");
  Status written = WriteAll(fd, content, temporary);
  if (::close(fd) != 0 && written.ok()) written = IoError(temporary, "write failed");
  if (written.ok() && std::rename(temporary.c_str(), path.c_str()) != 0) {
    written = IoError(path, "cannot write there");
  }
  // A failed write leaves nothing behind: no half file, no .tmp.
  if (!written.ok()) ::unlink(temporary.c_str());
  return written;
}

Result<std::unique_ptr<LineWriter>> LineWriter::Open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(path, "cannot open for writing");
  return std::unique_ptr<LineWriter>(new LineWriter(fd, path));
}

LineWriter::~LineWriter() { ::close(fd_); }

Status LineWriter::Append(std::string_view line) {
  BAKEOFF_CHECK(line.find('\n') == std::string_view::npos) << "a record line holds a newline";
  std::lock_guard lock(mutex_);
  scratch_.assign(line);
  scratch_.push_back('\n');
  return WriteAll(fd_, scratch_, path_);
}

}  // namespace bakeoff
