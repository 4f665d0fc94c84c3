// The broker's refusals as the OpenAI error a client expects (docs/gateway.md, "Errors"). A
// status that OpenAI's clients retry (408, 409, 429, 5xx) is given only to what may succeed
// later: an overloaded queue (429) and a broker or worker that is not there (503), each with
// Retry-After.
#pragma once

#include "gateway/openai/api_error.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::gateway {

// REJECTED: overloaded -> 429, shutting_down and unavailable -> 503, unknown_model -> 404,
// bad_deadline -> 400; an unknown reason by its retry hint (503 with one, 400 without).
ApiError rejection_error(const protocol::Rejected& reply);

// ERROR about a job (or "unavailable": no broker answered): not_found -> 404, unavailable ->
// 503, invalid_argument and protocol -> 400, anything else -> 500.
ApiError broker_error(const protocol::ErrorReply& reply);

}  // namespace flashq::gateway
