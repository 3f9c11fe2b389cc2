// tests/support/scratch.cc: the test process's scratch folder (contract in scratch.h).
#include "support/scratch.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace bakeoff::testing {
namespace {

// Named once, at start-up, so a child the test forks uses its parent's folder. Without throwing:
// a TMPDIR that is not a folder must not stop the test binary before main (test discovery runs
// it at build time); creating the folder then fails in the test that needs it.
std::filesystem::path NameRoot() {
  std::error_code error;
  std::filesystem::path temp = std::filesystem::temp_directory_path(error);
  if (error) temp = "/tmp";
  return temp / ("bakeoff_test_" + std::to_string(::getpid()));
}

const std::filesystem::path kRoot = NameRoot();

// Removes the folder once every test has run, unless one failed.
class ScratchCleanup final : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    if (!std::filesystem::exists(kRoot, ignored)) return;
    if (::testing::UnitTest::GetInstance()->Failed()) {
      std::fprintf(stderr, "kept the test's files: %s\n", kRoot.c_str());
      return;
    }
    std::filesystem::remove_all(kRoot, ignored);
  }
};

[[maybe_unused]] const ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

}  // namespace

const std::filesystem::path& ScratchRoot() {
  std::filesystem::create_directories(kRoot);
  return kRoot;
}

std::filesystem::path FreshScratchDir(const std::string& name) {
  std::filesystem::path dir = ScratchRoot() / name;
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace bakeoff::testing
