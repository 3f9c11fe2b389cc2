// qualify/bad_input_probe.cc
//
// Owns: the bad-input probe (docs/formats/probes.md, "bad_input"): a battery of requests no client
// should send (malformed JSON, wrong types, negative and huge max_tokens, invalid UTF-8, a 64 MiB
// body, an empty message list) and two a server may accept or refuse (unknown fields, no model),
// each on the API under test, one check per case. Each invalid request should get a 4xx with an
// error body. After each case the candidate's health is checked (and, in launch mode, its process).
// Findings: a 5xx is a warning (an error the server did not expect: a crash path); no answer within
// --answer-within (30 s) is disqualifying (hang), and so is a candidate that dies or whose health
// stops answering after a case. A 2xx on an invalid request or a 4xx without an error body fails
// the check with an info finding (clients get no usable error). Does not own: sending and recording
// one call (qualify/api_call.h).
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "qualify/api_call.h"
#include "qualify/probes.h"

namespace bakeoff::qualify {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr Nanos kHealthRecovery = seconds(10);
constexpr std::size_t kOversizedBytes = 64u << 20;
// Enough to see whether an answer is an error or a stream under way; the rest is not read.
constexpr std::size_t kBodyCap = 16 << 10;

enum class Expect {
  kRefusal,          // invalid: a 4xx with an error body
  kRefusalOrAnswer,  // a server may serve it or refuse it; either is right
};

struct Case {
  std::string name;
  std::string body;
  Expect expect = Expect::kRefusal;
  int patience = 1;  // times ProbeOptions::answer_within this case may take
};

// A body of about kOversizedBytes: `head`, "word " repeated, `tail`.
std::string Oversized(std::string head, const std::string& tail) {
  head.reserve(kOversizedBytes + tail.size());
  while (head.size() + tail.size() < kOversizedBytes) head += "word ";
  return head + tail;
}

// The pooling route's battery: the same kinds of wrong bodies, in its own fields.
std::vector<Case> PoolingBattery(const std::string& model, dialect::Api api) {
  const bool rerank = api == dialect::Api::kRerank;
  const std::string model_json = Dump(json(model));
  const std::string texts = rerank ? "documents" : "input";
  auto valid = [&] { return PoolingBody(model, api, {"Say hello."}); };
  std::vector<Case> cases;
  cases.push_back({"malformed_json", fmt::format(R"({{"model": {}, "{}": ["hi")", model_json, texts)});
  json number = valid();
  number[texts] = 5;
  cases.push_back({texts + "_number", Dump(number)});
  json object = valid();
  object[texts] = {{"text", json::array({1})}};
  cases.push_back({texts + "_object", Dump(object)});
  json empty = valid();
  empty[texts] = json::array();
  cases.push_back({"empty_" + texts, Dump(empty)});
  if (rerank) {
    json no_query = valid();
    no_query.erase("query");
    cases.push_back({"missing_query", Dump(no_query)});
  }
  const std::string bad_text = "caf\xC3 \xFF\xFE bytes";
  cases.push_back({"invalid_utf8", rerank ? fmt::format(R"({{"model": {}, "query": "q", "documents": ["{}"]}})",
                                                        model_json, bad_text)
                                          : fmt::format(R"({{"model": {}, "input": ["{}"]}})", model_json, bad_text)});
  cases.push_back({"oversized_body",
                   Oversized(fmt::format(R"({{"model": {}, {}"{}": [")", model_json, rerank ? R"("query": "q", )" : "",
                                         texts),
                             R"("]})"),
                   Expect::kRefusal, 2});
  json unknown = valid();
  unknown["bakeoff_unknown_field"] = 1;
  unknown["bakeoff_unknown_object"] = {{"nested", json::array({1, 2})}};
  cases.push_back({"unknown_fields", Dump(unknown), Expect::kRefusalOrAnswer});
  json no_model = valid();
  no_model.erase("model");
  cases.push_back({"missing_model", Dump(no_model), Expect::kRefusalOrAnswer});
  return cases;
}

std::vector<Case> Battery(const std::string& model, dialect::Api api) {
  if (!dialect::ApiGenerates(api)) return PoolingBattery(model, api);
  const bool chat = api == dialect::Api::kChat;
  const std::string model_json = Dump(json(model));
  auto valid = [&] { return GreedyBody(model, api, "Say hello.", 8); };
  std::vector<Case> cases;
  // Cut in the middle of the message list.
  cases.push_back({"malformed_json",
                   fmt::format(R"({{"model": {}, {}: [{{"role": "user", "content": "hi"}})",
                               model_json, chat ? "\"messages\"" : "\"prompt\""),
                   Expect::kRefusal});
  json text_max = valid();
  text_max["max_tokens"] = "ten";
  cases.push_back({"max_tokens_string", Dump(text_max)});
  json wrong_container = valid();
  if (chat) {
    wrong_container["messages"] = "Say hello.";
    cases.push_back({"messages_string", Dump(wrong_container)});
  } else {
    wrong_container["prompt"] = {{"text", "Say hello."}};
    cases.push_back({"prompt_object", Dump(wrong_container)});
  }
  json negative = valid();
  negative["max_tokens"] = -5;
  cases.push_back({"negative_max_tokens", Dump(negative)});
  // Streamed, so that a server which accepts it shows that with its first bytes instead of
  // generating to the end of its context before answering.
  json huge = valid();
  huge["max_tokens"] = 1000000000000LL;
  huge["stream"] = true;
  cases.push_back({"huge_max_tokens", Dump(huge)});
  // Bytes 0xC3 (a lead byte without its continuation) and 0xFF, 0xFE (never valid in UTF-8).
  const std::string bad_text = "caf\xC3 \xFF\xFE bytes";
  cases.push_back(
      {"invalid_utf8",
       chat ? fmt::format(R"({{"model": {}, "messages": [{{"role": "user", "content": "{}"}}], )"
                          R"("max_tokens": 8}})",
                          model_json, bad_text)
            : fmt::format(R"({{"model": {}, "prompt": "{}", "max_tokens": 8}})", model_json,
                          bad_text)});
  {
    std::string body = chat ? fmt::format(R"({{"model": {}, "messages": [{{"role": "user", )"
                                          R"("content": ")",
                                          model_json)
                            : fmt::format(R"({{"model": {}, "prompt": ")", model_json);
    const std::string tail = chat ? R"("}], "max_tokens": 8})" : R"(", "max_tokens": 8})";
    cases.push_back({"oversized_body", Oversized(std::move(body), tail), Expect::kRefusal, 2});
  }
  json unknown = valid();
  unknown["bakeoff_unknown_field"] = 1;
  unknown["bakeoff_unknown_object"] = {{"nested", json::array({1, 2})}};
  cases.push_back({"unknown_fields", Dump(unknown), Expect::kRefusalOrAnswer});
  json empty = valid();
  if (chat) {
    empty["messages"] = json::array();
    cases.push_back({"empty_messages", Dump(empty)});
  } else {
    empty["prompt"] = "";
    cases.push_back({"empty_prompt", Dump(empty)});
  }
  json no_model = valid();
  no_model.erase("model");
  cases.push_back({"missing_model", Dump(no_model), Expect::kRefusalOrAnswer});
  return cases;
}

// Empty when the candidate is still alive and healthy after a case; else why not.
std::string CheckAlive(ProbeContext& context) {
  target::Candidate& candidate = context.candidate;
  if (candidate.launch_mode() && !candidate.Running())
    return "the process ended (" + candidate.process()->exit_status()->Describe() + ")";
  const MonoTime until = std::chrono::steady_clock::now() + kHealthRecovery;
  std::string last;
  do {
    const target::HealthAnswer health = candidate.Health(seconds(5));
    if (health.Ready()) return "";
    last = health.status != 0 ? fmt::format("HTTP {}", health.status) : health.error;
    if (candidate.launch_mode() && !candidate.Running())
      return "the process ended (" + candidate.process()->exit_status()->Describe() + ")";
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  } while (std::chrono::steady_clock::now() < until && !context.stop);
  return fmt::format("health did not answer 200 for {:.0f} s (last: {})", Seconds(kHealthRecovery),
                     last);
}

}  // namespace

void ProbeBadInput(ProbeContext& context, ProbeResult& result) {
  target::Candidate& candidate = context.candidate;
  Result<target::TargetFacts> facts = candidate.Facts();
  if (!facts.ok()) {
    result.Find(Severity::kDisqualifying, "no_model",
                "could not learn the model to request: " + facts.error().message);
    return;
  }
  const std::string path = dialect::RequestPath(candidate.spec().api, facts->model, false);
  std::vector<std::string> accepted, no_error_body;
  for (Case& c : Battery(facts->model, candidate.spec().api)) {
    if (context.Expired()) {
      result.Find(Severity::kWarning, "time_bound",
                  "the probe's time bound passed before every case ran");
      break;
    }
    CallOptions options;
    const Nanos timeout = context.options.answer_within * c.patience;
    options.timeout = timeout;
    options.body_cap = kBodyCap;
    const std::size_t sent_bytes = c.body.size();
    const ApiCall call = SendApi(context, c.name, path, std::move(c.body), options);
    const std::string seen = call.Describe();
    if (call.ClientError() && call.ErrorMessage()) {
      result.AddCheck(c.name, CheckStatus::kPass, seen, {call.evidence});
    } else if (call.Success() && c.expect == Expect::kRefusalOrAnswer) {
      result.AddCheck(c.name, CheckStatus::kPass, seen + " (served; refusing would pass too)",
                      {call.evidence});
    } else if (call.ClientError() && c.expect == Expect::kRefusalOrAnswer) {
      result.AddCheck(c.name, CheckStatus::kPass, seen, {call.evidence});
    } else if (call.ClientError()) {
      result.AddCheck(c.name, CheckStatus::kFail, seen + ": a 4xx, but without an error body",
                      {call.evidence});
      no_error_body.push_back(c.name);
    } else if (call.Success()) {
      result.AddCheck(c.name, CheckStatus::kFail,
                      seen + ": an invalid request was accepted instead of refused with a 4xx",
                      {call.evidence});
      accepted.push_back(c.name);
    } else if (call.ServerError()) {
      result.AddCheck(c.name, CheckStatus::kFail, seen, {call.evidence});
      result.Find(Severity::kWarning, "server_error",
                  fmt::format("{}: {}; an invalid request should get a 4xx, a 5xx says the server "
                              "did not expect it",
                              c.name, seen),
                  {call.evidence});
    } else if (call.TimedOut()) {
      result.AddCheck(c.name, CheckStatus::kFail, seen, {call.evidence});
      // Whether the server held a request it had read whole, or stopped reading it: the first
      // is the engine working on it (llama.cpp b4748 tokenizes a 64 MiB prompt for over a minute
      // before cutting it to its context), the second a server that lets a client stall it.
      const std::string where =
          call.written ? fmt::format(
                             "the whole request ({} bytes) was written {:.1f} s after the "
                             "start, so the server held it",
                             sent_bytes, Seconds(*call.written))
                       : "the server stopped reading the request before it was written whole";
      result.Find(Severity::kDisqualifying, "hang",
                  fmt::format("{}: no answer within {:.0f} s; {} ({})", c.name, Seconds(timeout),
                              where, call.error),
                  {call.evidence});
    } else if (c.name == "oversized_body") {
      // Closing the connection on a body past any limit, instead of reading 64 MiB to refuse
      // it, is what proxies do; it answers the client, if rudely.
      result.AddCheck(c.name, CheckStatus::kPass, seen + " (the connection was closed on it)",
                      {call.evidence});
    } else {
      result.AddCheck(c.name, CheckStatus::kFail, seen, {call.evidence});
      result.Find(
          Severity::kWarning, "no_answer",
          fmt::format("{}: the connection ended without an answer ({})", c.name, call.error),
          {call.evidence});
    }
    if (const std::string dead = CheckAlive(context); !dead.empty()) {
      std::vector<std::string> evidence = {call.evidence};
      if (candidate.launch_mode()) evidence.push_back(candidate.process()->stderr_path().string());
      const bool ended = candidate.launch_mode() && !candidate.Running();
      result.Find(Severity::kDisqualifying, ended ? "died" : "health_lost",
                  fmt::format("after {}: {}", c.name, dead), std::move(evidence));
      break;
    }
  }
  if (!accepted.empty()) {
    result.Find(Severity::kInfo, "accepted",
                fmt::format("invalid requests answered with a 2xx instead of a 4xx: {}",
                            fmt::join(accepted, ", ")));
  }
  if (!no_error_body.empty()) {
    result.Find(Severity::kInfo, "no_error_body",
                fmt::format("4xx answers without an error body clients can read: {}",
                            fmt::join(no_error_body, ", ")));
  }
  result.Measure("cases", static_cast<double>(result.checks.size()), "requests");
}

}  // namespace bakeoff::qualify
