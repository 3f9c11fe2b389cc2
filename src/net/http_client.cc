// net/http_client.cc
//
// Owns: HttpClient's public methods (net/http_client.h) over the client's shared state
// (ClientState), and that state's construction: the endpoint's literal address or socket file,
// the TLS context (TLS 1.2 or later; the system trust store or a CA file, or no verification) and
// the headers every request carries (Host, User-Agent, Authorization).
// Does not own: the jobs of the other net/http_client_*.cc files, which
// net/http_client_internal.h lists with the design notes.
#include "net/http_client.h"

#include <memory>
#include <string>
#include <utility>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <openssl/ssl.h>

#include "core/check.h"
#include "net/http_client_internal.h"

namespace bakeoff::net {
namespace http_internal {

// ---------------------------------------------------------------------------------------------
// ClientState

ClientState::ClientState(EventLoop& loop, Endpoint endpoint_in, ClientOptions options_in,
                         const Clock& clock_in)
    : context(*static_cast<asio::io_context*>(loop.native_context())),
      endpoint(std::move(endpoint_in)),
      options(std::move(options_in)),
      clock(clock_in),
      clock_is_steady(dynamic_cast<const SteadyClock*>(&clock_in) != nullptr) {
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(endpoint.host, ec);
  if (!endpoint.unix_socket.empty()) {
    resolved.emplace_back(asio::local::stream_protocol::endpoint(endpoint.unix_socket));
  } else if (!ec) {
    host_is_address = true;
    int port = 0;
    for (char c : endpoint.port) port = port * 10 + (c - '0');
    resolved.emplace_back(tcp::endpoint(address, static_cast<unsigned short>(port)));
  }
  if (endpoint.tls) {
    tls_context.emplace(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(tls_context->native_handle(), TLS1_2_VERSION);
    if (options.verify_tls) {
      tls_context->set_verify_mode(ssl::verify_peer);
      if (options.ca_file.empty()) {
        tls_context->set_default_verify_paths(ec);
        if (ec) tls_setup_error = "cannot load the system trust store: " + ec.message();
      } else {
        tls_context->load_verify_file(options.ca_file, ec);
        if (ec) tls_setup_error = "cannot load CA file " + options.ca_file + ": " + ec.message();
      }
    } else {
      tls_context->set_verify_mode(ssl::verify_none);
    }
  }
  const bool default_port = endpoint.port == (endpoint.tls ? "443" : "80");
  fixed_headers = "Host: ";
  fixed_headers +=
      endpoint.host.find(':') != std::string::npos ? "[" + endpoint.host + "]" : endpoint.host;
  if (!default_port) fixed_headers += ":" + endpoint.port;
  fixed_headers += "\r\n";
  if (!options.user_agent.empty()) fixed_headers += "User-Agent: " + options.user_agent + "\r\n";
  if (!options.bearer_token.empty()) {
    fixed_headers += "Authorization: Bearer " + options.bearer_token + "\r\n";
  }
}

}  // namespace http_internal

// -----------------------------------------------------------------------------------------------
// HttpClient

struct HttpClient::Impl : http_internal::ClientState {
  using ClientState::ClientState;
};

HttpClient::HttpClient(EventLoop& loop, Endpoint endpoint, ClientOptions options,
                       const Clock& clock)
    : impl_(std::make_unique<Impl>(loop, std::move(endpoint), std::move(options), clock)) {}

HttpClient::~HttpClient() {
  for (int round = 0; round < 1000 && !(impl_->busy.empty() && impl_->idle.empty()); ++round) {
    impl_->Shutdown();
  }
  BAKEOFF_CHECK(impl_->busy.empty()) << "handlers kept starting requests during ~HttpClient";
}

void HttpClient::Start(HttpRequest request, ResponseHandler* handler) {
  impl_->Start(std::move(request), handler);
}

void HttpClient::Shutdown() { impl_->Shutdown(); }

std::size_t HttpClient::in_flight() const { return impl_->busy.size(); }

std::size_t HttpClient::connections_opened() const { return impl_->connections_opened; }

}  // namespace bakeoff::net
