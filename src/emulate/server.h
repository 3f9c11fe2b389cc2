// emulate/server.h
//
// Owns: `bakeoff emulate`'s HTTP server: an OpenAI-compatible endpoint (vLLM's shapes) on
// Boost.Beast whose token timing comes from the engine model (emulate/scheduler.h) run in real
// time: engine steps run back to back while there is work and the server idles otherwise; each
// step's tokens are written to their streams when the step completes, one write per connection.
// With `instant`, the model is bypassed and every request's tokens are written as fast as the
// socket takes them (each still its own SSE event), for measuring clients.
// Endpoints: GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions,
// POST /tokenize (docs/emulator.md). Every response carries `X-Bakeoff-Emulated: true`.
// Does not own: the engine model, the OpenAI body formats (emulate/openai_api.h), signals.
//
// Threading: Start() spawns one I/O thread that owns every socket, timer and the scheduler;
// nothing in it is locked. The public methods are safe from any other thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"
#include "emulate/scheduler.h"

namespace bakeoff::emulate {

struct EmulatorConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;  // 0 = an ephemeral port (see EmulatorServer::port())
  std::string served_model_name = "emulated-model";
  EngineConfig engine;
  // /health answers 503 (and the API 503 errors) for this long after Start().
  Nanos load_delay{0};
  // Ignore the cost model: emit tokens as fast as possible.
  bool instant = false;
  // A keep-alive connection with no request bytes for this long is closed.
  Nanos idle_timeout = std::chrono::seconds(60);
  // A request whose headers and body have not fully arrived this long after its first byte is
  // closed (slowloris defence).
  Nanos request_timeout = std::chrono::seconds(10);
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_body_bytes = 32 * 1024 * 1024;
};

// OK when the config can be served; kInvalidInput naming the field otherwise.
Status ValidateEmulatorConfig(const EmulatorConfig& config);

// Counters readable from any thread (updated by the I/O thread).
struct EmulatorStats {
  std::uint64_t connections_open = 0;
  std::uint64_t requests_total = 0;    // HTTP requests parsed
  std::uint64_t running = 0;           // sequences running in the engine model
  std::uint64_t waiting = 0;           // sequences queued
  std::uint64_t aborted = 0;           // generations ended by a client disconnect
  std::uint64_t steps = 0;             // engine steps completed
};

class EmulatorServer {
 public:
  // Validates the config, binds and listens, and starts the I/O thread. kInvalidInput for a bad
  // config, kIo when the address cannot be bound.
  static Result<std::unique_ptr<EmulatorServer>> Start(EmulatorConfig config);

  // Stops (as Stop()) and joins.
  ~EmulatorServer();
  EmulatorServer(const EmulatorServer&) = delete;
  EmulatorServer& operator=(const EmulatorServer&) = delete;

  // The bound port (the ephemeral one when config.port was 0).
  std::uint16_t port() const;
  const EmulatorConfig& config() const;

  // Stops accepting, closes every connection (open streams end abruptly, their sequences are
  // aborted) and joins the I/O thread. Idempotent.
  // REQUIRES: not called from the I/O thread.
  void Stop();

  EmulatorStats stats() const;

  class Impl;

 private:
  explicit EmulatorServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bakeoff::emulate
