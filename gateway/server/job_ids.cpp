#include "gateway/server/job_ids.h"

#include <chrono>
#include <random>

namespace flashq::gateway {

std::string new_job_id(std::string_view prefix) {
  thread_local std::mt19937_64 random(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  for (int word = 0; word < 2; ++word) {
    std::uint64_t bits = random();
    for (int i = 0; i < 12; ++i, bits >>= 4) id += kHex[bits & 0xf];
  }
  return id;
}

std::int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace flashq::gateway
