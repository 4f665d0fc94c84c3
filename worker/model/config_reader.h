// Typed access to the keys of a JSON config object, with errors that name the file and the key.
// Shared by the target and drafter config parsers.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "shared/error.h"

namespace flashq {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& object, std::string label);

  bool has(const std::string& key) const;  // present and not null
  const nlohmann::json& raw(const std::string& key) const;

  int64_t positive_int(const std::string& key) const;
  int64_t positive_int(const std::string& key, int64_t fallback) const;
  double positive_number(const std::string& key) const;
  double positive_number(const std::string& key, double fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;

  // kUnsupported naming `key` (and why) when `condition` holds.
  void refuse_if(bool condition, const std::string& key, const std::string& why) const;
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;

 private:
  nlohmann::json object_;  // a copy: configs are small, and a reference could dangle
  std::string label_;
};

}  // namespace flashq
