// bench/write_fanout_bench.cc
//
// Owns: the micro-benchmark of net::WriteFanout, the emulator's hand-out of one engine step: 100
// bytes appended to each of 1,024 loopback streams, then written at once (prepare, one
// non-blocking sendmsg per stream, completions run) by 1 thread, the baseline, and by 2 and 4.
// Wall time per hand-out, since the point is how late the step's last token leaves. The client
// ends are drained between iterations, not timed, and each drain checks that every stream got
// exactly its chunk, so a lost or short write fails the benchmark. Nothing waits on the client
// sockets while the step is handed out, so this is the sender's side alone: in a live run the
// receiver's wake-ups and reads also compete for the cores (docs/BENCHMARKS.md, (e2)).
#include <benchmark/benchmark.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "net/http_server.h"

namespace bakeoff::bench {
namespace {

constexpr int kStreams = 1024;
constexpr std::size_t kPayloadBytes = 100;
// What one stream receives per hand-out: the chunk-size line, the payload and its CRLF.
constexpr std::size_t kChunkBytes = 4 + kPayloadBytes + 2;

// A stream opened by any request; its bytes are appended by the benchmark.
class Stream final : public net::HttpServerConnection {
 public:
  Stream(net::StreamSocket socket, const net::ServerLimits& limits,
         std::vector<std::shared_ptr<net::HttpServerConnection>>& streams)
      : HttpServerConnection(std::move(socket), limits), streams_(streams) {}
  void Append(std::string_view bytes) { data() += bytes; }

 private:
  void OnRequest(Request&) override {
    StreamHead("text/plain");
    Flush();
    streams_.push_back(shared_from_this());
  }
  void OnMalformedRequest(int status, const std::string& message) override {
    SendWhole(status, "text/plain", message);
  }
  std::vector<std::shared_ptr<net::HttpServerConnection>>& streams_;
};

// Bytes waiting on `fd` now (non-blocking), read and counted.
std::size_t Drain(int fd) {
  std::size_t total = 0;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n <= 0) return total;
    total += static_cast<std::size_t>(n);
  }
}

// Reads the response head (the stream has sent nothing else yet); false when it does not come
// within a second.
bool DrainHead(int fd, boost::asio::io_context& io) {
  std::string head;
  char buffer[4096];
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!head.ends_with("\r\n\r\n") && std::chrono::steady_clock::now() < give_up) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) head.append(buffer, static_cast<std::size_t>(n));
    io.poll();
  }
  return head.ends_with("\r\n\r\n");
}

// Reads until `fd` has given `want` bytes or a second has passed; false when short.
bool DrainExactly(int fd, std::size_t want, boost::asio::io_context& io) {
  std::size_t got = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (got < want && std::chrono::steady_clock::now() < give_up) {
    got += Drain(fd);
    if (got < want) io.poll();  // a write the socket buffer deferred
  }
  return got == want;
}

void BM_WriteFanout(benchmark::State& state) {
  boost::asio::io_context io{1};
  net::ServerLimits limits;
  std::vector<std::shared_ptr<net::HttpServerConnection>> streams;
  net::HttpListener listener(io, limits, [&](net::StreamSocket socket) {
    return std::make_shared<Stream>(std::move(socket), limits, streams);
  });
  if (!listener.Listen("127.0.0.1", 0).ok()) return state.SkipWithError("cannot listen on 127.0.0.1");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(listener.port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> clients;
  auto close_all = [&] {
    listener.Stop();
    for (auto& stream : listener.Connections()) stream->Close();
    for (int fd : clients) ::close(fd);
    io.poll();
  };
  const std::string request = "GET /s HTTP/1.1\r\nhost: x\r\n\r\n";
  for (int i = 0; i < kStreams; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
      if (fd >= 0) ::close(fd);
      close_all();
      return state.SkipWithError("cannot open 1,024 loopback connections (ulimit -n?)");
    }
    clients.push_back(fd);
    io.poll();
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (streams.size() < kStreams && std::chrono::steady_clock::now() < give_up) {
    io.run_one_for(std::chrono::milliseconds(10));
  }
  if (streams.size() < kStreams) {
    close_all();
    return state.SkipWithError("the streams did not open within 10 s");
  }
  for (int fd : clients) {
    if (!DrainHead(fd, io)) {
      close_all();
      return state.SkipWithError("a stream's response head did not come within 1 s");
    }
  }

  net::WriteFanout fanout(static_cast<int>(state.range(0)), state.range(1) != 0);
  const std::string payload(kPayloadBytes, 'x');
  for (auto _ : state) {
    for (auto& stream : streams) static_cast<Stream*>(stream.get())->Append(payload);
    fanout.FlushAll(streams);
    io.poll();  // the writes' completions
    state.PauseTiming();
    for (int fd : clients) {
      if (!DrainExactly(fd, kChunkBytes, io)) {
        state.ResumeTiming();
        close_all();
        return state.SkipWithError("a stream did not get exactly its chunk");
      }
    }
    state.ResumeTiming();
  }
  state.counters["streams"] = kStreams;
  close_all();
}
// Arguments: the write threads, and whether the sends go in io_uring batches (0: one sendmsg a
// stream, the baseline).
BENCHMARK(BM_WriteFanout)
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({4, 1})
    ->Args({1, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace bakeoff::bench
