// An error answered as OpenAI's error object: {"error": {"message", "type", "param", "code"}}
// with the HTTP status a client expects (docs/gateway.md, "Errors"). OpenAI's clients retry 408,
// 409, 429 and 5xx, so a request that cannot succeed must never get one of those.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

namespace flashq::gateway {

class ApiError : public std::runtime_error {
 public:
  // `type` as OpenAI names them: invalid_request_error (400, 404, 413), authentication_error
  // (401), rate_limit_error (429), server_error (5xx). `code` a stable lower_snake name
  // (e.g. unsupported_parameter, model_not_found, overloaded); `param` the request field at fault.
  ApiError(int status, std::string type, std::string code, const std::string& message,
           std::optional<std::string> param = std::nullopt, int retry_after_s = 0)
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        code_(std::move(code)),
        param_(std::move(param)),
        retry_after_s_(retry_after_s) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }
  const std::optional<std::string>& param() const { return param_; }
  int retry_after_s() const { return retry_after_s_; }  // 0: no Retry-After header

 private:
  int status_;
  std::string type_;
  std::string code_;
  std::optional<std::string> param_;
  int retry_after_s_;
};

// 400 invalid_request_error: a malformed body or a field with a bad value.
inline ApiError invalid_request(const std::string& message, std::optional<std::string> param = std::nullopt,
                                std::string code = "invalid_value") {
  return ApiError(400, "invalid_request_error", std::move(code), message, std::move(param));
}

// 400 invalid_request_error, code unsupported_parameter: a real OpenAI field flashq does not
// implement, named rather than ignored.
inline ApiError unsupported_parameter(const std::string& param, const std::string& why) {
  return ApiError(400, "invalid_request_error", "unsupported_parameter",
                  "'" + param + "' is not supported: " + why, param);
}

// The JSON text of the error object.
std::string api_error_body(const ApiError& error);

}  // namespace flashq::gateway
