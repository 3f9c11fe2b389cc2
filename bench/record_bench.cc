// bench/record_bench.cc
//
// Owns: the micro-benchmark of measure::RecordToJsonLine (one records.jsonl line per finished
// request) for requests of 1, 256 and 2000 token events, against two baselines in the same binary
// that write the same count of integers into one string: with fmt::format_to (as RecordToJsonLine
// does) and with std::to_chars (a floor for any such writer). The line is parsed back with
// nlohmann::json once before timing, and its length checked every iteration, so a wrong or
// truncated line fails the benchmark.
#include <benchmark/benchmark.h>

#include <charconv>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "measure/record.h"

namespace bakeoff::bench {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// A finished, successful streaming request with `tokens` single-token answer events 7-9 ms apart.
measure::RequestRecord MakeRecord(std::size_t tokens, MonoTime t0) {
  measure::RequestRecord r;
  r.id = 123456;
  r.step = 2;
  r.worker = 0;
  r.phase = measure::Phase::kMeasure;
  r.intended_send = t0 + milliseconds(1500);
  r.send_start = r.intended_send + microseconds(12);
  r.connected = *r.send_start + microseconds(3);
  r.request_written = *r.connected + microseconds(9);
  r.headers_received = *r.request_written + milliseconds(2);
  r.first_chunk = *r.headers_received + microseconds(40);
  MonoTime at = *r.first_chunk + milliseconds(30);
  for (std::size_t i = 0; i < tokens; ++i) {
    r.token_events.push_back(measure::TokenEvent{at, 1, false, true});
    at += microseconds(7000 + 1000 * static_cast<int>(i % 3));
  }
  r.first_token = r.first_answer_token = r.token_events.front().at;
  r.last_token = r.token_events.back().at;
  r.finished = *r.last_token + microseconds(50);
  r.connection_reused = true;
  r.prompt_tokens_planned = 1024;
  r.max_tokens = static_cast<std::uint32_t>(tokens);
  r.usage_prompt_tokens = 1024;
  r.usage_completion_tokens = tokens;
  r.counted_tokens = tokens;
  r.http_status = 200;
  r.outcome = measure::Outcome::kOk;
  r.finish_reason = "length";
  return r;
}

// Empty when `line` is the record's JSON; otherwise what is wrong.
std::string CheckLine(const std::string& line, const measure::RequestRecord& r, MonoTime t0) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "the line is not JSON";
  if (j.value("id", 0ULL) != r.id || j.value("outcome", "") != "ok" ||
      j.value("output_tokens", 0ULL) != r.token_events.size()) {
    return "id, outcome or output_tokens differ";
  }
  const auto& offsets = j["token_event_ns"];
  if (!offsets.is_array() || offsets.size() != r.token_events.size()) {
    return "token_event_ns has the wrong length";
  }
  const auto last = (r.token_events.back().at - r.token_events.front().at).count();
  if (offsets.back().get<long long>() != last) return "the last token offset differs";
  if (j.value("finished_ns", 0LL) != (*r.finished - t0).count()) return "finished_ns differs";
  return {};
}

void BM_RecordToJsonLine(benchmark::State& state) {
  const MonoTime t0 = MonoTime{} + std::chrono::hours(1);
  const measure::RequestRecord record = MakeRecord(static_cast<std::size_t>(state.range(0)), t0);
  const std::string reference = measure::RecordToJsonLine(record, t0);
  if (std::string wrong = CheckLine(reference, record, t0); !wrong.empty()) {
    state.SkipWithError(wrong.c_str());
    return;
  }
  for (auto _ : state) {
    std::string line = measure::RecordToJsonLine(record, t0);
    if (line.size() != reference.size()) {
      state.SkipWithError("the line's length changed between calls");
      return;
    }
    benchmark::DoNotOptimize(line.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * reference.size()));
  state.counters["line_bytes"] = static_cast<double>(reference.size());
}
BENCHMARK(BM_RecordToJsonLine)->Arg(1)->Arg(256)->Arg(2000);

// The integers both baselines write: one per token event plus the 12 instants and counts of the
// record, of the same magnitudes (nanosecond offsets).
std::int64_t BaselineValue(std::size_t i) { return 7'000'000 + 1000 * (i % 3) + i * 8'000'000; }

// Baseline: the same count of integers formatted with fmt::format_to into one reserved string,
// the way RecordToJsonLine writes them.
void BM_Baseline_FmtIntegers(benchmark::State& state) {
  const std::size_t count = static_cast<std::size_t>(state.range(0)) + 12;
  std::size_t expected_bytes = 0;
  for (std::size_t i = 0; i < count; ++i) expected_bytes += 1 + fmt::formatted_size("{}", BaselineValue(i));
  for (auto _ : state) {
    std::string out;
    out.reserve(256 + count * 12);
    auto it = std::back_inserter(out);
    for (std::size_t i = 0; i < count; ++i) fmt::format_to(it, ",{}", BaselineValue(i));
    if (out.size() != expected_bytes) {
      state.SkipWithError("fmt wrote the wrong number of bytes");
      return;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_FmtIntegers)->Arg(1)->Arg(256)->Arg(2000);

// Baseline: the same integers with std::to_chars into a stack buffer appended to the string, the
// floor for writing them.
void BM_Baseline_ToCharsIntegers(benchmark::State& state) {
  const std::size_t count = static_cast<std::size_t>(state.range(0)) + 12;
  std::size_t expected_bytes = 0;
  for (std::size_t i = 0; i < count; ++i) expected_bytes += 1 + fmt::formatted_size("{}", BaselineValue(i));
  for (auto _ : state) {
    std::string out;
    out.reserve(256 + count * 12);
    for (std::size_t i = 0; i < count; ++i) {
      char digits[24];
      digits[0] = ',';
      const auto result = std::to_chars(digits + 1, digits + sizeof digits, BaselineValue(i));
      out.append(digits, static_cast<std::size_t>(result.ptr - digits));
    }
    if (out.size() != expected_bytes) {
      state.SkipWithError("to_chars wrote the wrong number of bytes");
      return;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_ToCharsIntegers)->Arg(1)->Arg(256)->Arg(2000);

}  // namespace
}  // namespace bakeoff::bench
