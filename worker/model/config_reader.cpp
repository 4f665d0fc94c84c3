#include "worker/model/config_reader.h"

namespace flashq {

ConfigReader::ConfigReader(const nlohmann::json& object, std::string label)
    : object_(object), label_(std::move(label)) {
  if (!object_.is_object()) throw Error(ErrorCode::kBadConfig, label_ + ": expected a JSON object");
}

bool ConfigReader::has(const std::string& key) const {
  auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

const nlohmann::json& ConfigReader::raw(const std::string& key) const {
  if (!has(key)) fail(key, "is missing");
  return object_.at(key);
}

void ConfigReader::fail(const std::string& key, const std::string& problem) const {
  throw Error(ErrorCode::kBadConfig, label_ + ": '" + key + "' " + problem);
}

int64_t ConfigReader::positive_int(const std::string& key) const {
  const nlohmann::json& value = raw(key);
  if (!value.is_number_integer()) fail(key, "must be an integer, got " + value.dump());
  int64_t n = value.get<int64_t>();
  if (n <= 0) fail(key, "must be positive, got " + std::to_string(n));
  return n;
}

int64_t ConfigReader::positive_int(const std::string& key, int64_t fallback) const {
  return has(key) ? positive_int(key) : fallback;
}

double ConfigReader::positive_number(const std::string& key) const {
  const nlohmann::json& value = raw(key);
  if (!value.is_number()) fail(key, "must be a number, got " + value.dump());
  double x = value.get<double>();
  if (!(x > 0)) fail(key, "must be positive, got " + value.dump());
  return x;
}

double ConfigReader::positive_number(const std::string& key, double fallback) const {
  return has(key) ? positive_number(key) : fallback;
}

bool ConfigReader::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& value = raw(key);
  if (!value.is_boolean()) fail(key, "must be true or false, got " + value.dump());
  return value.get<bool>();
}

std::string ConfigReader::string(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& value = raw(key);
  if (!value.is_string()) fail(key, "must be a string, got " + value.dump());
  return value.get<std::string>();
}

void ConfigReader::refuse_if(bool condition, const std::string& key, const std::string& why) const {
  if (condition) throw Error(ErrorCode::kUnsupported, label_ + ": '" + key + "' " + why + " is not supported");
}

}  // namespace flashq
