#include "gateway/openai/api_error.h"

#include <nlohmann/json.hpp>

namespace flashq::gateway {

std::string api_error_body(const ApiError& error) {
  nlohmann::ordered_json inner = {{"message", error.what()}, {"type", error.type()}, {"param", nullptr},
                                  {"code", error.code()}};
  if (error.param()) inner["param"] = *error.param();
  return nlohmann::ordered_json{{"error", inner}}.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace flashq::gateway
