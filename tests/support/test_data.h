// tests/support/test_data.h
//
// Owns: where the tests' inputs are: the checked-in files under tests/testdata and the shared
// folder beside the repository that holds the real public traces (../shared/data).
#pragma once

#include <filesystem>
#include <string>

namespace bakeoff::testing {

// The content of tests/testdata/`relative`; a failed read fails the calling test and gives "".
std::string ReadTestData(const std::string& relative);

// $BAKEOFF_SHARED_DIR, else the `shared` folder beside the repository. Tests that read it skip
// when the file they need is not there.
std::filesystem::path SharedDir();

}  // namespace bakeoff::testing
