#include "gateway/server/broker_answers.h"

#include <algorithm>

namespace flashq::gateway {
namespace {

int retry_after_seconds(std::int64_t retry_after_ms) {
  return static_cast<int>(std::max<std::int64_t>(1, (retry_after_ms + 999) / 1000));
}

}  // namespace

ApiError rejection_error(const protocol::Rejected& reply) {
  const std::string detail = reply.message ? ": " + *reply.message : "";
  if (reply.reason == "overloaded") {
    return ApiError(429, "rate_limit_error", "overloaded", "the queue is full; retry later" + detail, std::nullopt,
                    retry_after_seconds(reply.retry_after_ms));
  }
  if (reply.reason == "unknown_model") {
    return ApiError(404, "invalid_request_error", "model_not_found", "no worker serves this model" + detail, "model");
  }
  if (reply.reason == "bad_deadline") {
    return ApiError(400, "invalid_request_error", "invalid_value", "the deadline is over the broker's limit" + detail,
                    "deadline_ms");
  }
  if (reply.reason == "shutting_down" || reply.reason == "unavailable" || reply.retry_after_ms > 0) {
    return ApiError(503, "server_error", reply.reason,
                    "the broker cannot take jobs now (" + reply.reason + ")" + detail, std::nullopt,
                    retry_after_seconds(reply.retry_after_ms));
  }
  return ApiError(400, "invalid_request_error", reply.reason,
                  "the broker refused the job (" + reply.reason + ")" + detail);
}

ApiError broker_error(const protocol::ErrorReply& reply) {
  if (reply.code == "not_found") return ApiError(404, "invalid_request_error", "not_found", reply.message);
  if (reply.code == "unavailable") return ApiError(503, "server_error", "unavailable", reply.message, std::nullopt, 1);
  if (reply.code == "invalid_argument" || reply.code == "protocol") {
    return ApiError(400, "invalid_request_error", reply.code, reply.message);
  }
  return ApiError(500, "server_error", reply.code, reply.message);
}

}  // namespace flashq::gateway
