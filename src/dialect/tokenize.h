// dialect/tokenize.h
//
// Owns: the token-counting routes of the engines bakeoff knows, one dialect each: where the route
// is, the request body, and how to read a count from the answer. Engines disagree on all three
// (../shared/reference/engine-interfaces.md): vLLM and SGLang take {"model", "prompt"} on
// /tokenize and answer {"count", "tokens"}; llama.cpp takes {"content"} and answers {"tokens"};
// TGI takes {"inputs"} and answers an array of token objects; TensorRT-LLM's serve has
// /_internal/tokenize with {"prompt"}; LMDeploy has /v1/encode with {"input"} and answers
// {"input_ids", "length"}. Ollama and Triton have none.
// Does not own: deciding which dialect a server speaks (target/prompt_calibration.h tries them).
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace bakeoff::dialect {

enum class TokenizeDialect { kVllm, kLlamaCpp, kTgi, kTrtLlm, kLmdeploy };

// In the order a server of unknown kind is tried: a wrong guess answers an error or no tokens.
inline constexpr std::array<TokenizeDialect, 5> kTokenizeDialects = {
    TokenizeDialect::kVllm, TokenizeDialect::kLlamaCpp, TokenizeDialect::kTgi,
    TokenizeDialect::kTrtLlm, TokenizeDialect::kLmdeploy};

// "vllm" (also SGLang and the emulated engine), "llama.cpp", "tgi", "trtllm", "lmdeploy".
const char* TokenizeDialectName(TokenizeDialect dialect);
// The route, e.g. "/tokenize".
const char* TokenizePath(TokenizeDialect dialect);
// The request body that asks for the tokens of `text`. Whether the count includes special tokens
// (vLLM's BOS) differs by engine; calibration measures what usage adds beyond it, so it need not.
std::string EncodeTokenizeRequest(TokenizeDialect dialect, std::string_view model,
                                  std::string_view text);
// The number of tokens the answer reports. kProtocol when the body is not this dialect's answer.
Result<std::uint64_t> DecodeTokenizeCount(TokenizeDialect dialect, std::string_view body);

}  // namespace bakeoff::dialect
