// dialect/pooling.h
//
// Owns: the pooling routes, for embedding and reranking loads: OpenAI's /v1/embeddings
// ({"model", "input": [texts]} -> {"data": [{"embedding": [...], "index"}], "usage"}) and the rerank
// route vLLM, TEI and Infinity share ({"model", "query", "documents": [texts]} -> {"results":
// [{"index", "relevance_score"}], "usage"}). Answers are whole; the figures are the number of
// vectors or scored documents and the prompt tokens the server counted.
// Does not own: generation routes (dialect/openai.h, dialect/native.h).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "dialect/request.h"

namespace bakeoff::dialect {

// REQUIRES: !ApiGenerates(request.api). Embeddings send `inputs`; rerank sends `prompt` as the
// query and `inputs` as the documents.
std::string EncodePoolingRequestBody(const GenerationRequest& request);

// The answer's count of vectors (embeddings) or results (rerank) and its usage (prompt tokens;
// completion 0). Errors (kProtocol): not JSON, an error body, `data` / `results` missing or not
// an array, an entry that is not an object, a vector that is not an array of numbers, a score that
// is not a number.
Result<CompletionResponse> DecodePoolingResponse(Api api, std::string_view body);

}  // namespace bakeoff::dialect
