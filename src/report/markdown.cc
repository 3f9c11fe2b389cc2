// report/markdown.cc: the Markdown pieces documents share (markdown.h).
#include "report/markdown.h"

#include <cmath>

#include <fmt/format.h>

namespace bakeoff::report {

std::string MarkdownCell(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out;
}

std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows) {
  std::string md = "|";
  for (const std::string& h : header) md += " " + MarkdownCell(h) + " |";
  md += "\n|";
  for (size_t i = 0; i < header.size(); ++i) md += "---|";
  md += "\n";
  for (const std::vector<std::string>& row : rows) {
    md += "|";
    for (size_t i = 0; i < header.size(); ++i) md += " " + (i < row.size() ? MarkdownCell(row[i]) : "") + " |";
    md += "\n";
  }
  return md;
}

std::string WithThousands(double x) {
  if (!std::isfinite(x)) return "n/a";
  std::string digits = fmt::format("{:.0f}", std::fabs(x));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (x <= -0.5 ? "-" : "") + out;
}

}  // namespace bakeoff::report
