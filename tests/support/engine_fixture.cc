// tests/support/engine_fixture.cc: replays engine wire fixtures (contract in engine_fixture.h).
#include "support/engine_fixture.h"

#include <fstream>
#include <sstream>

namespace bakeoff::testing {

std::filesystem::path EngineFixtureDir(const std::string& engine) {
  return std::filesystem::path(BAKEOFF_TESTDATA_DIR) / "engines" / engine;
}

std::string EngineFixtureFile(std::string path) {
  if (const std::size_t query = path.find('?'); query != std::string::npos) path.resize(query);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path == "/" || path.empty()) return "root.http";
  if (path.front() == '/') path.erase(0, 1);
  for (char& c : path) {
    if (c == '/') c = '_';
  }
  return path + ".http";
}

std::string EngineFixtureResponse(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::size_t split = text.find("\n\n");
  const std::string head_text = text.substr(0, split);
  std::string body = split == std::string::npos ? std::string() : text.substr(split + 2);
  std::string head;
  std::istringstream lines(head_text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    head += line + "\r\n";
  }
  head += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  return head + body;
}

ScriptedServer::Responder EngineFixtureResponder(std::filesystem::path dir) {
  return [dir](const CapturedRequest& request) -> Script {
    std::string response = EngineFixtureResponse(dir / EngineFixtureFile(request.target));
    if (response.empty()) response = FullResponse(404, "Not Found", "text/plain");
    return {Send(std::move(response))};
  };
}

}  // namespace bakeoff::testing
