// tests/support/engine_fixture.h
//
// Owns: replaying an engine's hand-written wire fixtures (tests/testdata/engines/<engine>/) from
// a ScriptedServer. One file per route: GET /v1/models is `v1_models.http`, GET / is
// `root.http` (the path without its leading '/', every '/' a '_', plus ".http"). A file holds a
// status line, header lines, an empty line and the body; the replayer writes CRLF line ends in
// the head and adds Content-Length. A route without a file answers 404 "Not Found" (text/plain).
// Does not own: what the fixtures say (each was written from its engine's documented format).
//
// Thread-safety: the responder reads files on the server's threads; files are read-only.
#pragma once

#include <filesystem>
#include <string>

#include "support/scripted_server.h"

namespace bakeoff::testing {

// tests/testdata/engines/<engine>
std::filesystem::path EngineFixtureDir(const std::string& engine);
// The file a GET of `path` replays ("/" -> root.http; query strings dropped).
std::string EngineFixtureFile(std::string path);
// The raw response (head with CRLF and Content-Length, then body) for `file`; empty when absent.
std::string EngineFixtureResponse(const std::filesystem::path& file);
ScriptedServer::Responder EngineFixtureResponder(std::filesystem::path dir);

}  // namespace bakeoff::testing
