// Tests for net/socket_batch.h: every socket gets its message and its result, over io_uring and
// over sendmsg, through batches larger than the ring, full buffers and closed peers.
#include "net/socket_batch.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace bakeoff::net {
namespace {

// A connected pair of Unix stream sockets: `send` is written, `peer` read.
struct SocketPair {
  int send = -1;
  int peer = -1;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0) {
      send = fds[0];
      peer = fds[1];
    }
  }
  ~SocketPair() {
    if (send >= 0) ::close(send);
    if (peer >= 0) ::close(peer);
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
  std::string ReadAvailable() const {
    std::string got;
    std::array<char, 4096> buffer{};
    for (;;) {
      const ssize_t n = ::recv(peer, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n <= 0) return got;
      got.append(buffer.data(), static_cast<std::size_t>(n));
    }
  }
};

// One message of two parts, as the server gathers a chunk's size line and its data.
struct Message {
  std::string head;
  std::string body;
  std::array<iovec, 2> iov{};
  msghdr header{};
  Message(std::string h, std::string b) : head(std::move(h)), body(std::move(b)) {}
  const msghdr* Prepare() {
    iov = {iovec{head.data(), head.size()}, iovec{body.data(), body.size()}};
    header = {};
    header.msg_iov = iov.data();
    header.msg_iovlen = iov.size();
    return &header;
  }
};

// Runs `body` on a thread of its own, so that the rings it makes, and the interruption their
// teardown brings (socket_batch.h), stay off the thread that runs the other tests.
void OnOwnThread(const std::function<void()>& body) { std::thread(body).join(); }

class SocketBatchTest : public ::testing::TestWithParam<bool> {};

TEST_P(SocketBatchTest, EverySocketGetsItsMessageThroughBatchesLargerThanTheRing) {
  OnOwnThread([&] {
    constexpr std::size_t kSockets = 300;  // the ring takes 256 a system call
    SocketBatchSender sender(GetParam());
    std::vector<std::unique_ptr<SocketPair>> pairs;
    std::vector<std::unique_ptr<Message>> messages;
    std::vector<SendSlot> slots;
    for (std::size_t i = 0; i < kSockets; ++i) {
      pairs.push_back(std::make_unique<SocketPair>());
      ASSERT_GE(pairs.back()->send, 0) << "socketpair " << i;
      messages.push_back(std::make_unique<Message>(fmt::format("{:x}\r\n", 10 + i), fmt::format("data {}", i)));
      slots.push_back({pairs.back()->send, messages.back()->Prepare()});
    }
    for (int round = 0; round < 3; ++round) {
      sender.Send(slots);
      for (std::size_t i = 0; i < kSockets; ++i) {
        const Message& m = *messages[i];
        ASSERT_EQ(slots[i].result, static_cast<long>(m.head.size() + m.body.size())) << "socket " << i;
        EXPECT_EQ(pairs[i]->ReadAvailable(), m.head + m.body) << "socket " << i << ", round " << round;
      }
    }
    EXPECT_EQ(sender.batched(), GetParam() && sender.unbatched_reason().empty()) << sender.unbatched_reason();
  });
}

TEST_P(SocketBatchTest, AFullBufferAndAClosedPeerAreResultsNotFailures) {
  OnOwnThread([&] {
    SocketBatchSender sender(GetParam());
    SocketPair full, closed, open;
    Message filler("", std::string(64 * 1024, 'f'));
    while (::sendmsg(full.send, filler.Prepare(), MSG_DONTWAIT) > 0) {
    }
    ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
    ::close(closed.peer);
    closed.peer = -1;
    Message a("a", "1"), b("b", "2"), c("c", "3");
    std::array<SendSlot, 3> slots{SendSlot{full.send, a.Prepare()}, SendSlot{closed.send, b.Prepare()},
                                  SendSlot{open.send, c.Prepare()}};
    sender.Send(slots);  // no SIGPIPE: the process is still here
    EXPECT_EQ(slots[0].result, -EAGAIN);
    EXPECT_EQ(slots[1].result, -EPIPE);
    EXPECT_EQ(slots[2].result, 2);
    EXPECT_EQ(open.ReadAvailable(), "c3");
    // The ring goes on after failed sends.
    EXPECT_EQ(sender.batched(), GetParam() && sender.unbatched_reason().empty()) << sender.unbatched_reason();
  });
}

TEST(SocketBatchSenderTest, SaysWhyItDoesNotBatch) {
  OnOwnThread([&] {
    SocketBatchSender off(false);
    off.Open();
    EXPECT_FALSE(off.batched());
    EXPECT_EQ(off.unbatched_reason(), "turned off");
    SocketBatchSender on(true);
    on.Open();
    if (!on.batched()) {
      EXPECT_EQ(on.unbatched_reason().rfind("io_uring unavailable: ", 0), 0u) << on.unbatched_reason();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Sends, SocketBatchTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& sends) { return sends.param ? "IoUring" : "Sendmsg"; });

}  // namespace
}  // namespace bakeoff::net
