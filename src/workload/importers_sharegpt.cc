// workload/importers_sharegpt.cc
//
// Owns: the ShareGPT importer: a JSON array of conversations, or one conversation per line
// (JSONL). There are no timestamps (every request arrives at 0, arrivals_known = false) and no
// token counts (estimated from text). Each human turn followed by a model reply becomes one
// request whose prompt is the conversation so far.
// Does not own: what the formats share (workload/importers_common.h) or choosing the format, nor
// telling the array from the JSONL form (importers.cc).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "workload/importers.h"
#include "workload/importers_common.h"

namespace bakeoff::workload::importers_internal {

namespace {

struct ShareGptState {
  std::uint64_t index = 0;     // conversations seen
  std::uint64_t trailing = 0;  // user turns without a reply
  std::string joined;
};

void StartShareGpt(Import& im) {
  ImportReport& report = im.report();
  report.arrivals_known = false;
  report.block_tokens = TextBlockTokens(im.options());
  report.notes.push_back(
      "ShareGPT has no timestamps: every request arrives at 0 (arrivals unknown)");
  report.notes.push_back("ShareGPT has no token counts: lengths are estimated as ceil(bytes / 4)");
}

void FinishShareGpt(Import& im, const ShareGptState& st) {
  if (st.trailing > 0) {
    im.report().notes.push_back(fmt::format(
        "{} user turns have no model reply after them and are not requests", st.trailing));
  }
}

// One conversation object. `where` names it in messages ("f.json: conversation 3" or "f.jsonl:3");
// its rows carry `line` as their source line. Returns false when the import must stop.
bool ShareGptConversation(Import& im, ShareGptState& st, dom::object obj, const std::string& where,
                          std::uint64_t line) {
  ImportReport& report = im.report();
  std::string id = std::to_string(st.index);
  std::string_view s;
  std::uint64_t n;
  if (obj["id"].get_string().get(s) == simdjson::SUCCESS)
    id = std::string(s);
  else if (obj["id"].get_uint64().get(n) == simdjson::SUCCESS)
    id = std::to_string(n);
  const std::string named = where + " (id " + Shown(id) + ")";
  dom::array turns;
  if (obj["conversations"].get_array().get(turns) != simdjson::SUCCESS &&
      obj["messages"].get_array().get(turns) != simdjson::SUCCESS) {
    return im.RejectAt(named, Problem::kMissingField,
                       "no \"conversations\" (or \"messages\") array");
  }
  // Validate first, so a bad turn rejects the whole conversation and emits nothing of it.
  std::vector<std::pair<std::string_view, std::string_view>> messages;  // role, text
  std::string problem;
  for (dom::element turn : turns) {
    std::string_view from, value;
    if ((turn["from"].get_string().get(from) != simdjson::SUCCESS &&
         turn["role"].get_string().get(from) != simdjson::SUCCESS) ||
        (turn["value"].get_string().get(value) != simdjson::SUCCESS &&
         turn["content"].get_string().get(value) != simdjson::SUCCESS)) {
      problem = fmt::format("turn {} has no string \"from\" and \"value\"", messages.size());
      break;
    }
    messages.emplace_back(from, value);
  }
  if (!problem.empty()) return im.RejectAt(named, Problem::kBadValue, problem);
  auto role_of = [](std::string_view from) -> std::string_view {
    if (from == "human" || from == "user") return "user";
    if (from == "system") return "system";
    return "assistant";  // gpt, chatgpt, bard, bing, assistant, ...
  };
  st.joined.clear();
  std::size_t bytes = 0;
  std::uint32_t turn_index = 0;
  TraceRequest r;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string_view role = role_of(messages[i].first);
    st.joined.append(role).append("\n").append(messages[i].second).append("\n");
    bytes += messages[i].second.size();
    if (im.options().keep_text)
      r.messages.push_back(ChatMessage{std::string(role), std::string(messages[i].second)});
    if (role != "user") continue;
    if (i + 1 >= messages.size() || role_of(messages[i + 1].first) != "assistant") {
      ++st.trailing;
      continue;
    }
    TraceRequest out;
    out.arrival_s = 0;
    out.input_tokens = EstimateTokens(bytes);
    out.output_tokens = EstimateTokens(messages[i + 1].second.size());
    out.tokens_estimated = true;
    out.session_id = id;
    out.turn = turn_index++;
    if (im.options().keep_text) out.messages = r.messages;
    out.prefix_hashes = TextBlockIds(st.joined, report.block_tokens);
    im.Emit(out, line);
  }
  return true;
}

// One line of ShareGPT JSONL: one conversation object.
bool ShareGptLine(Import& im, ShareGptState& st, std::string_view line, std::uint64_t number) {
  bool stop = false;
  dom::object obj;
  ++st.index;
  if (!ParseLineObject(im, line, number, &obj, &stop)) return !stop;
  return ShareGptConversation(im, st, obj, im.Where(number), number);
}

// Where a JSON document stops being valid, for a message: "line L, column C (byte B): what", and
// whether the document simply ends too early (a truncated file). The fast parser does not say
// where; this runs only after it failed, so its cost does not matter.
std::string JsonErrorPosition(std::string_view content, bool* truncated) {
  *truncated = false;
  try {
    const nlohmann::json parsed = nlohmann::json::parse(content.begin(), content.end());
    static_cast<void>(parsed);
  } catch (const nlohmann::json::parse_error& e) {
    const std::size_t byte =
        std::min<std::size_t>(e.byte, content.size());  // 1-based: the byte that failed
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i + 1 < byte; ++i) {
      if (content[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    if (const std::size_t colon = what.find(": "); colon != std::string::npos)
      what = what.substr(colon + 2);
    *truncated =
        byte >= content.size() || what.find("unexpected end of input") != std::string::npos;
    return fmt::format("line {}, column {} (byte {}): {}", line, column, byte, what);
  } catch (const nlohmann::json::exception&) {
  }
  return {};
}

}  // namespace

bool ShareGptArrayImport(Import& im, std::string_view content) {
  StartShareGpt(im);
  if (content.size() >= 3 && content.substr(0, 3) == "\xEF\xBB\xBF")
    content.remove_prefix(3);  // byte order mark
  simdjson::padded_string padded(content);
  dom::element root;
  if (const simdjson::error_code code = im.parser().parse(padded).get(root);
      code != simdjson::SUCCESS) {
    bool truncated = false;
    const std::string where = JsonErrorPosition(content, &truncated);
    im.Fail(
        ErrorCode::kInvalidInput,
        where.empty()
            ? fmt::format(
                  "{}: not valid JSON ({}; ShareGPT is one JSON array, or one conversation a line)",
                  im.name(), simdjson::error_message(code))
            : fmt::format("{}: not valid JSON at {}{}", im.name(), where,
                          truncated ? " (the file ends there: truncated?)" : ""));
    return false;
  }
  dom::array conversations;
  if (root.get_array().get(conversations) != simdjson::SUCCESS) {
    im.Fail(ErrorCode::kInvalidInput,
            im.name() + ": the top level is not an array of conversations");
    return false;
  }
  ShareGptState st;
  for (dom::element conversation : conversations) {
    ++st.index;
    ++im.report().lines;
    const std::string where = fmt::format("{}: conversation {}", im.name(), st.index);
    dom::object obj;
    if (conversation.get_object().get(obj) != simdjson::SUCCESS) {
      if (!im.RejectAt(where, Problem::kBadValue, "not an object")) return false;
      continue;
    }
    if (!ShareGptConversation(im, st, obj, where, st.index)) return false;
  }
  FinishShareGpt(im, st);
  return true;
}

void ShareGptLinesImport(Import& im, const ReadFn& read) {
  ShareGptState st;
  StartShareGpt(im);
  const bool ok = ForEachLine(read, [&](std::string_view line, std::uint64_t number, bool) {
    ++im.report().lines;
    if (im.Blank(line, number)) return true;
    return ShareGptLine(im, st, line, number);
  });
  if (!ok && !im.failed()) im.Fail(ErrorCode::kIo, im.name() + ": read failed");
  if (!im.failed()) FinishShareGpt(im, st);
}

}  // namespace bakeoff::workload::importers_internal
