// Tests for net/http_server.h: the listener and server connection on their own, with a small
// subclass that answers whole, streamed and delayed responses, driven by a blocking socket client
// written independently of net/ (tests/unit/emulate/test_http_client.h).
#include "net/http_server.h"

#include <gtest/gtest.h>

#include <sys/ioctl.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "net/http_client.h"
#include "support/scratch.h"
#include "unit/emulate/test_http_client.h"

namespace bakeoff::net {
namespace {

using emulate::testing::FormatRequest;
using emulate::testing::HttpResponse;
using emulate::testing::TestConnection;

// GET /whole: "hello"; GET /stream: three chunks then the end; GET /later: "late" after 50 ms;
// anything else 404. Counts the closes it saw.
class TestConnectionHandler final : public HttpServerConnection {
 public:
  TestConnectionHandler(StreamSocket socket, const ServerLimits& limits, std::atomic<int>& closes)
      : HttpServerConnection(std::move(socket), limits), closes_(closes), timer_(executor()) {}

 private:
  void OnRequest(Request& request) override {
    const std::string target(request.target());
    if (target == "/whole") return SendWhole(200, "text/plain", "hello", "x-test: 1\r\n");
    if (target == "/stream") {
      StreamHead("text/event-stream");
      data() += "one ";
      Flush();
      chunks_left_ = 2;
      return;
    }
    if (target == "/later") {
      timer_.expires_after(std::chrono::milliseconds(50));
      timer_.async_wait([self = shared_from_this(), this](boost::system::error_code ec) {
        if (!ec && !closed()) SendWhole(200, "text/plain", "late");
      });
      return;
    }
    SendWhole(404, "text/plain", "no");
  }
  void OnDataWritten() override {
    if (chunks_left_ == 0) return;
    data() += --chunks_left_ == 0 ? "three" : "two ";
    if (chunks_left_ == 0) EndResponse();
    Flush();
  }
  void OnMalformedRequest(int status, const std::string& message) override {
    SendWhole(status, "text/plain", message);
  }
  void OnClose() override { closes_.fetch_add(1); }

  std::atomic<int>& closes_;
  boost::asio::steady_timer timer_;
  int chunks_left_ = 0;
};

class HttpServerTest : public ::testing::Test {
 protected:
  // On 127.0.0.1, or on the Unix socket `unix_socket` when one is given.
  void StartServer(const std::string& unix_socket = {}) {
    listener_.emplace(io_, limits_, [this](StreamSocket socket) {
      return std::make_shared<TestConnectionHandler>(std::move(socket), limits_, closes_);
    }, [this](std::size_t open) { open_.store(open); });
    Status listening = unix_socket.empty() ? listener_->Listen("127.0.0.1", 0) : listener_->ListenUnix(unix_socket);
    ASSERT_TRUE(listening.ok()) << listening.error().message;
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    if (!thread_.joinable()) return;
    boost::asio::post(io_, [this] {
      listener_->Stop();
      for (auto& connection : listener_->Connections()) connection->Close();
    });
    thread_.join();
  }
  std::uint16_t port() const { return listener_->port(); }

  ServerLimits limits_;
  boost::asio::io_context io_{1};
  std::optional<HttpListener> listener_;
  std::thread thread_;
  std::atomic<int> closes_{0};
  std::atomic<std::size_t> open_{0};
};

TEST_F(HttpServerTest, WholeResponsesCarryLengthDateAndExtraHeadersOnOneKeptConnection) {
  StartServer();
  TestConnection client(port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send(FormatRequest("GET", "/whole", {}, /*keep_alive=*/true)));
  HttpResponse first = client.ReadResponse();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "hello");
  EXPECT_EQ(first.headers["content-length"], "5");
  EXPECT_EQ(first.headers["x-test"], "1");
  EXPECT_NE(first.headers["date"].find(" GMT"), std::string::npos);
  EXPECT_EQ(first.headers.count("connection"), 0u);
  ASSERT_TRUE(client.Send(FormatRequest("GET", "/nothing", {}, /*keep_alive=*/true)));
  EXPECT_EQ(client.ReadResponse().status, 404);
  EXPECT_EQ(open_.load(), 1u);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrderEvenWhenTheFirstIsLate) {
  StartServer();
  TestConnection client(port());
  ASSERT_TRUE(client.Send(FormatRequest("GET", "/later", {}, true) + FormatRequest("GET", "/whole", {}, false)));
  HttpResponse first = client.ReadResponse();
  HttpResponse second = client.ReadResponse();
  EXPECT_EQ(first.body, "late");
  EXPECT_EQ(second.body, "hello");
  EXPECT_EQ(second.headers["connection"], "close");
  EXPECT_TRUE(client.WaitForClose());
}

TEST_F(HttpServerTest, AStreamIsChunkedForHttp11AndCloseDelimitedForHttp10) {
  StartServer();
  TestConnection chunked(port());
  ASSERT_TRUE(chunked.Send(FormatRequest("GET", "/stream", {}, true)));
  HttpResponse streamed = chunked.ReadResponse();
  EXPECT_EQ(streamed.headers["transfer-encoding"], "chunked");
  EXPECT_EQ(streamed.body, "one two three");
  EXPECT_NE(streamed.raw.find("4\r\none \r\n"), std::string::npos) << streamed.raw;
  EXPECT_TRUE(streamed.raw.ends_with("0\r\n\r\n"));

  TestConnection old(port());
  ASSERT_TRUE(old.Send("GET /stream HTTP/1.0\r\nhost: x\r\n\r\n"));
  bool closed = false;
  const std::string raw = old.ReadToEnd(&closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(raw.find("transfer-encoding"), std::string::npos) << raw;
  EXPECT_NE(raw.find("connection: close"), std::string::npos);
  EXPECT_TRUE(raw.ends_with("\r\n\r\none two three")) << raw;
}

TEST_F(HttpServerTest, AMalformedRequestGetsTheSubclassAnswerAndTheConnectionCloses) {
  limits_.max_header_bytes = 256;
  StartServer();
  TestConnection garbage(port());
  ASSERT_TRUE(garbage.Send("NOT HTTP AT ALL\r\n\r\n"));
  HttpResponse bad = garbage.ReadResponse();
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("malformed HTTP request"), std::string::npos);
  EXPECT_EQ(bad.headers["connection"], "close");
  EXPECT_TRUE(garbage.WaitForClose());

  TestConnection big(port());
  ASSERT_TRUE(big.Send("GET /whole HTTP/1.1\r\nx-pad: " + std::string(1000, 'a') + "\r\n\r\n"));
  EXPECT_EQ(big.ReadResponse().status, 431);
}

TEST_F(HttpServerTest, IdleAndSlowConnectionsAreClosedByTheSweep) {
  limits_.idle_timeout = std::chrono::milliseconds(40);
  limits_.request_timeout = std::chrono::milliseconds(40);
  StartServer();
  TestConnection idle(port(), /*recv_timeout_ms=*/3000);
  TestConnection slow(port(), 3000);
  ASSERT_TRUE(slow.Send("GET /whole HTTP/1.1\r\nhost:"));  // never finishes its headers
  EXPECT_TRUE(idle.WaitForClose());
  EXPECT_TRUE(slow.WaitForClose());
  EXPECT_TRUE(emulate::testing::WaitFor([&] { return open_.load() == 0 && closes_.load() == 2; }));
}

// GET /broadcast: a stream whose bytes the test appends and writes for every such connection at
// once, the way the emulator hands a step's tokens out (WriteFanout).
class BroadcastHandler final : public HttpServerConnection {
 public:
  BroadcastHandler(StreamSocket socket, const ServerLimits& limits, std::atomic<int>& closes,
                   std::vector<std::shared_ptr<HttpServerConnection>>& streams)
      : HttpServerConnection(std::move(socket), limits), closes_(closes), streams_(streams) {}

  void Append(std::string_view bytes) { data() += bytes; }
  void Write() { Flush(); }
  void End() { EndResponse(); }

 private:
  void OnRequest(Request&) override {
    StreamHead("text/plain");
    Flush();
    streams_.push_back(shared_from_this());
  }
  void OnMalformedRequest(int status, const std::string& message) override {
    SendWhole(status, "text/plain", message);
  }
  void OnClose() override { closes_.fetch_add(1); }

  std::atomic<int>& closes_;
  std::vector<std::shared_ptr<HttpServerConnection>>& streams_;
};

// Parameters: the write threads, and whether sends go in io_uring batches.
class WriteFanoutTest : public HttpServerTest, public ::testing::WithParamInterface<std::tuple<int, bool>> {
 protected:
  // Runs `f` on the I/O thread and returns its result.
  template <typename F>
  auto OnIoThread(F f) {
    std::promise<decltype(f())> result;
    boost::asio::post(io_, [&] { result.set_value(f()); });
    return result.get_future().get();
  }
  void StartBroadcast(std::size_t clients) {
    listener_.emplace(io_, limits_, [this](StreamSocket socket) {
      return std::make_shared<BroadcastHandler>(std::move(socket), limits_, closes_, streams_);
    });
    Status listening = listener_->Listen("127.0.0.1", 0);
    ASSERT_TRUE(listening.ok()) << listening.error().message;
    thread_ = std::thread([this] { io_.run(); });
    for (std::size_t i = 0; i < clients; ++i) {
      clients_.push_back(std::make_unique<TestConnection>(port()));
      ASSERT_TRUE(clients_.back()->Send(FormatRequest("GET", "/broadcast", {}, true)));
    }
    ASSERT_TRUE(emulate::testing::WaitFor([&] { return OnIoThread([&] { return streams_.size(); }) == clients; }));
  }
  // Appends `bytes(i)` to the i-th stream (in arrival order) and writes them all at once.
  void Round(WriteFanout& fanout, const std::function<std::string(std::size_t)>& bytes, bool last) {
    OnIoThread([&] {
      for (std::size_t i = 0; i < streams_.size(); ++i) {
        auto* stream = static_cast<BroadcastHandler*>(streams_[i].get());
        stream->Append(bytes(i));
        if (last) stream->End();
      }
      fanout.FlushAll(streams_);
      return 0;
    });
  }

  std::vector<std::shared_ptr<HttpServerConnection>> streams_;  // I/O thread only
  std::vector<std::unique_ptr<TestConnection>> clients_;
};

// Every stream gets its bytes whole and in order, one chunk a round, whether a round went out in
// one send or, past a full socket buffer, partly then the ordinary way; with one thread (no
// fan-out) and with three, the sends batched in io_uring and one sendmsg each.
TEST_P(WriteFanoutTest, EveryStreamGetsItsBytesInOrderThroughFullSocketBuffers) {
  constexpr std::size_t kClients = WriteFanout::kMinConnections + 36;
  constexpr int kRounds = 12;
  StartBroadcast(kClients);
  WriteFanout fanout(std::get<0>(GetParam()), std::get<1>(GetParam()));
  std::vector<std::string> expected(kClients);
  for (int round = 0; round < kRounds; ++round) {
    auto bytes = [&](std::size_t i) {
      // Round 4 sends every tenth stream 4 MB: more than a loopback socket buffer holds while
      // its client is not reading yet.
      if (round == 4 && i % 10 == 0) return std::string(4 << 20, static_cast<char>('a' + i % 26));
      return fmt::format("[{}:{}]", i, round);
    };
    for (std::size_t i = 0; i < kClients; ++i) expected[i] += bytes(i);
    Round(fanout, bytes, round == kRounds - 1);
  }
  for (std::size_t i = 0; i < kClients; ++i) {
    HttpResponse response = clients_[i]->ReadResponse();
    ASSERT_EQ(response.status, 200) << "stream " << i;
    ASSERT_EQ(response.body.size(), expected[i].size()) << "stream " << i;
    EXPECT_TRUE(response.body == expected[i]) << "stream " << i << " differs";
  }
  EXPECT_EQ(closes_.load(), 0);
}

// A client that reset its connection: its send fails, its connection closes, the others' go out.
TEST_P(WriteFanoutTest, AResetPeerClosesItsConnectionAndTheOthersAreWritten) {
  constexpr std::size_t kClients = WriteFanout::kMinConnections + 8;
  StartBroadcast(kClients);
  WriteFanout fanout(std::get<0>(GetParam()), std::get<1>(GetParam()));
  Round(fanout, [](std::size_t i) { return fmt::format("<{}>", i); }, false);
  const linger reset{1, 0};
  ASSERT_EQ(::setsockopt(clients_[3]->fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset), 0);
  clients_[3]->Close();
  Round(fanout, [](std::size_t i) { return fmt::format("({})", i); }, true);
  EXPECT_TRUE(emulate::testing::WaitFor([&] { return closes_.load() == 1; }));
  for (std::size_t i = 0; i < kClients; ++i) {
    if (i == 3) continue;
    EXPECT_EQ(clients_[i]->ReadResponse().body, fmt::format("<{}>({})", i, i)) << "stream " << i;
  }
}

// Bytes prepared ahead of their instant (HoldWrites) stay on the server, Flush and SendWhole
// notwithstanding, until the FlushAll that hands them out.
TEST_P(WriteFanoutTest, HeldWritesWaitForTheFlushAll) {
  constexpr std::size_t kClients = 2;
  StartBroadcast(kClients);
  WriteFanout fanout(std::get<0>(GetParam()), std::get<1>(GetParam()));
  auto unread = [&](std::size_t i) {
    int bytes = 0;
    ::ioctl(clients_[i]->fd(), FIONREAD, &bytes);
    return bytes;
  };
  std::vector<int> heads(kClients);
  for (std::size_t i = 0; i < kClients; ++i) {
    ASSERT_TRUE(emulate::testing::WaitFor([&] { return unread(i) > 0; }));  // the stream's head
    heads[i] = unread(i);
  }
  OnIoThread([&] {
    for (auto& connection : streams_) {
      auto* stream = static_cast<BroadcastHandler*>(connection.get());
      stream->HoldWrites();
      stream->Append("ahead");
      stream->Write();
    }
    return 0;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (std::size_t i = 0; i < kClients; ++i) EXPECT_EQ(unread(i), heads[i]) << "stream " << i;
  Round(fanout, [](std::size_t) { return std::string(" now"); }, true);
  for (std::size_t i = 0; i < kClients; ++i) EXPECT_EQ(clients_[i]->ReadResponse().body, "ahead now") << "stream " << i;
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndSends, WriteFanoutTest, ::testing::Combine(::testing::Values(1, 3), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& sends) {
                           return fmt::format("{}Threads{}", std::get<0>(sends.param),
                                              std::get<1>(sends.param) ? "IoUring" : "Sendmsg");
                         });

TEST_F(HttpServerTest, ListenRefusesAHostThatIsNotAnAddress) {
  HttpListener listener(io_, limits_, [](StreamSocket) -> std::shared_ptr<HttpServerConnection> {
    return nullptr;
  });
  Status status = listener.Listen("not-an-address", 0);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("'not-an-address' is not an IP address"), std::string::npos);
}

std::string SocketPath(const std::string& name) { return (bakeoff::testing::ScratchRoot() / name).string(); }

Result<FetchedResponse> FetchOverUnixSocket(const std::string& socket_path, const std::string& target) {
  Endpoint endpoint;
  endpoint.host = "localhost";
  endpoint.port = "80";
  endpoint.unix_socket = socket_path;
  HttpRequest request;
  request.method = "GET";
  request.path = target;
  ClientOptions options;
  options.deadlines.connect = std::chrono::seconds(2);
  options.deadlines.total = std::chrono::seconds(5);
  return Fetch(endpoint, std::move(request), options);
}

TEST_F(HttpServerTest, ServesOnAUnixSocketAndRemovesItsFileWhenItStops) {
  const std::string path = SocketPath("serve.sock");
  StartServer(path);
  EXPECT_EQ(port(), 0);
  EXPECT_TRUE(std::filesystem::is_socket(path));
  Result<FetchedResponse> whole = FetchOverUnixSocket(path, "/whole");
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_EQ(whole->head.status, 200);
  EXPECT_EQ(whole->body, "hello");
  Result<FetchedResponse> stream = FetchOverUnixSocket(path, "/stream");
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  EXPECT_EQ(stream->head.Header("transfer-encoding"), "chunked");
  EXPECT_EQ(stream->body, "one two three");
  std::promise<void> stopped;
  boost::asio::post(io_, [&] {
    listener_->StopAccepting();
    stopped.set_value();
  });
  stopped.get_future().wait();
  EXPECT_FALSE(std::filesystem::exists(path));
  Result<FetchedResponse> refused = FetchOverUnixSocket(path, "/whole");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("unix:" + path), std::string::npos) << refused.error().message;
}

TEST_F(HttpServerTest, ListenUnixReplacesAStaleSocketFileButNeitherALiveOneNorAnotherFile) {
  auto nothing = [](StreamSocket) -> std::shared_ptr<HttpServerConnection> { return nullptr; };
  // A socket file whose server is gone: bound, then closed without removing it.
  const std::string stale = SocketPath("stale.sock");
  {
    boost::asio::local::stream_protocol::acceptor gone(io_, boost::asio::local::stream_protocol::endpoint(stale));
  }
  ASSERT_TRUE(std::filesystem::is_socket(stale));
  StartServer(stale);
  Result<FetchedResponse> served = FetchOverUnixSocket(stale, "/whole");
  ASSERT_TRUE(served.ok()) << served.error().message;
  EXPECT_EQ(served->body, "hello");

  HttpListener second(io_, limits_, nothing);
  Status live = second.ListenUnix(stale);
  ASSERT_FALSE(live.ok());
  EXPECT_NE(live.error().message.find("another server is listening there"), std::string::npos) << live.error().message;
  EXPECT_TRUE(std::filesystem::is_socket(stale)) << "the live server's socket file is left alone";

  const std::string regular = SocketPath("not-a-socket");
  std::ofstream(regular) << "data";
  HttpListener third(io_, limits_, nothing);
  Status file = third.ListenUnix(regular);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().message.find("not a socket"), std::string::npos) << file.error().message;
  EXPECT_TRUE(std::filesystem::is_regular_file(regular));
}

}  // namespace
}  // namespace bakeoff::net
