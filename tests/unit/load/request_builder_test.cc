// load/request_builder.h on a pooling route: synthetic and trace requests carry `shape.batch`
// texts of the planned length, each distinct, and no conversation; the planned prompt tokens
// count every input (a rerank's query once per document).
#include "load/request_builder.h"

#include <gtest/gtest.h>

#include <set>

#include "count_words.h"
#include "load/runner.h"

namespace bakeoff::load {
namespace {

RunSpec PoolingRun(dialect::Api api, std::uint32_t batch) {
  RunSpec run;
  run.seed = 3;
  run.target.request.api = api;
  run.target.request.model = "m";
  run.shape.prompt_tokens = 40;
  run.shape.batch = batch;
  return run;
}

workload::Trace TwoTurnTrace() {
  workload::Trace trace;
  for (std::uint32_t turn = 0; turn < 2; ++turn) {
    workload::TraceRequest r;
    r.input_tokens = 200;
    r.output_tokens = 30;
    r.session_id = "s";
    r.turn = turn;
    trace.requests.push_back(r);
  }
  return trace;
}

TEST(RequestBuilderTest, PoolingRequestsCarryTheirBatchOfDistinctTexts) {
  const PromptText prompts;
  for (dialect::Api api : {dialect::Api::kEmbeddings, dialect::Api::kRerank}) {
    SCOPED_TRACE(dialect::ApiName(api));
    const RunSpec run = PoolingRun(api, 4);
    const workload::Trace trace = TwoTurnTrace();
    const std::uint32_t synthetic_words = PromptWords(run.shape.prompt_tokens, run.target.prompt_sizing);
    const std::uint32_t trace_words = PromptWords(200, run.target.prompt_sizing);
    for (const auto& [request, words] :
         {std::pair(BuildSyntheticRequest(run, prompts, 0, 5), synthetic_words),
          std::pair(BuildTraceRequest(run, trace, prompts, 0, 1, {{"user", "earlier"}, {"assistant", "answer"}}),
                    trace_words)}) {
      ASSERT_EQ(request.inputs.size(), 4u);
      const std::set<std::string> distinct(request.inputs.begin(), request.inputs.end());
      EXPECT_EQ(distinct.size(), 4u) << "each text has its own seed";
      for (const std::string& input : request.inputs) EXPECT_NEAR(CountWords(input), words, 1);
      EXPECT_TRUE(request.history.empty()) << "a pooling request has no conversation";
      EXPECT_TRUE(request.system.empty());
      if (api == dialect::Api::kRerank) {
        EXPECT_NEAR(CountWords(request.prompt), words, 1) << "the query is as long as a document";
      } else {
        EXPECT_TRUE(request.prompt.empty()) << "an embeddings request is its texts alone";
      }
    }
  }
}

TEST(RequestBuilderTest, PlannedPromptTokensCountEveryInput) {
  EXPECT_EQ(PlannedPromptTokens(PoolingRun(dialect::Api::kChat, 1), 40), 40u);
  EXPECT_EQ(PlannedPromptTokens(PoolingRun(dialect::Api::kEmbeddings, 8), 40), 8u * 40);
  EXPECT_EQ(PlannedPromptTokens(PoolingRun(dialect::Api::kRerank, 8), 40), 2u * 8 * 40);
}

}  // namespace
}  // namespace bakeoff::load
