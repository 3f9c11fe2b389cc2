#include "cli/table.h"

#include "cli/cli.h"

#include <fmt/format.h>

#include "report/report_folder.h"
#include "stats/sketch.h"

namespace bakeoff::cli {
namespace {

// A percentile in ms: `*` when too few samples bound it, `~` when read from the histogram.
std::string Ms(const stats::Summary& s, const stats::QuantileEstimate& q) {
  if (s.count == 0) return "-";
  return fmt::format("{}{:.1f}{}", s.percentiles_exact ? "" : "~", q.value, q.bounded ? "" : "*");
}

}  // namespace

std::string FormatBenchTable(const run::BenchOutcome& outcome) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "\n{}\n",
                 outcome.emulated ? "Results (EMULATED engine: not a real engine's performance)"
                                  : "Results");
  fmt::format_to(it, "{:<18} {:>8} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8}\n",
                 "step", "ok/all", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50",
                 "TPOT p99", "ITL p99", "E2E p99", "lag p99");
  bool any_slo = false;
  bool any_approximate = false;
  for (const analyze::StepAnalysis& s : outcome.steps) {
    for (const stats::Summary* summary : {&s.ttft_ms, &s.tpot_ms, &s.itl_token_ms, &s.e2e_ms, &s.send_lag_ms}) {
      any_approximate = any_approximate || !summary->percentiles_exact;
    }
    const auto ok_it = s.outcomes.find("ok");
    const std::uint64_t ok = ok_it == s.outcomes.end() ? 0 : ok_it->second;
    fmt::format_to(it, "{:<18} {:>8} {:>7.2f} {:>9.1f} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8}\n",
                   s.label + (s.interrupted ? " (int)" : ""),
                   fmt::format("{}/{}", ok, s.measured_requests), s.request_rate_per_s,
                   s.output_tokens_per_s, Ms(s.ttft_ms, s.ttft_ms.p50), Ms(s.ttft_ms, s.ttft_ms.p99),
                   Ms(s.tpot_ms, s.tpot_ms.p50), Ms(s.tpot_ms, s.tpot_ms.p99),
                   Ms(s.itl_token_ms, s.itl_token_ms.p99), Ms(s.e2e_ms, s.e2e_ms.p99),
                   Ms(s.send_lag_ms, s.send_lag_ms.p99));
    any_slo = any_slo || !s.slo.empty();
  }
  fmt::format_to(it, "latencies in ms; * = too few samples for a 95% confidence bound on that "
                     "percentile; lag = send lag\n");
  if (any_approximate) {
    fmt::format_to(it, "~ = read from a histogram (more than {} samples), within {:.2f}% of the exact "
                       "percentile\n",
                   stats::QuantileSketch::kDefaultExactCap, 100 * stats::QuantileSketch::kMaxRelativeError);
  }
  if (any_slo) {
    for (const analyze::StepAnalysis& s : outcome.steps) {
      fmt::format_to(it, "{:<18} SLO attainment {:.1f}%  goodput {:.2f} req/s ", s.label,
                     100 * s.slo_attainment, s.goodput_per_s);
      for (const analyze::SloResult& r : s.slo) {
        fmt::format_to(it, " [{} {} ({:.1f})]", r.term.text, r.met ? "met" : "MISSED", r.observed_ms);
      }
      out.push_back('\n');
    }
  }
  // The engine's own view of each step (its metrics page), beside the client's.
  for (const target::StepServerFigures& f : outcome.server) {
    if (f.step >= outcome.steps.size()) continue;
    std::string line = fmt::format("{:<18} server:", outcome.steps[f.step].label);
    auto add = [&](const char* what, const std::optional<double>& x, const char* format) {
      if (x) line += fmt::format(fmt::runtime(format), what, *x);
    };
    add("waiting peak", f.waiting_peak, " {} {:.0f}");
    add("running peak", f.running_peak, ", {} {:.0f}");
    add("KV peak", f.kv_usage_peak ? std::optional<double>(100 * *f.kv_usage_peak) : std::nullopt, ", {} {:.0f}%");
    add("preemptions", f.preemptions, ", {} {:.0f}");
    add("TTFT mean", f.ttft_mean_ms, ", {} {:.1f} ms");
    if (f.failed_scrapes > 0) line += fmt::format(", {} of {} scrapes failed", f.failed_scrapes, f.scrapes);
    fmt::format_to(it, "{}\n", line);
  }
  for (const analyze::StepAnalysis& s : outcome.steps) {
    for (const auto& [name, count] : s.outcomes) {
      if (name != "ok") fmt::format_to(it, "{}: {} {}\n", s.label, count, name);
    }
    for (const std::string& example : s.error_examples) fmt::format_to(it, "  e.g. {}\n", example);
    if (!s.stopped_reason.empty()) fmt::format_to(it, "{}: {}\n", s.label, s.stopped_reason);
    if (s.stale_retries > 0) {
      fmt::format_to(it, "{}: {} requests resent once on a new connection: the server had closed the "
                         "kept-alive one before answering (not errors; records.jsonl stale_retry_ns)\n",
                     s.label, s.stale_retries);
    }
    if (s.backoff_waits > 0) {
      fmt::format_to(it, "{}: backed off {} times ({:.1f} s in all) after connection failures\n", s.label,
                     s.backoff_waits, s.backoff_total_s);
    }
    if (s.session_turns_skipped > 0) {
      fmt::format_to(it, "{}: {} session turns not sent because an earlier turn failed\n", s.label,
                     s.session_turns_skipped);
    }
    if (s.generator_limited) {
      fmt::format_to(it, "{}: GENERATOR-LIMITED (the client may have shaped these numbers):", s.label);
      for (const std::string& reason : s.generator_limited_reasons) fmt::format_to(it, " {};", reason);
      out.push_back('\n');
    }
    if (s.output_tokens_estimated) {
      fmt::format_to(it, "{}: output tokens counted by the client (no server usage report)\n", s.label);
    }
  }
  return out;
}

int ReportRun(const run::BenchOutcome& outcome, int interrupted_exit_code) {
  fmt::print("{}", FormatBenchTable(outcome));
  if (!outcome.records_path.empty()) fmt::print("records: {}\n", outcome.records_path.string());
  fmt::print("summary: {}\n", outcome.summary_path.string());
  if (!outcome.summary_error.empty()) fmt::print(stderr, "bakeoff: {}\n", outcome.summary_error);
  // The page is drawn from the files just written, as `bakeoff report` would draw it later.
  bool page_failed = false;
  if (outcome.summary_error.empty()) {
    Result<std::filesystem::path> page = report::WriteRunReport(outcome.summary_path.parent_path());
    if (page.ok()) {
      fmt::print("report: {}\n", page->string());
    } else {
      fmt::print(stderr, "bakeoff: report.html: {}\n", page.error().message);
      page_failed = true;
    }
  }
  if (outcome.interrupted) return interrupted_exit_code;
  if (!outcome.summary_error.empty() || page_failed) return kExitFailure;
  std::uint64_t ok = 0;
  std::uint64_t measured = 0;
  for (const auto& step : outcome.steps) {
    if (!step.stopped_reason.empty()) return kExitFailure;
    auto it = step.outcomes.find("ok");
    ok += it == step.outcomes.end() ? 0 : it->second;
    measured += step.measured_requests;
  }
  return measured > 0 && 2 * ok >= measured ? kExitOk : kExitFailure;
}

}  // namespace bakeoff::cli
