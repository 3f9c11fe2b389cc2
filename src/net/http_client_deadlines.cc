// net/http_client_deadlines.cc
//
// Owns: a request's deadlines (connect, first byte, idle while writing or reading the body,
// total, and cancel_at): which one is next in each phase, the one steady_timer per connection
// armed at it and moved only when a deadline becomes earlier (re-evaluated when it fires), the
// translation of an injected clock's instant into a real wait, and what each timeout says.
// Does not own: the deadlines' values (net/http_client.h Deadlines), the progress instants that
// move them (the other jobs). Shared declarations: net/http_client_internal.h.
#include "net/http_client_internal.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace bakeoff::net {
namespace http_internal {

std::string Millis(Nanos d) {
  char text[48];
  std::snprintf(text, sizeof text, "%.1f ms", ToMillis(d));
  return text;
}

Connection::Deadline Connection::NextDeadline() const {
  const Deadlines& limits = client_->options.deadlines;
  Deadline next{total_deadline_, TransportEnd::kTimeoutTotal};
  auto consider = [&next](MonoTime at, TransportEnd kind) {
    if (at < next.at) next = Deadline{at, kind};
  };
  switch (phase_) {
    case Phase::kConnecting:
      consider(AddSaturating(attempt_start_, limits.connect), TransportEnd::kTimeoutConnect);
      break;
    case Phase::kWriting:  // a server that stops reading our request body
      consider(AddSaturating(last_progress_, limits.idle), TransportEnd::kTimeoutIdle);
      break;
    case Phase::kAwaitingHeaders:
      consider(AddSaturating(written_at_, limits.first_byte), TransportEnd::kTimeoutFirstByte);
      break;
    case Phase::kReadingBody:
      consider(AddSaturating(last_progress_, limits.idle), TransportEnd::kTimeoutIdle);
      break;
    case Phase::kIdle:
      break;
  }
  if (cancel_at_ && *cancel_at_ <= next.at) next = Deadline{*cancel_at_, TransportEnd::kCancelled};
  return next;
}

void Connection::ArmTimer() {
  if (!active_) return;
  const Deadline next = NextDeadline();
  if (timer_armed_ && timer_at_ <= next.at) return;  // fires earlier and re-evaluates then
  timer_armed_ = true;
  timer_at_ = next.at;
  if (next.at == MonoTime::max()) {
    timer_.expires_at(MonoTime::max());
  } else if (client_->clock_is_steady) {
    timer_.expires_at(next.at);
  } else {
    // An injected clock: translate its instant into a real steady-clock wait.
    timer_.expires_after(std::max(Nanos(0), next.at - client_->clock.Now()));
  }
  timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec) return;  // cancelled or moved
    self->timer_armed_ = false;
    self->OnTimer();
  });
}

void Connection::OnTimer() {
  if (!active_ || client_ == nullptr) return;
  const Deadline next = NextDeadline();
  if (next.at > client_->clock.Now()) {
    ArmTimer();  // progress moved the deadline since the timer was armed
    return;
  }
  Finish(next.kind, DeadlineDetail(next.kind), false);
}

std::string Connection::DeadlineDetail(TransportEnd kind) const {
  const Deadlines& limits = client_->options.deadlines;
  switch (kind) {
    case TransportEnd::kTimeoutConnect:
      return "not connected to " + client_->Where() + " within the connect deadline of " +
             Millis(limits.connect);
    case TransportEnd::kTimeoutFirstByte:
      return "no complete response header within " + Millis(limits.first_byte) +
             " of writing the request";
    case TransportEnd::kTimeoutIdle:
      return std::string(phase_ == Phase::kWriting ? "the server stopped reading the request"
                                                   : "no response bytes") +
             " for the idle deadline of " + Millis(limits.idle);
    case TransportEnd::kTimeoutTotal:
      return "the request exceeded its total deadline of " + Millis(limits.total);
    case TransportEnd::kCancelled:
      return "cancelled at the requested instant";
    default:
      return TransportEndName(kind);
  }
}

}  // namespace http_internal
}  // namespace bakeoff::net
