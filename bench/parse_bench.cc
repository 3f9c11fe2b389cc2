// bench/parse_bench.cc
//
// Owns: micro-benchmarks of the load generator's per-event hot path on one realistic OpenAI chat
// stream (bench/chat_stream.h) delivered in 64 KiB reads: SSE framing (net::SseDecoder), chunk
// decoding (dialect::OpenAiStreamDecoder), the two together as load::Exchange chains them, and
// two baselines over the same bytes in the same binary (memchr over every line end; a bare
// simdjson DOM parse of every payload), so docs/BENCHMARKS.md can quote ratios that survive a
// noisy machine. Every benchmark checks its answer and reports SkipWithError when it is wrong.
// Also the heap one stream's decoder holds (for the memory-per-stream figure).
#include <benchmark/benchmark.h>

#include <malloc.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "chat_stream.h"
#include "dialect/openai.h"
#include "net/sse.h"

namespace bakeoff::bench {
namespace {

constexpr std::size_t kTokens = 4096;          // content events per stream (~0.9 MiB of wire)
constexpr std::size_t kReadBytes = 64 * 1024;  // one socket read

const ChatStream& SampleStream() {
  static const ChatStream stream = MakeChatStream(kTokens);
  return stream;
}

void SetCounters(benchmark::State& state, std::size_t events_per_iteration) {
  const ChatStream& s = SampleStream();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events_per_iteration));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.wire.size()));
  state.counters["events_per_stream"] = static_cast<double>(events_per_iteration);
}

// Baseline: the least any framer must do, find every line end (glibc's vectorised memchr).
void BM_Baseline_MemchrLineEnds(benchmark::State& state) {
  const ChatStream& s = SampleStream();
  const std::vector<std::string_view> reads = SplitIntoReads(s.wire, kReadBytes);
  for (auto _ : state) {
    std::size_t lines = 0;
    for (std::string_view read : reads) {
      const char* p = read.data();
      const char* end = p + read.size();
      while (const void* hit = std::memchr(p, '\n', static_cast<std::size_t>(end - p))) {
        ++lines;
        p = static_cast<const char*>(hit) + 1;
      }
    }
    benchmark::DoNotOptimize(lines);
    if (lines != s.lines) {
      state.SkipWithError(fmt::format("found {} line ends, expected {}", lines, s.lines).c_str());
      return;
    }
  }
  SetCounters(state, s.events);
}
BENCHMARK(BM_Baseline_MemchrLineEnds);

// Every event's payload must come out byte for byte; checked once before timing.
bool FramingIsCorrect(benchmark::State& state) {
  const ChatStream& s = SampleStream();
  net::SseDecoder decoder;
  std::vector<net::SseEvent> events;
  for (std::string_view read : SplitIntoReads(s.wire, kReadBytes)) {
    if (!decoder.Feed(read, &events).ok()) {
      state.SkipWithError("SseDecoder::Feed failed on a well-formed stream");
      return false;
    }
  }
  if (decoder.Finish()) {
    state.SkipWithError("SseDecoder reported a cut event at the end of a complete stream");
    return false;
  }
  if (events.size() != s.events) {
    state.SkipWithError(fmt::format("{} events, expected {}", events.size(), s.events).c_str());
    return false;
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].data != s.payloads[i] || !events[i].event.empty()) {
      state.SkipWithError(fmt::format("event {} differs from what was sent", i).c_str());
      return false;
    }
  }
  return true;
}

// SSE framing alone: every read fed to a fresh decoder per stream, events appended to a reused
// vector (as load::Exchange does).
void BM_SseFraming(benchmark::State& state) {
  const ChatStream& s = SampleStream();
  if (!FramingIsCorrect(state)) return;
  const std::vector<std::string_view> reads = SplitIntoReads(s.wire, kReadBytes);
  std::vector<net::SseEvent> events;
  for (auto _ : state) {
    net::SseDecoder decoder;
    std::size_t count = 0;
    std::size_t data_bytes = 0;
    for (std::string_view read : reads) {
      events.clear();
      if (!decoder.Feed(read, &events).ok()) {
        state.SkipWithError("SseDecoder::Feed failed");
        return;
      }
      count += events.size();
      for (const net::SseEvent& e : events) data_bytes += e.data.size();
    }
    benchmark::DoNotOptimize(data_bytes);
    if (count != s.events) {
      state.SkipWithError(fmt::format("framed {} events, expected {}", count, s.events).c_str());
      return;
    }
  }
  SetCounters(state, s.events);
}
BENCHMARK(BM_SseFraming);

// What a decoder pass over the stream found; compared with what MakeChatStream put in.
struct DecodeTally {
  std::size_t token_events = 0;
  std::size_t content_bytes = 0;
  std::size_t done = 0;
  std::uint64_t usage_completion_tokens = 0;
  std::size_t finishes = 0;

  void Add(const dialect::StreamChunk& chunk) {
    if (chunk.done) ++done;
    if (!chunk.content.empty()) ++token_events;
    content_bytes += chunk.content.size();
    if (chunk.usage) usage_completion_tokens = chunk.usage->completion_tokens;
    if (!chunk.finish_reason.empty()) ++finishes;
  }

  // Empty when the tally matches the stream; otherwise what is wrong.
  std::string Mismatch(const ChatStream& s) const {
    if (token_events != s.token_events || content_bytes != s.content_bytes || done != 1 ||
        usage_completion_tokens != s.token_events || finishes != 1) {
      return fmt::format(
          "decoded {} token events / {} content bytes / {} [DONE] / usage {} / {} finishes; "
          "expected {} / {} / 1 / {} / 1",
          token_events, content_bytes, done, usage_completion_tokens, finishes, s.token_events,
          s.content_bytes, s.token_events);
    }
    return {};
  }
};

// Baseline: a bare simdjson DOM parse of every payload (no field access), the floor under any
// decoder built on it. [DONE] is not JSON and is skipped.
void BM_Baseline_SimdjsonParse(benchmark::State& state) {
  const ChatStream& s = SampleStream();
  std::vector<simdjson::padded_string> padded;
  for (const std::string& p : s.payloads) {
    if (p != "[DONE]") padded.emplace_back(p);
  }
  simdjson::dom::parser parser;
  for (auto _ : state) {
    std::size_t objects = 0;
    for (const simdjson::padded_string& p : padded) {
      simdjson::dom::element root;
      if (parser.parse(p).get(root) == simdjson::SUCCESS && root.is_object()) ++objects;
    }
    benchmark::DoNotOptimize(objects);
    if (objects != padded.size()) {
      state.SkipWithError(fmt::format("parsed {} objects, expected {}", objects, padded.size()).c_str());
      return;
    }
  }
  SetCounters(state, s.events);
}
BENCHMARK(BM_Baseline_SimdjsonParse);

// Chunk decoding alone, payloads already framed.
void BM_OpenAiChunkDecoding(benchmark::State& state) {
  const ChatStream& s = SampleStream();
  dialect::OpenAiStreamDecoder decoder;
  for (auto _ : state) {
    decoder.Reset();
    DecodeTally tally;
    for (const std::string& payload : s.payloads) {
      Result<dialect::StreamChunk> chunk = decoder.Decode(payload);
      if (!chunk.ok()) {
        state.SkipWithError(("Decode failed: " + chunk.error().message).c_str());
        return;
      }
      tally.Add(chunk.value());
    }
    if (std::string wrong = tally.Mismatch(s); !wrong.empty()) {
      state.SkipWithError(wrong.c_str());
      return;
    }
  }
  SetCounters(state, s.events);
}
BENCHMARK(BM_OpenAiChunkDecoding);

// Framing and decoding chained per read, as load::Exchange::OnBody does: the client's per-event
// parsing cost (timing and recording excluded).
void BM_SseFramingAndDecoding(benchmark::State& state) {
  const ChatStream& s = SampleStream();
  if (!FramingIsCorrect(state)) return;
  const std::vector<std::string_view> reads = SplitIntoReads(s.wire, kReadBytes);
  dialect::OpenAiStreamDecoder decoder;
  std::vector<net::SseEvent> events;
  for (auto _ : state) {
    net::SseDecoder framer;
    decoder.Reset();
    DecodeTally tally;
    for (std::string_view read : reads) {
      events.clear();
      if (!framer.Feed(read, &events).ok()) {
        state.SkipWithError("SseDecoder::Feed failed");
        return;
      }
      for (const net::SseEvent& event : events) {
        Result<dialect::StreamChunk> chunk = decoder.Decode(event.data);
        if (!chunk.ok()) {
          state.SkipWithError(("Decode failed: " + chunk.error().message).c_str());
          return;
        }
        tally.Add(chunk.value());
      }
    }
    if (std::string wrong = tally.Mismatch(s); !wrong.empty()) {
      state.SkipWithError(wrong.c_str());
      return;
    }
  }
  SetCounters(state, s.events);
}
BENCHMARK(BM_SseFramingAndDecoding);

// Not a speed figure: the heap one idle stream's decoder keeps after its first chunk (glibc's
// mallinfo2, averaged over 256 decoders), reported as the counter heap_bytes_per_decoder. With
// one decoder per open stream this is part of the client's memory per stream.
void BM_OpenAiDecoderHeapBytes(benchmark::State& state) {
  constexpr std::size_t kDecoders = 256;
  const ChatStream& s = SampleStream();
  double bytes_per_decoder = 0;
  for (auto _ : state) {
    std::vector<std::unique_ptr<dialect::OpenAiStreamDecoder>> decoders;
    decoders.reserve(kDecoders);
    const std::size_t before = mallinfo2().uordblks;
    for (std::size_t i = 0; i < kDecoders; ++i) {
      decoders.push_back(std::make_unique<dialect::OpenAiStreamDecoder>());
      Result<dialect::StreamChunk> chunk = decoders.back()->Decode(s.payloads[1]);
      if (!chunk.ok() || chunk->content.empty()) {
        state.SkipWithError("the first content chunk did not decode");
        return;
      }
    }
    const std::size_t after = mallinfo2().uordblks;
    bytes_per_decoder = static_cast<double>(after - before) / kDecoders;
  }
  state.counters["heap_bytes_per_decoder"] = bytes_per_decoder;
}
BENCHMARK(BM_OpenAiDecoderHeapBytes)->Iterations(20);

}  // namespace
}  // namespace bakeoff::bench
