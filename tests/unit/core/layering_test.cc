// Keeps the layering of docs/ARCHITECTURE.md honest at the include level: a layer includes only
// headers of the layers it may use, Asio/Beast stay inside the .cc files that need them, and JSON
// document libraries stay out of the hot-path layers. (CMake link dependencies catch calls; this
// catches header-only leaks.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace bakeoff {
namespace {

namespace fs = std::filesystem;

const std::map<std::string, std::set<std::string>> kAllowed = {
    {"core", {"core"}},
    {"stats", {"core", "stats"}},
    {"net", {"core", "net"}},
    {"dialect", {"core", "net", "dialect"}},
    {"workload", {"core", "stats", "workload"}},
    {"measure", {"core", "stats", "measure"}},
    {"load", {"core", "stats", "net", "dialect", "workload", "measure", "load"}},
    {"target", {"core", "stats", "net", "dialect", "workload", "measure", "load", "target"}},
    {"qualify", {"core", "stats", "net", "dialect", "workload", "measure", "load", "target", "qualify"}},
    {"analyze", {"core", "stats", "net", "dialect", "workload", "measure", "load", "analyze"}},
    {"emulate", {"core", "stats", "net", "dialect", "measure", "emulate"}},
    {"run", {"core", "stats", "net", "dialect", "workload", "measure", "load", "target", "emulate", "analyze", "run"}},
    {"study", {"core", "stats", "net", "dialect", "workload", "measure", "load", "target", "qualify", "emulate", "analyze",
               "run", "study"}},
    {"report", {"core", "stats", "net", "dialect", "workload", "measure", "load", "target", "qualify", "emulate",
                "analyze", "run", "study", "report"}},
    {"benchdoc", {"core", "report", "benchdoc"}},
    {"deploy", {"core", "stats", "net", "dialect", "workload", "measure", "load", "target", "deploy"}},
    {"cli", {"core", "stats", "net", "dialect", "workload", "measure", "load", "target", "qualify", "analyze", "emulate",
             "run", "study", "deploy", "report", "cli"}},
};

// Files allowed to include Boost (Asio/Beast): they are the only slow translation units. The
// headers among them (the server side of HTTP, which a subclass extends, and the internal
// declarations of the emulated server and of the HTTP client) may be included only by files of
// this list, so Boost still reaches no other translation unit.
const std::set<std::string> kBoostFiles = {
    "net/event_loop.cc",        "net/http_client.cc",         "net/http_server.h",
    "net/http_client_internal.h", "net/http_client_connect.cc", "net/http_client_pool.cc",
    "net/http_client_write.cc", "net/http_client_response.cc", "net/http_client_deadlines.cc",
    "net/http_server.cc",       "emulate/server_impl.h",      "emulate/server.cc",
    "emulate/server_engine.cc", "emulate/server_faults.cc",   "emulate/server_generation.cc",
    "emulate/server_routes.cc", "emulate/server_lifecycle.cc"};
// Layers without JSON documents (nlohmann): the hot path and the foundations.
const std::set<std::string> kNoJsonDocuments = {"core", "stats", "net", "measure", "load"};
// The one exception: the dump every writer of every layer goes through, so that no JSON file is
// ever refused for text that is not UTF-8 (its header declares with json_fwd.hpp only).
const std::set<std::string> kJsonInCore = {"core/json_dump.h", "core/json_dump.cc"};

TEST(LayeringTest, IncludesRespectTheLayers) {
  const fs::path src = fs::path(BAKEOFF_SOURCE_DIR) / "src";
  ASSERT_TRUE(fs::exists(src)) << src;
  const std::regex project_include(R"re(^\s*#\s*include\s+"([a-z_]+)/[^"]+")re");
  const std::regex included_path(R"re(^\s*#\s*include\s+"([a-z_]+/[^"]+)")re");
  const std::regex boost_include(R"re(^\s*#\s*include\s+<boost/)re");
  const std::regex json_include(R"re(^\s*#\s*include\s+<nlohmann/)re");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const fs::path path = entry.path();
    if (path.extension() != ".h" && path.extension() != ".cc") continue;
    const std::string layer = path.parent_path().filename().string();
    const std::string relative = layer + "/" + path.filename().string();
    ASSERT_TRUE(kAllowed.count(layer)) << "unknown layer folder " << layer;
    ++files;
    std::ifstream in(path);
    int line_number = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_number;
      std::smatch match;
      if (std::regex_search(line, match, project_include)) {
        EXPECT_TRUE(kAllowed.at(layer).count(match[1].str()))
            << relative << ":" << line_number << ": " << layer << " may not include " << line;
        if (std::regex_search(line, match, included_path) && kBoostFiles.count(match[1].str())) {
          EXPECT_TRUE(kBoostFiles.count(relative))
              << relative << ":" << line_number << ": " << match[1].str()
              << " carries Boost; only the slow translation units may include it";
        }
      }
      if (std::regex_search(line, boost_include)) {
        EXPECT_TRUE(kBoostFiles.count(relative))
            << relative << ":" << line_number << ": Boost belongs behind net/ and the emulator's server";
      }
      if (std::regex_search(line, json_include)) {
        EXPECT_FALSE(kNoJsonDocuments.count(layer) && !kJsonInCore.count(relative))
            << relative << ":" << line_number << ": no JSON document library in " << layer;
      }
    }
  }
  EXPECT_GT(files, 20);
}

}  // namespace
}  // namespace bakeoff
