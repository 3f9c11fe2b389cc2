// net/fault_plan.h
//
// Owns: the fault-injection seam for client I/O (Beast's fail_count, leveldb's ErrorEnv). The HTTP
// client asks the plan before every I/O operation (resolve, connect, TLS handshake, each write,
// each read); when the plan says so, that operation fails as if the peer had reset the connection.
// Tests loop the failing index upward until a request completes, asserting exactly one outcome.
// Like a real reset, a fault on a reused connection before any response byte is retried once on a
// new connection (the stale-connection retry of net/http_client.h).
//
// Thread-safety: one plan per event loop thread.
#pragma once

#include <cstdint>

namespace bakeoff::net {

class FaultPlan {
 public:
  // Fails the `fail_at`-th operation (1-based). 0 never fails.
  explicit FaultPlan(std::uint64_t fail_at = 0) : fail_at_(fail_at) {}

  // Counts one operation; true if this one must fail.
  bool NextOperationFails() { return ++operations_ == fail_at_; }
  std::uint64_t operations() const { return operations_; }

 private:
  std::uint64_t fail_at_;
  std::uint64_t operations_ = 0;
};

}  // namespace bakeoff::net
