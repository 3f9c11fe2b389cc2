// qualify/probes.h
//
// Owns: the declarations of the probes AllProbes() lists, and the helpers several probes share.
// Each probe is a plain function filling a ProbeResult (qualify/probe.h); they live in
// lifecycle_probes.cc (cold start, readiness, SIGTERM drain, restart), load_probes.cc
// (cancellation, overload), observability_probe.cc, compatibility_probe.cc, bad_input_probe.cc and
// quality_probe.cc.
#pragma once

#include <string>
#include <vector>

#include "qualify/probe.h"

namespace bakeoff::qualify {

void ProbeColdStart(ProbeContext& context, ProbeResult& result);
void ProbeReadiness(ProbeContext& context, ProbeResult& result);
void ProbeSigtermDrain(ProbeContext& context, ProbeResult& result);
void ProbeRestart(ProbeContext& context, ProbeResult& result);
void ProbeCancellation(ProbeContext& context, ProbeResult& result);
void ProbeOverload(ProbeContext& context, ProbeResult& result);
void ProbeObservability(ProbeContext& context, ProbeResult& result);
// The OpenAI API features a benchmark relies on, each a check (compatibility_probe.cc).
void ProbeCompatibility(ProbeContext& context, ProbeResult& result);
// Invalid requests, each a check: 4xx expected; 5xx, hangs and deaths are findings.
void ProbeBadInput(ProbeContext& context, ProbeResult& result);
// A prompt set asked greedily and scored (quality_probe.cc, qualify/quality_set.h).
void ProbeQuality(ProbeContext& context, ProbeResult& result);

// Request bodies for `count` streaming generations of exactly `output_tokens` each (ignore_eos
// and min_tokens) on the candidate's API, prompts of about `prompt_words` words, each prompt
// distinct from every other one this process built, so no prefix cache shortens the work.
std::vector<std::string> StreamingBodies(const target::Candidate& candidate, std::size_t count,
                                         std::uint32_t output_tokens,
                                         std::size_t prompt_words = 32);

// Request bodies for `count` pooling requests of `inputs` texts (a rerank's documents, after a
// short query) of about `words_per_input` words each, every text distinct as above.
// REQUIRES: the candidate's route is a pooling one.
std::vector<std::string> PoolingBodies(const target::Candidate& candidate, std::size_t count, std::size_t inputs,
                                       std::size_t words_per_input);
// What keeps the candidate busy for a probe: StreamingBodies on a generation route; on a pooling
// route, requests of kWorkInputs texts whose length fits the candidate's known context (each at
// most max(prompt_words, kWorkWordsPerInput) words), since a pooling answer has no output length.
inline constexpr std::size_t kWorkInputs = 8;
inline constexpr std::size_t kWorkWordsPerInput = 128;
std::vector<std::string> WorkBodies(const target::Candidate& candidate, std::size_t count, std::uint32_t output_tokens,
                                    std::size_t prompt_words = 32);

// Seconds as a double.
double Seconds(Nanos duration);

}  // namespace bakeoff::qualify
