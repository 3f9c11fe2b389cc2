// tests/fuzz/record_line_fuzz.cc
//
// Owns: the libFuzzer harness for measure::RecordLineReader, the records.jsonl line parser that
// `bakeoff merge` reads shards with. Invariants checked on every input:
//   - reading never crashes, and an input that is refused says why;
//   - a record that reads can be fed to a StepRecorder (which checks its own invariants);
//   - a line that reads writes back (RecordToJsonLine) to a line that reads to the same record:
//     writing it again gives the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "measure/record.h"
#include "measure/step_recorder.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using bakeoff::measure::RecordLineReader;
  using bakeoff::measure::RecordToJsonLine;
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  const bakeoff::MonoTime t0{std::chrono::seconds(1000)};
  RecordLineReader reader;
  bakeoff::Result<bakeoff::measure::RequestRecord> record = reader.Read(line, t0);
  if (!record.ok()) {
    BAKEOFF_CHECK(!record.error().message.empty());
    return 0;
  }
  bakeoff::measure::StepRecorder recorder;
  recorder.Add(record.value());
  const std::string written = RecordToJsonLine(record.value(), t0);
  bakeoff::Result<bakeoff::measure::RequestRecord> again = reader.Read(written, t0);
  BAKEOFF_CHECK(again.ok()) << "a written record does not read back: " << again.error().message << "\n" << written;
  BAKEOFF_CHECK(RecordToJsonLine(again.value(), t0) == written) << written;
  return 0;
}
