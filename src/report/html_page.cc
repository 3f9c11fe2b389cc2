// report/html_page.cc: the self-contained page (contract in html_page.h).
#include "report/html_page.h"

#include <fmt/format.h>

#include "core/file.h"
#include "core/json_dump.h"
#include "core/json_text.h"

namespace bakeoff::report {
namespace assets {
// Defined in the build's report_assets.cc (cmake/embed_assets.cmake).
std::string_view UplotJs();
std::string_view UplotCss();
std::string_view PageJs();
std::string_view PageCss();
}  // namespace assets

namespace {

// Text inside <script> ends at "</": JSON keeps its meaning with "<" written as \u003c.
std::string ScriptSafe(std::string text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

std::string HtmlEscaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string HtmlPage(std::string_view title, const nlohmann::json& data) {
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // No fetch, image, font, frame or form may reach anything: the page is its own world.
  page += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
          "style-src 'unsafe-inline'; img-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += fmt::format("<title>{}</title>\n", HtmlEscaped(ValidUtf8(title)));
  page += "<style>\n";
  page += assets::UplotCss();
  page += "\n";
  page += assets::PageCss();
  page += "\n</style>\n</head>\n<body>\n<div id=\"page\"></div>\n";
  page += "<script type=\"application/json\" id=\"bakeoff-data\">";
  page += ScriptSafe(DumpJson(data, -1));
  page += "</script>\n<script>\n";
  page += assets::UplotJs();
  page += "\n</script>\n<script>\n";
  page += assets::PageJs();
  page += "\n</script>\n</body>\n</html>\n";
  return page;
}

Status WriteHtmlPage(const std::filesystem::path& file, std::string_view title, const nlohmann::json& data) {
  return WriteFileAtomically(file, HtmlPage(title, data));
}

}  // namespace bakeoff::report
