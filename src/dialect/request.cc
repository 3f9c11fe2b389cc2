// dialect/request.cc: the routes bakeoff speaks and what each can do (request.h).
#include "dialect/request.h"

#include <array>

#include "core/check.h"

namespace bakeoff::dialect {
namespace {

struct ApiInfo {
  Api api;
  const char* name;
};

constexpr std::array<ApiInfo, 9> kApis = {{
    {Api::kChat, "chat"},
    {Api::kCompletions, "completions"},
    {Api::kOllamaGenerate, "ollama-generate"},
    {Api::kOllamaChat, "ollama-chat"},
    {Api::kTgiGenerate, "tgi-generate"},
    {Api::kTritonGenerate, "triton-generate"},
    {Api::kKserveInfer, "kserve-infer"},
    {Api::kEmbeddings, "embeddings"},
    {Api::kRerank, "rerank"},
}};

// A path segment with everything but RFC 3986's unreserved characters percent-encoded.
std::string PathSegment(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

}  // namespace

const char* ApiName(Api api) {
  for (const ApiInfo& info : kApis) {
    if (info.api == api) return info.name;
  }
  return "?";
}

std::optional<Api> ParseApiName(std::string_view name) {
  for (const ApiInfo& info : kApis) {
    if (name == info.name) return info.api;
  }
  return std::nullopt;
}

std::string ApiNames() {
  std::string out;
  for (const ApiInfo& info : kApis) {
    if (!out.empty()) out += ", ";
    out += info.name;
  }
  return out;
}

bool IsOpenAiApi(Api api) { return api == Api::kChat || api == Api::kCompletions; }

bool ApiGenerates(Api api) { return api != Api::kEmbeddings && api != Api::kRerank; }

bool ApiTakesMessages(Api api) { return api == Api::kChat || api == Api::kOllamaChat; }

bool ApiStreams(Api api) { return api != Api::kKserveInfer && ApiGenerates(api); }

Framing StreamFraming(Api api) {
  return api == Api::kOllamaGenerate || api == Api::kOllamaChat ? Framing::kNdjson : Framing::kSse;
}

bool StreamHasEndMarker(Api api) { return api != Api::kTritonGenerate && ApiStreams(api); }

bool ApiCanForceLength(Api api) { return IsOpenAiApi(api); }

bool ApiReportsPromptTokens(Api api) {
  return IsOpenAiApi(api) || api == Api::kOllamaGenerate || api == Api::kOllamaChat || !ApiGenerates(api);
}

bool ApiReportsOutputTokens(Api api) { return ApiReportsPromptTokens(api) || api == Api::kTgiGenerate; }

std::string RequestPath(Api api, std::string_view model, bool stream) {
  switch (api) {
    case Api::kCompletions:
    case Api::kChat: return ApiPath(api);
    case Api::kOllamaGenerate: return "/api/generate";
    case Api::kOllamaChat: return "/api/chat";
    case Api::kTgiGenerate: return stream ? "/generate_stream" : "/generate";
    case Api::kTritonGenerate:
      return "/v2/models/" + PathSegment(model) + (stream ? "/generate_stream" : "/generate");
    case Api::kKserveInfer: return "/v2/models/" + PathSegment(model) + "/infer";
    case Api::kEmbeddings: return "/v1/embeddings";
    case Api::kRerank: return "/v1/rerank";
  }
  return ApiPath(Api::kChat);
}

const char* ApiPath(Api api) {
  BAKEOFF_CHECK(IsOpenAiApi(api)) << ApiName(api) << " is not an OpenAI route";
  return api == Api::kCompletions ? "/v1/completions" : "/v1/chat/completions";
}

}  // namespace bakeoff::dialect
