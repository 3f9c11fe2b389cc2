// tests/unit/workload/prefix_reuse_test.cc
//
// Owns: the ideal-prefix-cache count on hand-made chains (chain semantics, the partial last
// block, order), on random branching chains through both Add and the Push queue, and on the real
// Mooncake conversation trace, where it is checked against an independent count: a std::set of
// prefix-chain strings, a deliberately different and simple method. The real trace lives in ../shared/data/traces (BAKEOFF_SHARED_DIR overrides); the test
// is skipped with a message when it is absent.
#include "workload/prefix_reuse.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/rng.h"
#include "workload/fingerprint.h"
#include "workload/importers.h"
#include "support/test_data.h"

namespace bakeoff::workload {
namespace {

using bakeoff::testing::SharedDir;

TEST(PrefixReuseTest, ChainSemantics) {
  PrefixReuseCounter c(512);
  const std::vector<std::uint64_t> a = {1, 2, 3};
  EXPECT_EQ(c.Add(a, 1500), 0u);
  EXPECT_EQ(c.Add(a, 1500), 1500u);  // every block seen: the partial last block counts 476 tokens
  const std::vector<std::uint64_t> b = {9, 2, 3};
  EXPECT_EQ(c.Add(b, 1500), 0u);  // blocks 2 and 3 were seen, but after block 1, not after 9
  const std::vector<std::uint64_t> d = {1, 2, 7, 8};
  EXPECT_EQ(c.Add(d, 2000), 1024u);
  const std::vector<std::uint64_t> e = {1, 2, 7, 8};
  EXPECT_EQ(c.Add(e, 1800), 1800u);  // capped at the prompt length
  EXPECT_EQ(c.distinct_blocks(), 8u);  // 1,2,3 | 9,2,3 | 7,8
  EXPECT_EQ(c.Add(std::vector<std::uint64_t>{}, 100), 0u);
}

TEST(PrefixReuseTest, ManyDistinctBlocksGrowTheTable) {
  PrefixReuseCounter c(16);
  std::vector<std::uint64_t> ids(5000);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i % 7;  // repeated ids at different depths
  EXPECT_EQ(c.Add(ids, 80'000), 0u);
  EXPECT_EQ(c.Add(ids, 80'000), 80'000u);
  EXPECT_EQ(c.distinct_blocks(), 5000u);
}

// Push (the queue the fingerprint uses) counts exactly as Add, and both as an independent count, on
// many requests whose chains branch at every depth and grow the table several times.
TEST(PrefixReuseTest, PushCountsExactlyAsAddAndAnIndependentCount) {
  Rng rng(23);
  PrefixReuseCounter by_add(64), by_push(64);
  std::set<std::vector<std::uint64_t>> seen;
  std::uint64_t served_add = 0, served_set = 0;
  for (int i = 0; i < 20'000; ++i) {
    // Ids from a small alphabet, so that chains share prefixes of every length and ids repeat at
    // other depths; lengths 0..40 blocks, a partial last block.
    const std::size_t blocks = rng.Below(41);
    std::vector<std::uint64_t> ids(blocks);
    for (std::size_t b = 0; b < blocks; ++b) ids[b] = b < 3 ? rng.Below(4) : rng.Below(blocks < 10 ? 3 : 1000);
    const auto input = static_cast<std::uint32_t>(blocks == 0 ? rng.Below(64) : (blocks - 1) * 64 + 1 + rng.Below(64));
    served_add += by_add.Add(ids, input);
    by_push.Push(ids, input);
    std::size_t k = 0;
    while (k < blocks && seen.count(std::vector<std::uint64_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k + 1))) > 0) ++k;
    served_set += std::min<std::uint64_t>(k * 64, input);
    for (std::size_t b = 1; b <= blocks; ++b) seen.insert(std::vector<std::uint64_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(b)));
  }
  by_push.Flush();
  EXPECT_EQ(served_add, served_set);
  EXPECT_EQ(by_add.served_tokens(), served_set);
  EXPECT_EQ(by_push.served_tokens(), served_set);
  EXPECT_EQ(by_add.distinct_blocks(), seen.size());
  EXPECT_EQ(by_push.distinct_blocks(), seen.size());
  EXPECT_GT(seen.size(), 100'000u);  // the table grew from 1,024 slots many times
  // Add after Push counts the queue first, in order.
  PrefixReuseCounter mixed(512);
  const std::vector<std::uint64_t> a = {1, 2, 3};
  mixed.Push(a, 1500);
  EXPECT_EQ(mixed.Add(a, 1500), 1500u);
  EXPECT_EQ(mixed.served_tokens(), 1500u);
}

TEST(PrefixReuseTest, MooncakeTraceMatchesAnIndependentCount) {
  const std::filesystem::path path = SharedDir() / "data/traces/mooncake_conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "real trace not found at " << path << " (set BAKEOFF_SHARED_DIR)";

  // Independent count: every prefix chain "h0,h1,...,hi," of every earlier request goes into a set;
  // a request is served the longest chain of its own found there.
  std::set<std::string> seen;
  std::uint64_t served = 0, prompt = 0, requests = 0;
  Result<ImportReport> imported = ImportTraceFile(path, {}, [&](const TraceRequest& r, std::uint32_t block) {
    ASSERT_EQ(block, 512u);
    ++requests;
    prompt += r.input_tokens;
    std::string chain;
    std::vector<std::string> chains;
    for (const std::uint64_t id : r.prefix_hashes) {
      chain += std::to_string(id) + ",";
      chains.push_back(chain);
    }
    std::size_t k = 0;
    while (k < chains.size() && seen.count(chains[k]) > 0) ++k;
    served += std::min<std::uint64_t>(k * 512, r.input_tokens);
    seen.insert(chains.begin(), chains.end());
  });
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  ASSERT_EQ(requests, 12031u);

  Result<Fingerprint> f = FingerprintFile(path, {});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->requests, requests);
  EXPECT_EQ(f->prompt_tokens, prompt);
  EXPECT_EQ(f->served_tokens, served);
  EXPECT_EQ(f->distinct_blocks, seen.size());
  // The figure quoted in docs/workloads.md.
  EXPECT_EQ(served, 54'098'411u);
  EXPECT_EQ(prompt, 144'793'823u);
  EXPECT_NEAR(*f->prefix_reuse, 0.3736, 0.0001);
}

TEST(PrefixReuseTest, AzureTraceFingerprintHeadlines) {
  const std::filesystem::path path = SharedDir() / "data/traces/AzureLLMInferenceTrace_conv.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "real trace not found at " << path << " (set BAKEOFF_SHARED_DIR)";
  Result<Fingerprint> f = FingerprintFile(path, {});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->format, "azure-csv");
  EXPECT_EQ(f->requests, 19366u);
  EXPECT_FALSE(f->prefix_reuse.has_value());
  EXPECT_NEAR(f->duration_s, 3501.7, 0.1);
  EXPECT_NEAR(f->gap_cv, 1.09, 0.01);
}

}  // namespace
}  // namespace bakeoff::workload
