// workload/trace_input.h
//
// Owns: the bytes of a trace as the importers see them, read once from the start to the end: a
// regular file, `-` (standard input), a pipe, a FIFO or a process substitution (`<(cat f)`,
// `/dev/stdin`), or a buffer in memory; gzip (RFC 1952, several members allowed) and Zstandard
// (RFC 8878, several frames allowed) are recognised by their magic bytes, not by the file name, and
// decompressed as they stream. Nothing seeks or reopens, so a pipe works exactly as a file does.
// The first bytes can be looked at before reading (Head), for format detection.
// Does not own: what the bytes mean (workload/importers.h).
//
// Thread-safety: one TraceInput belongs to one thread.
// Units: bytes of decompressed content.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"

namespace bakeoff::workload {

enum class Compression { kNone, kGzip, kZstd };
const char* CompressionName(Compression compression);  // "none", "gzip", "zstd"

// The name a path stands for in messages: "<stdin>" for "-", else the path as given.
std::string TraceInputName(const std::filesystem::path& path);

class TraceInput {
 public:
  // Opens `path` ("-": standard input) and reads its first bytes to recognise compression.
  // Errors: kInvalidInput when it cannot be opened (the user named it), or when it is compressed
  // in a way bakeoff does not read (bzip2, xz: the message says how to decompress it first); kIo
  // when reading fails.
  static Result<std::unique_ptr<TraceInput>> Open(const std::filesystem::path& path);
  // Reads `content` (which must outlive the TraceInput), compressed or not.
  static Result<std::unique_ptr<TraceInput>> FromBuffer(std::string_view content,
                                                        std::string_view name);

  ~TraceInput();
  TraceInput(const TraceInput&) = delete;
  TraceInput& operator=(const TraceInput&) = delete;

  const std::string& name() const { return name_; }
  Compression compression() const { return compression_; }

  // The first decompressed bytes: up to `max`, fewer only when the content is shorter. Reading
  // them does not consume them: Read still returns them first. REQUIRES: Read not called yet.
  Result<std::string_view> Head(std::size_t max);

  // Copies up to `n` next decompressed bytes into `dst`; 0 at the end. Errors: kIo when reading
  // fails; kInvalidInput when compressed data is corrupt or ends early ("truncated"), naming the
  // byte offset of the compressed input.
  Result<std::size_t> Read(char* dst, std::size_t n);

  // Everything not read yet.
  Result<std::string> ReadAll();

 public:
  class Decoder;  // the decompressor in use; defined in the .cc file

 private:
  TraceInput() = default;
  Status Start();                                         // recognises the compression
  Result<std::size_t> ReadRaw(char* dst, std::size_t n);  // compressed bytes, 0 at the end
  Result<std::size_t> ReadDecoded(char* dst, std::size_t n);

  std::string name_;
  int fd_ = -1;
  bool owns_fd_ = false;
  std::string_view buffer_;  // for FromBuffer
  std::size_t buffer_at_ = 0;
  std::uint64_t raw_offset_ = 0;  // compressed bytes consumed so far, for messages
  std::string raw_peek_;          // raw bytes read to recognise the compression, not yet used
  Compression compression_ = Compression::kNone;
  std::unique_ptr<Decoder> decoder_;
  std::string head_;  // decoded bytes returned by Head and not read yet
  std::size_t head_at_ = 0;
  bool reading_ = false;
};

}  // namespace bakeoff::workload
