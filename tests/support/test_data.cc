// tests/support/test_data.cc: where the tests' inputs are (contract in test_data.h).
#include "support/test_data.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/file.h"

namespace bakeoff::testing {

std::string ReadTestData(const std::string& relative) {
  Result<std::string> content = ReadFile(std::filesystem::path(BAKEOFF_TESTDATA_DIR) / relative);
  EXPECT_TRUE(content.ok()) << relative << ": " << (content.ok() ? "" : content.error().message);
  return content.ok() ? std::move(content).value() : std::string();
}

std::filesystem::path SharedDir() {
  if (const char* env = std::getenv("BAKEOFF_SHARED_DIR")) return env;
  // BAKEOFF_TESTDATA_DIR is <repo>/tests/testdata; the shared folder sits beside the repository.
  return std::filesystem::path(BAKEOFF_TESTDATA_DIR).parent_path().parent_path().parent_path() / "shared";
}

}  // namespace bakeoff::testing
