// emulate/openai_errors.cc: the emulated engine's error answers: ApiError's usual values, the
// OpenAI error body, and an error after the 200 header in every wire's stream (contract in
// openai_api.h; the native wires' error bodies in native_api.cc).
#include "emulate/openai_api.h"

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "emulate/native_api.h"

namespace bakeoff::emulate {

namespace {

using nlohmann::json;

}  // namespace

ApiError BadRequest(std::string message, std::string param) {
  return ApiError{400, "BadRequestError", std::move(message), std::move(param)};
}

ApiError NotFound(std::string message, std::string param) {
  return ApiError{404, "NotFoundError", std::move(message), std::move(param)};
}

std::string RenderError(const ApiError& error) {
  json body = {{"error",
                {{"message", error.message},
                 {"type", error.type},
                 {"param", error.param.empty() ? json(nullptr) : json(error.param)},
                 {"code", error.status}}}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

void ResponseRenderer::AppendErrorEvent(std::string& out, const ApiError& error) {
  out += "data: ";
  out += RenderError(error);
  out += "\n\n";
}

void ResponseRenderer::AppendStreamError(std::string& out, const ApiError& error) const {
  switch (spec_.wire) {
    case Wire::kOpenAi:
    case Wire::kEmbeddings:  // never streamed
    case Wire::kRerank: return AppendErrorEvent(out, error);
    case Wire::kOllamaGenerate:
    case Wire::kOllamaChat:
      out += RenderErrorFor(spec_.wire, error);
      out += '\n';
      return;
    case Wire::kTgi:  // TGI writes `data:` without a space [7.2]
      out += "data:";
      out += RenderErrorFor(spec_.wire, error);
      out += "\n\n";
      return;
    case Wire::kTriton:
    case Wire::kKserve:
      out += "data: ";
      out += RenderErrorFor(spec_.wire, error);
      out += "\n\n";
      return;
  }
}

}  // namespace bakeoff::emulate
