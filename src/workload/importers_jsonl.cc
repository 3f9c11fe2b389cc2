// workload/importers_jsonl.cc
//
// Owns: the importers of the JSONL formats, one row a line: bakeoff's canonical trace
// (docs/formats/trace.md), Mooncake (kvcache-ai/Mooncake FAST25-release/traces) and JSONL logs of
// OpenAI request bodies. Mooncake rows of the plain shape take a hand-written fast path first
// (PlainMooncakeRow), which accepts only rows the DOM path reads to the same values and hands
// every other line to it.
// Does not own: what the formats share (workload/importers_common.h) or choosing the format
// (importers.cc).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <simdjson.h>

#include "workload/importers.h"
#include "workload/importers_common.h"

namespace bakeoff::workload::importers_internal {

namespace {

constexpr std::uint32_t kMooncakeBlockTokens = 512;

struct JsonlState {
  TraceRequest request;
  std::string time_text;
  std::string joined;
  bool header_seen = false;
  bool trace_has_blocks = false;
};

// Resets a Mooncake row for the next line, keeping the prefix id vector's capacity (no allocation
// a row). Only the fields a Mooncake row sets are reset: an import reads one format, and nothing
// else writes this row.
void ResetMooncakeRow(TraceRequest& r) {
  r.arrival_s = 0;
  r.input_tokens = 0;
  r.output_tokens = 0;
  r.prefix_hashes.clear();
}

// The fast path for the plain Mooncake row that real traces and most tools write: one object
// with the keys timestamp, input_length, output_length and optionally hash_ids, each once, in any
// order, whose values are non-negative integers written as plain digits (an array of them for
// hash_ids), with JSON whitespace anywhere between tokens. It accepts only what the DOM path
// below reads to the same row, and declines (returns false; the caller resets the row) anything
// else: another key, a duplicate, an escape, a sign, a fraction or exponent, a leading zero, a
// timestamp of more than 15 digits (beyond them the DOM path's text of the value would differ), a
// length above UINT32_MAX, an id of more than 19 digits, trailing bytes. The DOM path then reads
// the line and reports what is wrong, if anything, exactly as it would without the fast path;
// importers_test and the fuzzer compare the two paths. `timestamp_text` receives the timestamp's
// digits.
bool PlainMooncakeRow(std::string_view line, TraceRequest& r, double* timestamp_ms,
                      std::string_view* timestamp_text) {
  const char* p = line.data();
  const char* const end = p + line.size();
  auto skip_ws = [&] {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  };
  // Plain digits: at least one, no leading zero, at most max_digits. Leaves p after them.
  auto digits = [&](int max_digits, std::uint64_t* out) {
    const char* start = p;
    std::uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
      v = v * 10 + static_cast<std::uint64_t>(*p - '0');
      ++p;
      if (p - start > max_digits) return false;
    }
    if (p == start || (*start == '0' && p - start > 1)) return false;
    *out = v;
    return true;
  };
  enum : unsigned { kTime = 1, kIn = 2, kOut = 4, kIds = 8 };
  unsigned seen = 0;
  skip_ws();
  if (p == end || *p != '{') return false;
  ++p;
  for (;;) {
    skip_ws();
    if (p == end || *p != '"') return false;
    ++p;
    // The key with its closing quote, compared in place.
    auto key_is = [&](std::string_view quoted) {
      if (static_cast<std::size_t>(end - p) < quoted.size() ||
          std::memcmp(p, quoted.data(), quoted.size()) != 0) {
        return false;
      }
      p += quoted.size();
      return true;
    };
    unsigned key;
    if (key_is("timestamp\""))
      key = kTime;
    else if (key_is("input_length\""))
      key = kIn;
    else if (key_is("output_length\""))
      key = kOut;
    else if (key_is("hash_ids\""))
      key = kIds;
    else
      return false;
    if ((seen & key) != 0) return false;
    seen |= key;
    skip_ws();
    if (p == end || *p != ':') return false;
    ++p;
    skip_ws();
    std::uint64_t v = 0;
    if (key == kIds) {
      if (p == end || *p != '[') return false;
      ++p;
      skip_ws();
      if (p < end && *p == ']') {
        ++p;
      } else {
        for (;;) {
          if (!digits(19, &v)) return false;
          r.prefix_hashes.push_back(v);
          skip_ws();
          if (p == end) return false;
          if (*p == ']') {
            ++p;
            break;
          }
          if (*p != ',') return false;
          ++p;
          skip_ws();
        }
      }
    } else if (key == kTime) {
      const char* start = p;
      if (!digits(15, &v)) return false;
      *timestamp_ms = static_cast<double>(v);
      *timestamp_text = std::string_view(start, static_cast<std::size_t>(p - start));
    } else {
      if (!digits(10, &v) || v > UINT32_MAX) return false;
      (key == kIn ? r.input_tokens : r.output_tokens) = static_cast<std::uint32_t>(v);
    }
    skip_ws();
    if (p == end) return false;
    if (*p == '}') break;
    if (*p != ',') return false;
    ++p;
  }
  ++p;
  skip_ws();
  return p == end && (seen & (kTime | kIn | kOut)) == (kTime | kIn | kOut);
}

// Mooncake: {"timestamp": ms since start, "input_length", "output_length", "hash_ids": [...]}.
bool MooncakeRow(Import& im, JsonlState& st, std::string_view line, std::uint64_t number) {
  bool stop = false;
  TraceRequest& r = st.request;
  ResetMooncakeRow(r);
  TimeValue t;
  t.unit = TimeUnit::kMillis;
  t.since_start = true;
  if (im.options().fast_paths && PlainMooncakeRow(line, r, &t.number, &t.text)) {
    if (!im.Arrival(number, t, &r.arrival_s, &stop)) return !stop;
    im.Emit(r, number);
    return true;
  }
  ResetMooncakeRow(r);
  t = TimeValue{};
  dom::object obj;
  if (!ParseLineObject(im, line, number, &obj, &stop)) return !stop;
  bool have_time = false, have_in = false, have_out = false;
  std::string problem;
  Problem kind = Problem::kBadNumber;
  for (const auto field : obj) {
    const std::string_view key = field.key;
    std::uint64_t v = 0;
    if (key == "timestamp") {
      problem = JsonTime(field.value, key, TimeUnit::kMillis, &t, &st.time_text);
      t.since_start = true;
      if (!problem.empty() || t.wall) {
        if (problem.empty()) problem = "field \"timestamp\" must be milliseconds since the start";
        kind = Problem::kBadTimestamp;
        break;
      }
      have_time = true;
    } else if (key == "input_length") {
      if (!(problem = JsonUint(field.value, key, UINT32_MAX, &v)).empty()) break;
      r.input_tokens = static_cast<std::uint32_t>(v);
      have_in = true;
    } else if (key == "output_length") {
      if (!(problem = JsonUint(field.value, key, UINT32_MAX, &v)).empty()) break;
      r.output_tokens = static_cast<std::uint32_t>(v);
      have_out = true;
    } else if (key == "hash_ids") {
      dom::array ids;
      if (field.value.get_array().get(ids) != simdjson::SUCCESS) {
        problem = "field \"hash_ids\" is not an array";
        break;
      }
      for (dom::element id : ids) {
        if (!(problem = JsonUint(id, "hash_ids", UINT64_MAX, &v)).empty()) break;
        r.prefix_hashes.push_back(v);
      }
      if (!problem.empty()) break;
    }
  }
  if (problem.empty() && !(have_time && have_in && have_out)) {
    kind = Problem::kMissingField;
    problem = fmt::format("missing field \"{}\"", !have_time ? "timestamp"
                                                  : !have_in ? "input_length"
                                                             : "output_length");
  }
  if (!problem.empty()) return im.Reject(number, kind, problem);
  if (!im.Arrival(number, t, &r.arrival_s, &stop)) return !stop;
  im.Emit(r, number);
  return true;
}

// bakeoff's canonical JSONL (docs/formats/trace.md): an optional header line, then one request a
// line. Unknown fields are ignored, so newer files stay readable.
bool TraceRow(Import& im, JsonlState& st, std::string_view line, std::uint64_t number) {
  bool stop = false;
  dom::object obj;
  if (!ParseLineObject(im, line, number, &obj, &stop)) return !stop;
  std::string_view format;
  if (obj["format"].get_string().get(format) == simdjson::SUCCESS) {
    if (format != "bakeoff-trace") {
      return im.Reject(number, Problem::kBadValue,
                       fmt::format("unknown trace format {}", Shown(format)));
    }
    if (st.header_seen || im.report().rows > 0) {
      return im.Reject(number, Problem::kBadValue, "a header line after the first line");
    }
    st.header_seen = true;
    std::uint64_t block = 0;
    dom::element b;
    if (obj["block_tokens"].get(b) == simdjson::SUCCESS) {
      std::string problem = JsonUint(b, "block_tokens", UINT32_MAX, &block);
      if (!problem.empty()) return im.Reject(number, Problem::kBadNumber, problem);
      if (block > 0) {
        im.report().block_tokens = static_cast<std::uint32_t>(block);
        st.trace_has_blocks = true;
      }
    }
    bool known = true;
    if (obj["arrivals_known"].get_bool().get(known) == simdjson::SUCCESS)
      im.report().arrivals_known = known;
    dom::element o;
    if (obj["origin_utc"].get(o) == simdjson::SUCCESS) {
      std::string_view text;
      std::optional<std::int64_t> ns;
      if (o.get_string().get(text) == simdjson::SUCCESS) ns = ParseWallClock(text);
      if (!ns) {
        return im.Reject(number, Problem::kBadTimestamp,
                         "field \"origin_utc\" is not a date-time like \"2023-11-16T18:15:46Z\"");
      }
      im.set_start_unix_ns(*ns);
    }
    return true;
  }
  TraceRequest& r = st.request;
  r = TraceRequest{};
  TimeValue t;
  t.unit = TimeUnit::kSeconds;
  t.since_start = true;
  bool have_time = false, have_in = false, have_out = false;
  std::string problem;
  Problem kind = Problem::kBadValue;
  st.joined.clear();
  std::size_t text_bytes = 0;
  for (const auto field : obj) {
    const std::string_view key = field.key;
    const dom::element value = field.value;
    std::uint64_t v = 0;
    std::string_view s;
    if (key == "arrival_s") {
      double d;
      if (value.get_double().get(d) != simdjson::SUCCESS) {
        kind = Problem::kBadTimestamp;
        problem = "field \"arrival_s\" is not a number";
        break;
      }
      t.number = d;
      st.time_text = fmt::format("{}", d);
      t.text = st.time_text;
      have_time = true;
    } else if (key == "input_tokens" || key == "output_tokens" || key == "turn") {
      if (!(problem = JsonUint(value, key, UINT32_MAX, &v)).empty()) {
        kind = Problem::kBadNumber;
        break;
      }
      const auto u = static_cast<std::uint32_t>(v);
      if (key == "input_tokens")
        r.input_tokens = u, have_in = true;
      else if (key == "output_tokens")
        r.output_tokens = u, have_out = true;
      else
        r.turn = u;
    } else if (key == "priority") {
      std::int64_t p;
      if (value.get_int64().get(p) != simdjson::SUCCESS || p < INT32_MIN || p > INT32_MAX) {
        problem = "field \"priority\" is not a 32-bit integer";
        break;
      }
      r.priority = static_cast<std::int32_t>(p);
    } else if (key == "think_time_s") {
      double d;
      if (value.get_double().get(d) != simdjson::SUCCESS || !(d >= 0)) {
        problem = "field \"think_time_s\" is not a number >= 0";
        break;
      }
      r.think_time_s = d;
    } else if (key == "structured_output") {
      if (value.get_bool().get(r.structured_output) != simdjson::SUCCESS) {
        problem = "field \"structured_output\" is not a boolean";
        break;
      }
    } else if (key == "tokens_estimated") {
      if (value.get_bool().get(r.tokens_estimated) != simdjson::SUCCESS) {
        problem = "field \"tokens_estimated\" is not a boolean";
        break;
      }
    } else if (key == "prompt" || key == "prefix_group" || key == "session_id" || key == "model") {
      if (value.get_string().get(s) != simdjson::SUCCESS) {
        problem = fmt::format("field \"{}\" is not a string", key);
        break;
      }
      if (key == "prompt") {
        text_bytes += s.size();
        st.joined.append(s);
        if (im.options().keep_text) r.prompt = std::string(s);
      } else if (key == "prefix_group") {
        r.prefix_group = std::string(s);
      } else if (key == "session_id") {
        r.session_id = std::string(s);
      } else {
        r.model = std::string(s);
      }
    } else if (key == "messages") {
      if (!(problem =
                JsonMessages(value, im.options().keep_text, &r.messages, &text_bytes, &st.joined))
               .empty())
        break;
    } else if (key == "prefix_hashes") {
      dom::array ids;
      if (value.get_array().get(ids) != simdjson::SUCCESS) {
        problem = "field \"prefix_hashes\" is not an array";
        break;
      }
      for (dom::element id : ids) {
        if (!(problem = JsonUint(id, "prefix_hashes", UINT64_MAX, &v)).empty()) break;
        r.prefix_hashes.push_back(v);
      }
      if (!problem.empty()) {
        kind = Problem::kBadNumber;
        break;
      }
    }
  }
  if (problem.empty() && !(have_time && have_in && have_out)) {
    kind = Problem::kMissingField;
    problem = fmt::format("missing field \"{}\"", !have_time ? "arrival_s"
                                                  : !have_in ? "input_tokens"
                                                             : "output_tokens");
  }
  if (!problem.empty()) return im.Reject(number, kind, problem);
  if (!r.prefix_hashes.empty() && !st.trace_has_blocks) {
    return im.Reject(number, Problem::kBadValue,
                     "field \"prefix_hashes\" needs \"block_tokens\" in the header line");
  }
  if (!st.trace_has_blocks && !st.joined.empty()) {
    im.report().block_tokens = TextBlockTokens(im.options());
    r.prefix_hashes = TextBlockIds(st.joined, im.report().block_tokens);
  }
  if (!im.Arrival(number, t, &r.arrival_s, &stop)) return !stop;
  im.Emit(r, number);
  return true;
}

// JSONL log of OpenAI requests: {"timestamp"|"time": ..., "body"|"request": {...},
// "usage"|"response":
// {"usage": ...}, "session_id", "turn"}; a line without "body"/"request" is itself the body.
bool OpenAiLogRow(Import& im, JsonlState& st, std::string_view line, std::uint64_t number) {
  bool stop = false;
  dom::object obj;
  if (!ParseLineObject(im, line, number, &obj, &stop)) return !stop;
  TraceRequest& r = st.request;
  r = TraceRequest{};
  TimeValue t;
  std::string problem;
  dom::element time_value;
  std::string_view time_key = "timestamp";
  if (obj["timestamp"].get(time_value) != simdjson::SUCCESS) {
    time_key = "time";
    if (obj["time"].get(time_value) != simdjson::SUCCESS) {
      return im.Reject(number, Problem::kMissingField, "missing field \"timestamp\" (or \"time\")");
    }
  }
  problem = JsonTime(time_value, time_key, im.options().time_unit, &t, &st.time_text);
  if (!problem.empty()) return im.Reject(number, Problem::kBadTimestamp, problem);

  dom::object body = obj;
  dom::element b;
  if (obj["body"].get(b) == simdjson::SUCCESS || obj["request"].get(b) == simdjson::SUCCESS) {
    if (b.get_object().get(body) != simdjson::SUCCESS) {
      return im.Reject(number, Problem::kBadValue, "the request body is not an object");
    }
  }
  st.joined.clear();
  std::size_t text_bytes = 0;
  dom::element value;
  bool have_text = false;
  if (body["messages"].get(value) == simdjson::SUCCESS) {
    problem = JsonMessages(value, im.options().keep_text, &r.messages, &text_bytes, &st.joined);
    if (!problem.empty()) return im.Reject(number, Problem::kBadValue, problem);
    have_text = true;
  } else if (body["prompt"].get(value) == simdjson::SUCCESS) {
    std::string_view s;
    if (value.get_string().get(s) != simdjson::SUCCESS) {
      return im.Reject(number, Problem::kBadValue, "field \"prompt\" is not a string");
    }
    text_bytes = s.size();
    st.joined.assign(s);
    if (im.options().keep_text) r.prompt = std::string(s);
    have_text = true;
  }
  std::string_view s;
  if (body["model"].get_string().get(s) == simdjson::SUCCESS) r.model = std::string(s);
  std::int64_t priority;
  if (body["priority"].get_int64().get(priority) == simdjson::SUCCESS && priority >= INT32_MIN &&
      priority <= INT32_MAX) {
    r.priority = static_cast<std::int32_t>(priority);
  }
  // Structured output: OpenAI's response_format json_object / json_schema, or the guided_*
  // extensions of vLLM-style servers.
  std::string_view rf_type;
  if (body["response_format"]["type"].get_string().get(rf_type) == simdjson::SUCCESS) {
    r.structured_output = rf_type == "json_object" || rf_type == "json_schema";
  }
  for (const char* k : {"guided_json", "guided_regex", "guided_grammar", "guided_choice"}) {
    if (body[k].get(value) == simdjson::SUCCESS && !value.is_null()) r.structured_output = true;
  }
  if (obj["session_id"].get_string().get(s) == simdjson::SUCCESS) r.session_id = std::string(s);
  std::uint64_t v;
  if (obj["turn"].get(value) == simdjson::SUCCESS) {
    if (!(problem = JsonUint(value, "turn", UINT32_MAX, &v)).empty())
      return im.Reject(number, Problem::kBadNumber, problem);
    r.turn = static_cast<std::uint32_t>(v);
  }

  dom::element usage;
  const bool have_usage = obj["usage"].get(usage) == simdjson::SUCCESS ||
                          obj["response"]["usage"].get(usage) == simdjson::SUCCESS;
  bool have_in = false, have_out = false;
  if (have_usage) {
    if (usage["prompt_tokens"].get(value) == simdjson::SUCCESS) {
      if (!(problem = JsonUint(value, "usage.prompt_tokens", UINT32_MAX, &v)).empty())
        return im.Reject(number, Problem::kBadNumber, problem);
      r.input_tokens = static_cast<std::uint32_t>(v);
      have_in = true;
    }
    if (usage["completion_tokens"].get(value) == simdjson::SUCCESS) {
      if (!(problem = JsonUint(value, "usage.completion_tokens", UINT32_MAX, &v)).empty())
        return im.Reject(number, Problem::kBadNumber, problem);
      r.output_tokens = static_cast<std::uint32_t>(v);
      have_out = true;
    }
  }
  if (!have_in) {
    if (!have_text) {
      return im.Reject(number, Problem::kMissingField,
                       "no usage.prompt_tokens and no \"messages\" or \"prompt\" to estimate from");
    }
    r.input_tokens = EstimateTokens(text_bytes);
    r.tokens_estimated = true;
  }
  if (!have_out) {
    if (body["max_completion_tokens"].get(value) != simdjson::SUCCESS &&
        body["max_tokens"].get(value) != simdjson::SUCCESS) {
      return im.Reject(
          number, Problem::kMissingField,
          "no usage.completion_tokens and no \"max_tokens\" or \"max_completion_tokens\"");
    }
    if (!(problem = JsonUint(value, "max_tokens", UINT32_MAX, &v)).empty())
      return im.Reject(number, Problem::kBadNumber, problem);
    r.output_tokens = static_cast<std::uint32_t>(v);
    r.tokens_estimated = true;
  }
  if (!st.joined.empty()) {
    im.report().block_tokens = TextBlockTokens(im.options());
    r.prefix_hashes = TextBlockIds(st.joined, im.report().block_tokens);
  }
  if (!im.Arrival(number, t, &r.arrival_s, &stop)) return !stop;
  im.Emit(r, number);
  return true;
}

}  // namespace

void JsonlImport(Import& im, TraceFormat format, const ReadFn& read) {
  ImportReport& report = im.report();
  if (format == TraceFormat::kMooncake) {
    report.block_tokens =
        im.options().block_tokens != 0 ? im.options().block_tokens : kMooncakeBlockTokens;
  }
  JsonlState st;
  const bool ok = ForEachLine(read, [&](std::string_view line, std::uint64_t number, bool) {
    ++report.lines;
    if (im.Blank(line, number)) return true;
    if (format == TraceFormat::kMooncake) return MooncakeRow(im, st, line, number);
    if (format == TraceFormat::kTrace) return TraceRow(im, st, line, number);
    return OpenAiLogRow(im, st, line, number);
  });
  if (!ok && !im.failed()) im.Fail(ErrorCode::kIo, im.name() + ": read failed");
}

}  // namespace bakeoff::workload::importers_internal
