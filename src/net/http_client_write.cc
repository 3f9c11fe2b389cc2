// net/http_client_write.cc
//
// Owns: request writing: the request's head as sent (request line under the endpoint's base
// path, the fixed headers, Content-Type and Content-Length for a body, the caller's headers,
// refused when they would inject a header), and writing head and body with as few writes as the
// socket allows; when all is written, the wait for the response starts (OnRequestWritten, then
// the first read).
// Does not own: the fixed headers' values (http_client.cc), the idle deadline while writing
// (http_client_deadlines.cc). Shared declarations: net/http_client_internal.h.
#include "net/http_client_internal.h"

#include <array>
#include <cstddef>
#include <string>

#include "core/check.h"

namespace bakeoff::net {
namespace http_internal {

void ClientState::SerializeHead(const HttpRequest& request, std::string& out) const {
  out.clear();
  out += request.method;
  out += ' ';
  out += endpoint.base_path;
  if (request.path.empty() || request.path.front() != '/') out += '/';
  out += request.path;
  out += " HTTP/1.1\r\n";
  out += fixed_headers;
  const bool has_body = !request.body.empty() || request.method == "POST" ||
                        request.method == "PUT" || request.method == "PATCH";
  if (has_body) {
    if (!request.content_type.empty()) {
      out += "Content-Type: ";
      out += request.content_type;
      out += "\r\n";
    }
    out += "Content-Length: ";
    out += std::to_string(request.body.size());
    out += "\r\n";
  }
  for (const auto& [name, value] : request.headers) {
    BAKEOFF_CHECK(name.find_first_of("\r\n:") == std::string::npos &&
                  value.find_first_of("\r\n") == std::string::npos)
        << "header injection in request header " << name;
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += "\r\n";
}

void Connection::Write() {
  if (FaultFires()) {
    PostFinish(TransportEnd::kReset, "injected fault while writing the request");
    return;
  }
  std::array<asio::const_buffer, 2> buffers;
  if (written_ < out_head_.size()) {
    buffers[0] = asio::buffer(out_head_.data() + written_, out_head_.size() - written_);
    buffers[1] = asio::buffer(out_body_);
  } else {
    const std::size_t offset = written_ - out_head_.size();
    buffers[0] = asio::buffer(out_body_.data() + offset, out_body_.size() - offset);
  }
  auto done = [self = shared_from_this(), gen = gen_](const error_code& ec, std::size_t bytes) {
    if (self->Current(gen)) self->OnWritten(ec, bytes);
  };
  if (tls_) {
    tls_->async_write_some(buffers, std::move(done));
  } else {
    plain_->async_write_some(buffers, std::move(done));
  }
}

void Connection::OnWritten(const error_code& ec, std::size_t bytes) {
  if (ec) {
    FailIo(ec, "writing the request");
    return;
  }
  const MonoTime now = client_->clock.Now();
  written_ += bytes;
  last_progress_ = now;
  if (written_ < out_head_.size() + out_body_.size()) {
    Write();
    return;
  }
  phase_ = Phase::kAwaitingHeaders;
  written_at_ = now;
  ArmTimer();
  const std::uint64_t gen = gen_;
  handler_->OnRequestWritten(now);
  if (!Current(gen)) return;
  Read();
}

}  // namespace http_internal
}  // namespace bakeoff::net
