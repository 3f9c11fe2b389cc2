// net/socket_batch.h
//
// Owns: sending one prepared message on each of many sockets at once, without blocking: with
// io_uring, the whole batch goes to the kernel in one system call (a send each, issued inline:
// MSG_DONTWAIT makes one that would block complete at once with EAGAIN instead of waiting); where
// io_uring is not available (a kernel built without it, kernel.io_uring_disabled, a container's
// seccomp profile) or is turned off, one sendmsg each. On a 2-core VM with page-table isolation a
// system call costs about 2 us beside the 4-6 us of a loopback TCP send itself, so a step handed
// to 1,024 streams saves about 2 ms (docs/BENCHMARKS.md, (e2)).
// Does not own: the sockets or the messages (SendSlot points at them), nor what is done with a
// partial send (the caller writes the rest the ordinary way).
// Threading: one sender per thread; Send is not reentrant. The ring is made by the thread that
// opens the sender (Open, or its first Send), which must be the thread that sends: when a ring is
// torn down the kernel interrupts each thread that made or used it, and a blocking call there with
// a timeout (a socket's SO_RCVTIMEO) then fails with EINTR, so a ring made on a thread that only
// constructed the sender would trouble that thread.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace bakeoff::net {

// One socket's send: `message` stays valid until Send returns; `result` is the bytes sent, or
// -errno (-EAGAIN: the socket's buffer was full).
struct SendSlot {
  int fd = -1;
  const msghdr* message = nullptr;
  long result = 0;
};

class SocketBatchSender {
 public:
  // With `use_io_uring` false, or when the kernel refuses a ring, every send is a sendmsg. The
  // ring is not made yet (Open).
  explicit SocketBatchSender(bool use_io_uring);
  ~SocketBatchSender();
  SocketBatchSender(const SocketBatchSender&) = delete;
  SocketBatchSender& operator=(const SocketBatchSender&) = delete;

  // Makes the ring on the calling thread, if not done yet; Send calls it first.
  void Open();
  // Sends each slot's message on its socket (MSG_DONTWAIT | MSG_NOSIGNAL) and sets its result.
  void Send(std::span<SendSlot> slots);

  // After Open: whether sends go in io_uring batches; if not, why not ("turned off", the kernel's
  // refusal, a ring that failed).
  bool batched() const { return ring_ != nullptr; }
  const std::string& unbatched_reason() const { return unbatched_reason_; }

 private:
  struct Ring;
  // Submits one batch that fits the ring; false when the ring failed (it is then dropped, and
  // the slots not completed are left for sendmsg).
  bool SendOnRing(std::span<SendSlot> slots);

  const bool use_io_uring_;
  bool opened_ = false;
  std::unique_ptr<Ring> ring_;
  std::string unbatched_reason_;
};

}  // namespace bakeoff::net
