// core/json_dump.h
//
// Owns: turning a JSON document into the text bakeoff writes (bundles, probes.json, reports'
// data, compare and plan output), and reading a peer's JSON document. nlohmann's dump throws on a
// string that is not UTF-8, and the strings here quote servers, logs and traces; DumpJson never
// throws for that reason: it replaces each invalid byte with U+FFFD, counts them and logs the
// count with `what`. ParsePeerJson reads a body whose only fault is bytes that are not UTF-8 with
// those replaced, so one cut character does not hide a whole answer or model list.
//
// Thread-safety: pure function (the log line goes through spdlog, which is thread-safe).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace bakeoff {

// `doc.dump(indent)`, always valid UTF-8; with `indent` >= 0 a final '\n' is added, as for a file.
// `what` names the file or document in the warning logged when bytes had to be replaced, and the
// number replaced is added to `*replaced` when given.
std::string DumpJson(const nlohmann::json& doc, int indent, std::string_view what = {},
                     std::size_t* replaced = nullptr);

// The document in `text`, or a discarded value (is_discarded()) when it is not JSON. Never throws.
nlohmann::json ParsePeerJson(std::string_view text);

}  // namespace bakeoff
