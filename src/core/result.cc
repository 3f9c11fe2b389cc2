#include "core/result.h"

namespace bakeoff {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidInput: return "invalid_input";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kProtocol: return "protocol";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace bakeoff
