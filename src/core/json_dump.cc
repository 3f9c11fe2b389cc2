#include "core/json_dump.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/json_text.h"

namespace bakeoff {
namespace {

// A copy of `doc` whose every string and object key is valid UTF-8.
nlohmann::json Sanitized(const nlohmann::json& doc, std::size_t& replaced) {
  switch (doc.type()) {
    case nlohmann::json::value_t::string:
      return ValidUtf8(doc.get_ref<const std::string&>(), &replaced);
    case nlohmann::json::value_t::array: {
      nlohmann::json out = nlohmann::json::array();
      for (const nlohmann::json& item : doc) out.push_back(Sanitized(item, replaced));
      return out;
    }
    case nlohmann::json::value_t::object: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [key, value] : doc.items()) out[ValidUtf8(key, &replaced)] = Sanitized(value, replaced);
      return out;
    }
    default:
      return doc;
  }
}

}  // namespace

nlohmann::json ParsePeerJson(std::string_view text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded()) return doc;
  std::size_t replaced = 0;
  const std::string repaired = ValidUtf8(text, &replaced);
  if (replaced == 0) return doc;
  return nlohmann::json::parse(repaired, nullptr, /*allow_exceptions=*/false);
}

std::string DumpJson(const nlohmann::json& doc, int indent, std::string_view what, std::size_t* replaced) {
  std::string text;
  try {
    text = doc.dump(indent);
  } catch (const nlohmann::json::type_error&) {
    std::size_t count = 0;
    text = Sanitized(doc, count).dump(indent);
    spdlog::warn("{}: replaced {} byte(s) that were not UTF-8 with U+FFFD", what.empty() ? "JSON" : what, count);
    if (replaced != nullptr) *replaced += count;
  }
  if (indent >= 0) text += '\n';
  return text;
}

}  // namespace bakeoff
