// Tests for workload/trace_transform.h: the what-ifs bakeoff plan applies to a trace.
#include "workload/trace_transform.h"

#include <gtest/gtest.h>

namespace bakeoff::workload {
namespace {

// `n` requests, each of `blocks` blocks of 16 tokens; request i shares its first i % (blocks + 1)
// blocks with every earlier request (ids 0, 1, ... at the same positions), the rest its own.
Trace Shared(std::size_t n, std::size_t blocks) {
  Trace trace;
  trace.block_tokens = 16;
  for (std::size_t i = 0; i < n; ++i) {
    TraceRequest r;
    r.arrival_s = static_cast<double>(i);
    r.input_tokens = static_cast<std::uint32_t>(16 * blocks);
    r.output_tokens = 7;
    for (std::size_t k = 0; k < blocks; ++k) {
      r.prefix_hashes.push_back(k < i % (blocks + 1) ? k : 1'000'000 + i * blocks + k);
    }
    trace.requests.push_back(r);
  }
  return trace;
}

TEST(TraceTransformTest, ScalesOutputsRoundedAndAtLeastOne) {
  Trace trace = Shared(3, 2);
  ScaleOutputs(trace, 2);
  EXPECT_EQ(trace.requests[0].output_tokens, 14u);
  ScaleOutputs(trace, 0.01);
  EXPECT_EQ(trace.requests[0].output_tokens, 1u);
}

TEST(TraceTransformTest, CutsPrefixReuseToTheShareAsked) {
  Trace trace = Shared(4000, 8);
  const std::optional<double> before = IdealPrefixReuse(trace);
  ASSERT_TRUE(before.has_value());
  EXPECT_GT(*before, 0.3);
  const std::optional<ReuseChange> cut = CutPrefixReuse(trace, 0.5);
  ASSERT_TRUE(cut.has_value());
  EXPECT_DOUBLE_EQ(cut->before, *before);
  EXPECT_NEAR(cut->after, *before / 2, 0.02 * *before);
  // The figure stated is the trace's: counted again over the changed trace.
  EXPECT_NEAR(*IdealPrefixReuse(trace), cut->after, 1e-12);
  EXPECT_GT(cut->isolated_share, 0.2);
  EXPECT_LT(cut->isolated_share, 0.8);
  // Lengths and arrivals are untouched.
  EXPECT_EQ(trace.requests[5].input_tokens, 128u);
  EXPECT_EQ(trace.requests[5].prefix_hashes.size(), 8u);
}

TEST(TraceTransformTest, CuttingToNothingLeavesNoReuse) {
  Trace trace = Shared(500, 4);
  ASSERT_TRUE(CutPrefixReuse(trace, 0).has_value());
  EXPECT_DOUBLE_EQ(*IdealPrefixReuse(trace), 0);
}

TEST(TraceTransformTest, WithoutBlockIdsReuseIsNotCountedAndNothingChanges) {
  Trace trace;
  TraceRequest r;
  r.input_tokens = 10;
  r.output_tokens = 3;
  trace.requests = {r, r};
  EXPECT_FALSE(IdealPrefixReuse(trace).has_value());
  EXPECT_FALSE(CutPrefixReuse(trace, 0.5).has_value());
  EXPECT_EQ(trace.requests[0], r);
}

}  // namespace
}  // namespace bakeoff::workload
