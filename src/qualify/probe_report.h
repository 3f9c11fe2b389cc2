// qualify/probe_report.h
//
// Owns: rendering a probe run: probes.json (docs/formats/probes.md) and the plain-text table
// `bakeoff probe` prints. Both from the same ProbeRun value.
#pragma once

#include <string>

#include "qualify/probe.h"

namespace bakeoff::qualify {

inline constexpr int kProbesSchemaVersion = 1;

// What was probed, for the report's header.
struct ProbedTarget {
  std::string url;
  std::string mode;     // "launch" or "attach"
  std::string command;  // launch mode: the command line
};

std::string ProbesJson(const ProbeRun& run, const ProbedTarget& target);
std::string FormatProbeTable(const ProbeRun& run, const ProbedTarget& target);

}  // namespace bakeoff::qualify
