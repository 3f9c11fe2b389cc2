// report/markdown.h
//
// Owns: the Markdown pieces every document shares: a table cell's escaping, a table from its
// header and rows, and a number with thousands separators. Every Markdown document bakeoff writes
// (report.md, study_report.h; docs/BENCHMARKS.md, the benchdoc layer) is made of them.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bakeoff::report {

// A table cell holds no pipe (written \|) and no line break (written as a space).
std::string MarkdownCell(std::string_view text);

// "| a | b |\n|---|---|\n| 1 | 2 |\n": cells are escaped; a short row is padded with empty cells.
std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows);

// 1234567.8 -> "1,234,568" (rounded to a whole number; "-1,234" below zero).
std::string WithThousands(double x);

}  // namespace bakeoff::report
