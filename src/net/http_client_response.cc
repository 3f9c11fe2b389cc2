// net/http_client_response.cc
//
// Owns: response reading and parsing: the reads (into the connection's own buffer, which grows
// while reads fill it), the Beast parser's callbacks (status line, header fields, the head to the
// handler, de-chunked body pieces to the handler as parsed), interim 1xx responses,
// content-length, chunked and until-close bodies, the header and body limits, and how a read,
// the end of the connection or a parse error ends the request.
// Does not own: whether the connection is pooled after the response (http_client_pool.cc), the
// first-byte and idle deadlines (http_client_deadlines.cc). Shared declarations:
// net/http_client_internal.h.
#include "net/http_client_internal.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http/error.hpp>

namespace bakeoff::net {
namespace http_internal {

std::string_view ToStd(BeastStringView s) { return {s.data(), s.size()}; }

// ---------------------------------------------------------------------------------------------
// ResponseParser

void ResponseParser::on_response_impl(int code, BeastStringView, int, error_code&) {
  connection_.OnStatusLine(code);
}

void ResponseParser::on_field_impl(http::field name, BeastStringView name_string,
                                   BeastStringView value, error_code&) {
  connection_.OnField(name, ToStd(name_string), ToStd(value));
}

void ResponseParser::on_header_impl(error_code& ec) { connection_.OnHeaderDone(ec); }

std::size_t ResponseParser::on_body_impl(BeastStringView body, error_code& ec) {
  connection_.OnBodyBytes(ToStd(body), ec);
  return body.size();
}

std::size_t ResponseParser::on_chunk_body_impl(std::uint64_t, BeastStringView body,
                                               error_code& ec) {
  connection_.OnBodyBytes(ToStd(body), ec);
  return body.size();
}

// ---------------------------------------------------------------------------------------------
// Connection: reading the response

void Connection::ResetParser() {
  const Limits& limits = client_->options.limits;
  parser_.emplace(*this);
  parser_->header_limit(static_cast<std::uint32_t>(
      std::min<std::size_t>(limits.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser_->body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
  parser_->eager(true);
  parser_->skip(head_request_);
  head_.status = 0;
  head_.content_type.clear();
  head_.headers.clear();
}

void Connection::Read() {
  if (FaultFires()) {
    PostFinish(TransportEnd::kReset, "injected fault while reading the response");
    return;
  }
  // A read that filled the buffer had more waiting: a bulk body, read in larger pieces.
  const std::size_t largest = tls_ ? kTlsReadBytes : kPlainReadBytes;
  if (read_buffer_.empty()) {
    read_buffer_.resize(tls_ ? kTlsReadBytes : kFirstPlainReadBytes);
  } else if (last_read_filled_ && read_buffer_.size() < largest) {
    read_buffer_.resize(std::min(largest, 2 * read_buffer_.size()));
  }
  auto on_read = [self = shared_from_this(), gen = gen_](const error_code& ec, std::size_t bytes) {
    if (!self->Current(gen)) return;
    self->last_read_filled_ = bytes == self->read_buffer_.size();
    self->OnData(ec, self->read_buffer_.data(), bytes);
  };
  if (tls_) {
    tls_->async_read_some(asio::buffer(read_buffer_), std::move(on_read));
  } else {
    plain_->async_read_some(asio::buffer(read_buffer_), std::move(on_read));
  }
}

void Connection::OnData(const error_code& ec, const char* data, std::size_t size) {
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
    OnEof();
    return;
  }
  if (ec) {
    FailIo(ec, "reading the response");
    return;
  }
  read_at_ = client_->clock.Now();
  last_progress_ = read_at_;
  if (size > 0) response_started_ = true;
  Consume(data, size);
}

void Connection::Consume(const char* data, std::size_t size) {
  const bool from_pending = !pending_.empty();
  std::string_view input;
  if (from_pending) {
    pending_.append(data, size);
    input = pending_;
  } else {
    input = std::string_view(data, size);
  }
  const std::uint64_t gen = gen_;
  callback_gen_ = gen;
  std::size_t used = 0;
  error_code ec;
  while (used < input.size() && !parser_->is_done()) {
    used += parser_->put(asio::const_buffer(input.data() + used, input.size() - used), ec);
    if (!Current(gen)) return;  // a handler callback ended this request (e.g. Shutdown())
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec) break;
    if (parser_->is_done() && head_.status / 100 == 1 && head_.status != 101) {
      ResetParser();  // an interim 1xx response: the real one follows
    }
  }
  if (ec) {
    FailParse(ec);
    return;
  }
  if (parser_->is_done()) {
    // No pipelining: bytes after the response mean the connection is not clean. Beast's
    // keep_alive() is false after `Connection: close` (and for HTTP/1.0 without keep-alive).
    const bool keep_alive =
        parser_->keep_alive() && used == input.size() && ServerAllowsAnother(read_at_);
    Finish(TransportEnd::kComplete, std::string(), keep_alive);
    return;
  }
  if (from_pending) {
    pending_.erase(0, used);
  } else {
    pending_.assign(input.substr(used));
  }
  if (pending_.size() > client_->options.limits.max_header_bytes + kPlainReadBytes) {
    Finish(TransportEnd::kProtocolError, "unparsable response framing (line too long)", false);
    return;
  }
  Read();
}

void Connection::OnEof() {
  if (parser_->is_header_done() && parser_->need_eof()) {
    // A body delimited by the end of the connection (RFC 9112 section 6.3, rule 8).
    error_code ec;
    callback_gen_ = gen_;
    parser_->put_eof(ec);
    if (!ec && parser_->is_done()) {
      Finish(TransportEnd::kComplete, std::string(), false);
    } else {
      FailParse(ec);
    }
    return;
  }
  std::string detail;
  if (!parser_->got_some() && pending_.empty()) {
    detail = reused_ ? "the server closed the kept-alive connection before responding"
                     : "the server closed the connection before responding";
  } else if (!parser_->is_header_done()) {
    detail = "the server closed the connection in the middle of the response headers";
  } else {
    detail = "the server closed the connection before the end of the body (" +
             std::to_string(body_bytes_) + " body bytes received)";
  }
  Finish(TransportEnd::kReset, std::move(detail), false);
}

void Connection::FailIo(const error_code& ec, const char* doing) {
  const TransportEnd end =
      phase_ == Phase::kConnecting ? TransportEnd::kConnectFailed : TransportEnd::kReset;
  Finish(end, std::string(doing) + ": " + ec.message(), false);
}

void Connection::FailParse(const error_code& ec) {
  if (!handler_error_.empty()) {
    Finish(TransportEnd::kHandlerAborted, std::move(handler_error_), false);
    return;
  }
  const Limits& limits = client_->options.limits;
  if (ec == http::error::header_limit) {
    Finish(TransportEnd::kTooLarge,
           "response header over the " + std::to_string(limits.max_header_bytes) + "-byte limit",
           false);
  } else if (ec == http::error::body_limit) {
    Finish(TransportEnd::kTooLarge,
           "response body over the " + std::to_string(limits.max_body_bytes) + "-byte limit",
           false);
  } else if (ec == http::error::buffer_overflow) {
    Finish(TransportEnd::kTooLarge, "response element over the parser's buffer", false);
  } else if (ec == http::error::partial_message) {
    Finish(TransportEnd::kReset, "the server closed the connection mid-response", false);
  } else {
    Finish(TransportEnd::kProtocolError, "invalid HTTP/1.1 response: " + ec.message(), false);
  }
}

void Connection::OnStatusLine(int code) { head_.status = code; }

void Connection::OnField(http::field name, std::string_view name_string, std::string_view value) {
  if (name == http::field::content_type) head_.content_type.assign(value);
  head_.headers.emplace_back(std::string(name_string), std::string(value));
}

void Connection::OnHeaderDone(error_code& ec) {
  if (head_.status / 100 == 1 && head_.status != 101) return;  // interim; not shown
  phase_ = Phase::kReadingBody;
  last_progress_ = read_at_;
  ArmTimer();
  handler_->OnHeaders(read_at_, head_);
  if (gen_ != callback_gen_ || !active_) ec = asio::error::operation_aborted;
}

void Connection::OnBodyBytes(std::string_view bytes, error_code& ec) {
  if (bytes.empty()) return;
  body_bytes_ += bytes.size();
  Status status = handler_->OnBody(read_at_, bytes);
  if (gen_ != callback_gen_ || !active_) {
    ec = asio::error::operation_aborted;
    return;
  }
  if (!status.ok()) {
    handler_error_ = status.error().message.empty() ? std::string("the handler rejected the body")
                                                    : status.error().message;
    ec = asio::error::operation_aborted;
  }
}

}  // namespace http_internal
}  // namespace bakeoff::net
