// tests/fuzz/study_fuzz.cc
//
// Owns: the libFuzzer harness for study files (study/study.h). Invariants: a parse either fails
// with kInvalidInput whose every line starts with "fuzz.yaml" (FILE:LINE: FIELD: ... lines, every
// mistake at once), or yields a study that keeps its own rules: a name, at least one candidate,
// unique candidate names of one kind each, at least one latency term, phases in the method's
// order without repeats, and a positive budget.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "core/check.h"
#include "study/study.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bakeoff;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<study::Study> s = study::ParseStudy(text, "fuzz.yaml");
  if (!s.ok()) {
    BAKEOFF_CHECK(s.error().code == ErrorCode::kInvalidInput) << s.error().message;
    const std::string& message = s.error().message;
    for (std::size_t start = 0; start < message.size();) {
      std::size_t end = message.find('\n', start);
      if (end == std::string::npos) end = message.size();
      BAKEOFF_CHECK(message.compare(start, 9, "fuzz.yaml") == 0) << message;
      start = end + 1;
    }
    return 0;
  }
  BAKEOFF_CHECK(!s->name.empty());
  BAKEOFF_CHECK(!s->candidates.empty());
  std::set<std::string> names;
  for (const study::CandidateSpec& c : s->candidates) BAKEOFF_CHECK(names.insert(c.name).second) << c.name;
  BAKEOFF_CHECK(!s->slo.latency.terms.empty());
  BAKEOFF_CHECK(std::is_sorted(s->plan.phases.begin(), s->plan.phases.end()));
  BAKEOFF_CHECK(std::adjacent_find(s->plan.phases.begin(), s->plan.phases.end()) == s->plan.phases.end());
  BAKEOFF_CHECK(s->budget > Nanos(0));
  BAKEOFF_CHECK(s->model.max_context > 0);
  return 0;
}
