// net/ndjson.cc
//
// Owns: the NdjsonDecoder line splitter (NDJSON spec, ndjson.org: records separated by LF, CRLF
// accepted). Complete lines are copied once, straight from the caller's buffer into `out`; only
// a line cut by a read boundary is buffered.
#include "net/ndjson.h"

#include <cstring>
#include <string>

namespace bakeoff::net {
namespace {

bool IsBlank(std::string_view line) {
  for (const char c : line) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

}  // namespace

Status NdjsonDecoder::LimitError() const {
  return MakeError(ErrorCode::kProtocol, "NDJSON line exceeds max_line_bytes (" +
                                             std::to_string(max_line_bytes_) + " bytes)");
}

void NdjsonDecoder::Emit(std::string_view line, std::vector<std::string>* out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (IsBlank(line)) return;
  out->emplace_back(line);
}

Status NdjsonDecoder::Feed(std::string_view bytes, std::vector<std::string>* out) {
  BAKEOFF_CHECK(!finished_) << "NdjsonDecoder::Feed after Finish";
  BAKEOFF_CHECK(out != nullptr);
  if (failed_) return LimitError();
  const char* const begin = bytes.data();
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const void* hit = std::memchr(begin + pos, '\n', bytes.size() - pos);
    if (hit == nullptr) break;
    const std::size_t eol = static_cast<std::size_t>(static_cast<const char*>(hit) - begin);
    const std::string_view piece = bytes.substr(pos, eol - pos);
    if (line_.empty()) {
      if (piece.size() > max_line_bytes_) {
        failed_ = true;
        return LimitError();
      }
      Emit(piece, out);
    } else {
      if (piece.size() > max_line_bytes_ - line_.size()) {  // line_.size() <= limit always
        failed_ = true;
        return LimitError();
      }
      line_.append(piece);
      Emit(line_, out);
      line_.clear();
    }
    pos = eol + 1;
  }
  if (pos < bytes.size()) {
    // Checked before appending, so a body with no LF never buffers more than the limit.
    if (bytes.size() - pos > max_line_bytes_ - line_.size()) {
      failed_ = true;
      return LimitError();
    }
    line_.append(bytes.substr(pos));
  }
  return Ok{};
}

void NdjsonDecoder::Finish(std::vector<std::string>* out) {
  BAKEOFF_CHECK(!finished_) << "NdjsonDecoder::Finish called twice";
  BAKEOFF_CHECK(out != nullptr);
  finished_ = true;
  if (!failed_) Emit(line_, out);
  line_.clear();
}

}  // namespace bakeoff::net
