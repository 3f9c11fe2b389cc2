// tests/integration/instant_emulator.h
//
// Owns: the emulated engine the integration tests talk to when its timing does not matter: on an
// ephemeral loopback port, in --instant mode (every token at once).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "emulate/server.h"

namespace bakeoff {

// `config` with port 0 and instant set, started; null (and the test failed) when it cannot start.
inline std::unique_ptr<emulate::EmulatorServer> InstantEmulator(emulate::EmulatorConfig config = {}) {
  config.port = 0;
  config.instant = true;
  auto server = emulate::EmulatorServer::Start(config);
  EXPECT_TRUE(server.ok()) << server.error().message;
  return server.ok() ? std::move(server.value()) : nullptr;
}

}  // namespace bakeoff
