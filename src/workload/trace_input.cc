// workload/trace_input.cc
//
// Owns: one-pass reading of a trace's bytes and their decompression. The compression is told from
// the first four bytes (gzip: 1f 8b, RFC 1952; Zstandard: 28 b5 2f fd, RFC 8878), which are read
// and kept, never sought back to, so the same code serves files, pipes and standard input. zlib
// (inflate with gzip framing, reset at each member's end so concatenated members read as one, as
// gzip -d does) and libzstd (the streaming decoder, which reads concatenated frames by itself) do
// the decompression. Input that ends inside a member or frame is reported as truncated.
#include "workload/trace_input.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "core/check.h"

namespace bakeoff::workload {

namespace {

constexpr std::size_t kRawChunkBytes = std::size_t{1} << 16;

bool StartsWith(std::string_view bytes, std::string_view magic) {
  return bytes.size() >= magic.size() && bytes.substr(0, magic.size()) == magic;
}

}  // namespace

const char* CompressionName(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "none";
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
  }
  return "?";
}

std::string TraceInputName(const std::filesystem::path& path) {
  return path == "-" ? std::string("<stdin>") : path.string();
}

// Turns compressed bytes, pulled through TraceInput::ReadRaw, into content.
class TraceInput::Decoder {
 public:
  explicit Decoder(TraceInput& input) : input_(input), in_(kRawChunkBytes) {}
  virtual ~Decoder() = default;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
  // REQUIRES: n > 0. Returns 0 only at the end of the content.
  virtual Result<std::size_t> Read(char* dst, std::size_t n) = 0;

 protected:
  // Refills the input buffer; returns the number of bytes now available (0: the end).
  Result<std::size_t> Fill() {
    Result<std::size_t> got = input_.ReadRaw(in_.data(), in_.size());
    if (!got.ok()) return got;
    if (*got == 0) eof_ = true;
    return got;
  }
  Error Corrupt(const char* kind, std::uint64_t at, std::string_view why) const {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("{}: {} data is corrupt near compressed byte {} ({})",
                                 input_.name(), kind, at, why));
  }
  Error Truncated(const char* kind) const {
    return MakeError(
        ErrorCode::kInvalidInput,
        fmt::format("{}: {} data ends early, after {} compressed bytes (truncated file?)",
                    input_.name(), kind, raw_offset()));
  }

  std::uint64_t raw_offset() const { return input_.raw_offset_; }

  TraceInput& input_;
  std::vector<char> in_;
  bool eof_ = false;
};

class GzipDecoder final : public TraceInput::Decoder {
 public:
  explicit GzipDecoder(TraceInput& input) : Decoder(input) {
    // 16 + MAX_WBITS: gzip framing only (header and CRC checked), the largest window.
    ok_ = inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK;
  }
  ~GzipDecoder() override {
    if (ok_) inflateEnd(&z_);
  }
  Result<std::size_t> Read(char* dst, std::size_t n) override {
    if (!ok_) return MakeError(ErrorCode::kInternal, input_.name() + ": zlib could not start");
    z_.next_out = reinterpret_cast<Bytef*>(dst);
    z_.avail_out = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    const uInt want = z_.avail_out;
    while (z_.avail_out == want) {
      if (z_.avail_in == 0 && !eof_) {
        Result<std::size_t> got = Fill();
        if (!got.ok()) return got;
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(*got);
      }
      if (member_done_) {
        if (z_.avail_in == 0) {
          if (eof_) break;
          continue;
        }
        inflateReset(&z_);  // another member follows
        member_done_ = false;
      }
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc == Z_BUF_ERROR || rc == Z_OK) {
        if (z_.avail_in == 0 && eof_ && z_.avail_out == want && rc == Z_BUF_ERROR)
          return Truncated("gzip");
      } else {
        return Corrupt("gzip", Consumed(), z_.msg != nullptr ? z_.msg : zError(rc));
      }
    }
    return static_cast<std::size_t>(want - z_.avail_out);
  }

 private:
  std::uint64_t Consumed() const { return raw_offset() - z_.avail_in; }
  z_stream z_{};
  bool ok_ = false;
  bool member_done_ = false;
};

class ZstdDecoder final : public TraceInput::Decoder {
 public:
  explicit ZstdDecoder(TraceInput& input) : Decoder(input), stream_(ZSTD_createDStream()) {
    if (stream_ != nullptr) ZSTD_initDStream(stream_);
  }
  ~ZstdDecoder() override { ZSTD_freeDStream(stream_); }
  Result<std::size_t> Read(char* dst, std::size_t n) override {
    if (stream_ == nullptr)
      return MakeError(ErrorCode::kInternal, input_.name() + ": libzstd could not start");
    ZSTD_outBuffer out{dst, n, 0};
    while (out.pos == 0) {
      if (in_buffer_.pos == in_buffer_.size && !eof_) {
        Result<std::size_t> got = Fill();
        if (!got.ok()) return got;
        in_buffer_ = ZSTD_inBuffer{in_.data(), *got, 0};
      }
      if (in_buffer_.pos == in_buffer_.size && eof_ && pending_ == 0)
        break;  // every frame complete
      const std::size_t before = out.pos;
      pending_ = ZSTD_decompressStream(stream_, &out, &in_buffer_);
      if (ZSTD_isError(pending_) != 0) {
        return Corrupt("zstd", raw_offset() - (in_buffer_.size - in_buffer_.pos),
                       ZSTD_getErrorName(pending_));
      }
      if (in_buffer_.pos == in_buffer_.size && eof_ && out.pos == before && pending_ != 0)
        return Truncated("zstd");
    }
    return out.pos;
  }

 private:
  ZSTD_DStream* stream_;
  ZSTD_inBuffer in_buffer_{nullptr, 0, 0};
  std::size_t pending_ = 1;  // 0 when the last frame is complete and flushed
};

Result<std::unique_ptr<TraceInput>> TraceInput::Open(const std::filesystem::path& path) {
  std::unique_ptr<TraceInput> in(new TraceInput());
  in->name_ = TraceInputName(path);
  if (path == "-") {
    in->fd_ = STDIN_FILENO;
  } else {
    in->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in->fd_ < 0) {
      // The file the user named is missing or unreadable: their input is wrong (exit 2 everywhere).
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("{}: cannot open: {}", in->name_, std::strerror(errno)));
    }
    in->owns_fd_ = true;
  }
  struct stat st {};
  if (::fstat(in->fd_, &st) == 0 && S_ISDIR(st.st_mode)) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("{}: is a folder, not a trace file", in->name_));
  }
  if (Status started = in->Start(); !started.ok()) return started.error();
  return in;
}

Result<std::unique_ptr<TraceInput>> TraceInput::FromBuffer(std::string_view content,
                                                           std::string_view name) {
  std::unique_ptr<TraceInput> in(new TraceInput());
  in->name_ = std::string(name);
  in->buffer_ = content;
  if (Status started = in->Start(); !started.ok()) return started.error();
  return in;
}

TraceInput::~TraceInput() {
  decoder_.reset();
  if (owns_fd_) ::close(fd_);
}

Status TraceInput::Start() {
  // Four bytes, however short the reads of a pipe are.
  char magic[4];
  std::size_t have = 0;
  while (have < sizeof magic) {
    Result<std::size_t> got = ReadRaw(magic + have, sizeof magic - have);
    if (!got.ok()) return got.error();
    if (*got == 0) break;
    have += *got;
  }
  raw_peek_.assign(magic, have);
  raw_offset_ = 0;  // the peeked bytes are handed out again by ReadRaw
  const std::string_view m = raw_peek_;
  if (StartsWith(m, "\x1f\x8b")) {
    compression_ = Compression::kGzip;
    decoder_ = std::make_unique<GzipDecoder>(*this);
  } else if (StartsWith(m, "\x28\xb5\x2f\xfd")) {
    compression_ = Compression::kZstd;
    decoder_ = std::make_unique<ZstdDecoder>(*this);
  } else {
    const char* other = StartsWith(m, "\xfd\x37\x7a\x58")   ? "xz"
                        : StartsWith(m, "BZh")              ? "bzip2"
                        : StartsWith(m, "\x04\x22\x4d\x18") ? "lz4"
                                                            : nullptr;
    if (other != nullptr) {
      return MakeError(
          ErrorCode::kInvalidInput,
          fmt::format(
              "{}: the content is {}-compressed; bakeoff reads plain, gzip and zstd traces, so "
              "decompress it first and pipe it in (e.g. {} -dc FILE | bakeoff fingerprint -)",
              name_, other, other));
    }
  }
  return Ok{};
}

Result<std::size_t> TraceInput::ReadRaw(char* dst, std::size_t n) {
  if (!raw_peek_.empty()) {
    const std::size_t take = std::min(n, raw_peek_.size());
    std::memcpy(dst, raw_peek_.data(), take);
    raw_peek_.erase(0, take);
    raw_offset_ += take;
    return take;
  }
  if (fd_ < 0) {
    const std::size_t take = std::min(n, buffer_.size() - buffer_at_);
    std::memcpy(dst, buffer_.data() + buffer_at_, take);
    buffer_at_ += take;
    raw_offset_ += take;
    return take;
  }
  for (;;) {
    const ssize_t got = ::read(fd_, dst, n);
    if (got >= 0) {
      raw_offset_ += static_cast<std::size_t>(got);
      return static_cast<std::size_t>(got);
    }
    if (errno == EINTR) continue;
    return MakeError(ErrorCode::kIo,
                     fmt::format("{}: read failed: {}", name_, std::strerror(errno)));
  }
}

Result<std::size_t> TraceInput::ReadDecoded(char* dst, std::size_t n) {
  if (n == 0) return std::size_t{0};
  if (decoder_) return decoder_->Read(dst, n);
  return ReadRaw(dst, n);
}

Result<std::string_view> TraceInput::Head(std::size_t max) {
  BAKEOFF_CHECK(!reading_);
  while (head_.size() < max) {
    const std::size_t have = head_.size();
    head_.resize(max);
    Result<std::size_t> got = ReadDecoded(head_.data() + have, max - have);
    if (!got.ok()) {
      head_.resize(have);
      return got.error();
    }
    head_.resize(have + *got);
    if (*got == 0) break;
  }
  return std::string_view(head_).substr(0, std::min(max, head_.size()));
}

Result<std::size_t> TraceInput::Read(char* dst, std::size_t n) {
  reading_ = true;
  if (head_at_ < head_.size()) {
    const std::size_t take = std::min(n, head_.size() - head_at_);
    std::memcpy(dst, head_.data() + head_at_, take);
    head_at_ += take;
    if (head_at_ == head_.size()) {
      head_.clear();
      head_.shrink_to_fit();
      head_at_ = 0;
    }
    return take;
  }
  return ReadDecoded(dst, n);
}

Result<std::string> TraceInput::ReadAll() {
  std::string all;
  std::size_t have = 0;
  for (;;) {
    if (all.size() - have < kRawChunkBytes)
      all.resize(std::max<std::size_t>(all.size() * 2, kRawChunkBytes * 4));
    Result<std::size_t> got = Read(all.data() + have, all.size() - have);
    if (!got.ok()) return got.error();
    if (*got == 0) break;
    have += *got;
  }
  all.resize(have);
  return all;
}

}  // namespace bakeoff::workload
