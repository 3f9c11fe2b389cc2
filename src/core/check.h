// core/check.h
//
// Owns: BAKEOFF_CHECK, the assertion for programmer errors. Enabled in every build type: a wrong
// number is worse than a crash. Expected failures are values (core/result.h), never checks.
//
//   BAKEOFF_CHECK(index < size) << "index " << index;
#pragma once

#include <sstream>

namespace bakeoff::internal {

// Collects the streamed message and aborts in its destructor with file, line and condition.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;

  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets the macro be an expression whose type is void in both branches.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace bakeoff::internal

#define BAKEOFF_CHECK(condition)                         \
  (condition) ? (void)0                                  \
              : ::bakeoff::internal::Voidify() &         \
                    ::bakeoff::internal::CheckFailure(__FILE__, __LINE__, #condition)
