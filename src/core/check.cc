#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace bakeoff::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "bakeoff internal error: %s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace bakeoff::internal
