// net/http_client_connect.cc
//
// Owns: connection establishment for a new connection: its socket or TLS stream (SNI, and the
// certificate's host name or address to verify), resolving the host (once per client), the TCP or
// Unix-domain connect (TCP_NODELAY on TCP; plain sockets non-blocking), the TLS handshake and its
// failure message (with the certificate verification error), then handing over to the request
// writing (OnConnectionReady).
// Does not own: the TLS context and the endpoint's address (http_client.cc), the connect deadline
// (http_client_deadlines.cc). Shared declarations: net/http_client_internal.h.
#include "net/http_client_internal.h"

#include <string>
#include <utility>

#include <boost/asio/connect.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace bakeoff::net {
namespace http_internal {

Connection::Connection(ClientState& client) : client_(&client), timer_(client.context) {
  if (client.endpoint.tls) {
    tls_.emplace(client.context, *client.tls_context);
    SSL* ssl = tls_->native_handle();
    if (!client.host_is_address) {
      // SNI (RFC 6066) carries names only, never address literals.
      SSL_set_tlsext_host_name(ssl, client.endpoint.host.c_str());
    }
    if (client.options.verify_tls) {
      if (client.host_is_address) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), client.endpoint.host.c_str());
      } else {
        SSL_set1_host(ssl, client.endpoint.host.c_str());
      }
    }
  } else {
    plain_.emplace(client.context);
  }
}

void Connection::Connect() {
  if (!client_->tls_setup_error.empty()) {
    PostFinish(TransportEnd::kConnectFailed, client_->tls_setup_error);
    return;
  }
  if (client_->resolved.empty()) {
    Resolve();
  } else {
    ConnectSocket();
  }
}

void Connection::Resolve() {
  if (FaultFires()) {
    PostFinish(TransportEnd::kConnectFailed, "injected fault while resolving " + client_->Where());
    return;
  }
  if (!client_->resolver) client_->resolver.emplace(client_->context);
  client_->resolver->async_resolve(
      client_->endpoint.host, client_->endpoint.port,
      [self = shared_from_this(), gen = gen_](const error_code& ec,
                                              const tcp::resolver::results_type& results) {
        if (!self->Current(gen)) return;
        ClientState& client = *self->client_;
        if (ec || results.empty()) {
          self->Finish(TransportEnd::kConnectFailed,
                       "cannot resolve " + client.endpoint.host + ": " +
                           (ec ? ec.message() : std::string("no addresses")),
                       false);
          return;
        }
        if (client.resolved.empty()) {
          for (const auto& entry : results) client.resolved.emplace_back(entry.endpoint());
        }
        self->ConnectSocket();
      });
}

void Connection::ConnectSocket() {
  if (FaultFires()) {
    PostFinish(TransportEnd::kConnectFailed,
               "injected fault while connecting to " + client_->Where());
    return;
  }
  auto done = [self = shared_from_this(), gen = gen_](const error_code& ec, auto&&...) {
    if (self->Current(gen)) self->OnSocketConnected(ec);
  };
  if (client_->resolved.size() == 1) {
    Lowest().async_connect(client_->resolved.front(), std::move(done));
  } else {
    asio::async_connect(Lowest(), client_->resolved, std::move(done));
  }
}

void Connection::OnSocketConnected(const error_code& ec) {
  if (ec) {
    Finish(TransportEnd::kConnectFailed,
           "connect to " + client_->Where() + " failed: " + ec.message(), false);
    return;
  }
  error_code ignored;
  if (client_->endpoint.unix_socket.empty()) Lowest().set_option(tcp::no_delay(true), ignored);
  if (!tls_) {
    // Plain reads are synchronous after a readiness wait; they must not block.
    Lowest().non_blocking(true, ignored);
    OnConnectionReady();
    return;
  }
  if (FaultFires()) {
    Finish(TransportEnd::kConnectFailed,
           "injected fault during the TLS handshake with " + client_->Where(), false);
    return;
  }
  tls_->async_handshake(ssl::stream_base::client,
                        [self = shared_from_this(), gen = gen_](const error_code& handshake_ec) {
                          if (self->Current(gen)) self->OnHandshake(handshake_ec);
                        });
}

void Connection::OnHandshake(const error_code& ec) {
  if (ec) {
    std::string detail = "TLS handshake with " + client_->Where() + " failed: " + ec.message();
    const long verify = SSL_get_verify_result(tls_->native_handle());
    if (verify != X509_V_OK) {
      detail += std::string(" (certificate: ") + X509_verify_cert_error_string(verify) + ")";
    }
    Finish(TransportEnd::kConnectFailed, std::move(detail), false);
    return;
  }
  OnConnectionReady();
}

void Connection::OnConnectionReady() {
  const MonoTime now = client_->clock.Now();
  phase_ = Phase::kWriting;
  last_progress_ = now;
  ArmTimer();
  const std::uint64_t gen = gen_;
  handler_->OnConnected(now, false);
  if (!Current(gen)) return;
  Write();
}

}  // namespace http_internal
}  // namespace bakeoff::net
