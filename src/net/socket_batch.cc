// net/socket_batch.cc: one prepared message on each of many sockets (contract in socket_batch.h).
#include "net/socket_batch.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

namespace bakeoff::net {

namespace {

// Sends submitted per system call; a larger batch goes in several.
constexpr unsigned kRingEntries = 256;
constexpr int kSendFlags = MSG_DONTWAIT | MSG_NOSIGNAL;
// A slot whose send has not completed.
constexpr long kPending = LONG_MIN;

long SendOne(const SendSlot& slot) {
  const ssize_t sent = ::sendmsg(slot.fd, slot.message, kSendFlags);
  return sent < 0 ? -errno : sent;
}

}  // namespace

struct SocketBatchSender::Ring {
  io_uring ring{};
  bool initialised = false;
  ~Ring() {
    if (initialised) io_uring_queue_exit(&ring);
  }
};

SocketBatchSender::SocketBatchSender(bool use_io_uring) : use_io_uring_(use_io_uring) {}

void SocketBatchSender::Open() {
  if (opened_) return;
  opened_ = true;
  if (!use_io_uring_) {
    unbatched_reason_ = "turned off";
    return;
  }
  auto ring = std::make_unique<Ring>();
  if (const int error = io_uring_queue_init(kRingEntries, &ring->ring, 0); error < 0) {
    unbatched_reason_ = fmt::format("io_uring unavailable: {}", std::strerror(-error));
    return;
  }
  ring->initialised = true;
  ring_ = std::move(ring);
}

SocketBatchSender::~SocketBatchSender() = default;

void SocketBatchSender::Send(std::span<SendSlot> slots) {
  Open();
  std::size_t first = 0;
  while (ring_ != nullptr && first < slots.size()) {
    const std::span<SendSlot> batch = slots.subspan(first, std::min<std::size_t>(kRingEntries, slots.size() - first));
    if (!SendOnRing(batch)) {
      for (SendSlot& slot : batch) {
        if (slot.result == kPending) slot.result = SendOne(slot);
      }
    }
    first += batch.size();
  }
  for (SendSlot& slot : slots.subspan(first)) slot.result = SendOne(slot);
}

bool SocketBatchSender::SendOnRing(std::span<SendSlot> slots) {
  io_uring& ring = ring_->ring;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    slots[i].result = kPending;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) break;  // cannot happen: every batch is reaped whole before the next
    io_uring_prep_sendmsg(sqe, slots[i].fd, slots[i].message, kSendFlags);
    sqe->user_data = i;
  }
  // Every send is issued inline and, with MSG_DONTWAIT, completes there, so the wait for all of
  // them returns at once. A signal before any was taken leaves them queued for the next try.
  int submitted = 0;
  do {
    submitted = io_uring_submit_and_wait(&ring, static_cast<unsigned>(slots.size()));
  } while (submitted == -EINTR);
  int reaped = 0;
  while (reaped < submitted) {
    io_uring_cqe* cqe = nullptr;
    const int error = io_uring_wait_cqe(&ring, &cqe);
    if (error == -EINTR) continue;
    if (error < 0) break;
    if (cqe->user_data < slots.size()) slots[cqe->user_data].result = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    ++reaped;
  }
  if (submitted == static_cast<int>(slots.size()) && reaped == submitted) return true;
  // The ring misbehaved (the kernel took fewer sends than queued, or a completion could not be
  // read): dropped, with what it still queued; the caller sends the rest one by one.
  unbatched_reason_ = fmt::format("io_uring failed: {} of {} sends submitted, {} completed", std::max(submitted, 0),
                                  slots.size(), reaped);
  ring_.reset();
  return false;
}

}  // namespace bakeoff::net
