// tests/support/scratch.h
//
// Owns: where tests write their files. Every path a test makes for its outputs lies under one
// folder per test process, $TMPDIR/bakeoff_test_<pid> (ctest runs each test in its own process),
// created on first use and removed when the test program ends, so a run leaves nothing behind in
// the temporary folder; when a test failed the folder is kept and its path printed, for reading
// what the failing run wrote.
#pragma once

#include <filesystem>
#include <string>

namespace bakeoff::testing {

// This test process's scratch folder (created when missing).
const std::filesystem::path& ScratchRoot();

// ScratchRoot()/`name`, emptied: removed with what it holds when a test made it before. Not
// created (the commands under test make their --out folder).
std::filesystem::path FreshScratchDir(const std::string& name);

}  // namespace bakeoff::testing
