// core/result.h
//
// Owns: the value-or-error return type used for every *expected* failure (a malformed row, an
// unreachable server, a bad flag). Programmer errors use BAKEOFF_CHECK (core/check.h) instead.
// Shaped like C++23 std::expected so a later switch is mechanical.
//
// Thread-safety: plain values; no shared state.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace bakeoff {

enum class ErrorCode {
  kInvalidInput,  // a flag, file or field the user supplied is wrong
  kIo,            // file or socket I/O failed
  kProtocol,      // a peer broke the wire contract (HTTP, SSE, JSON)
  kTimeout,       // a deadline passed
  kUnavailable,   // a peer refused or is not ready
  kCancelled,     // we stopped it on purpose
  kInternal,      // a bug in bakeoff; should be rare and reported
};

const char* ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // already names the where: "trace.jsonl:42: ..." or "request #18 to ..."
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT(google-explicit-constructor): like expected
  Result(Error error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok().
  const T& value() const& {
    BAKEOFF_CHECK(ok()) << "value() on an error: " << std::get<1>(state_).message;
    return std::get<0>(state_);
  }
  T& value() & {
    BAKEOFF_CHECK(ok()) << "value() on an error: " << std::get<1>(state_).message;
    return std::get<0>(state_);
  }
  T&& value() && {
    BAKEOFF_CHECK(ok()) << "value() on an error: " << std::get<1>(state_).message;
    return std::get<0>(std::move(state_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // REQUIRES: !ok().
  const Error& error() const& {
    BAKEOFF_CHECK(!ok()) << "error() on a value";
    return std::get<1>(state_);
  }

 private:
  std::variant<T, Error> state_;
};

// Result of an operation that produces no value.
struct Ok {};
using Status = Result<Ok>;

inline Error MakeError(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

// The error of input that breaks its documented format or a stated rule (a file, a field, a flag).
inline Error InvalidInput(std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); }

}  // namespace bakeoff
