// libFuzzer target for the Redis intake decoder: a job from the flat field pairs of an entry in
// `flashq:jobs` (broker/redis/redis_job_fields.h). An input is lines taken in pairs, name then
// value (a value with a newline cannot be written; none of the fields needs one); a later pair
// with the same name wins, as in a map. A refusal is a kProtocol flashq::Error; anything else
// escaping (another exception, a sanitizer report) crashes.
//
// A job that decodes must round-trip through job_to_fields: the fields the broker would write
// for it decode to a job it writes the same (a fixed point: invalid UTF-8 becomes U+FFFD once).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "broker/redis/redis_job_fields.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  while (!input.empty()) {
    const size_t end = input.find('\n');
    lines.emplace_back(input.substr(0, end));
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + 1);
  }
  flashq::RedisFields fields;
  for (size_t i = 0; i + 1 < lines.size(); i += 2) fields[lines[i]] = lines[i + 1];
  try {
    const std::vector<std::string> written = flashq::job_to_fields(flashq::job_from_fields(fields));
    flashq::RedisFields again;
    for (size_t i = 0; i + 1 < written.size(); i += 2) again[written[i]] = written[i + 1];
    flashq::fuzz::require(flashq::job_to_fields(flashq::job_from_fields(again)) == written,
                          "the fields written for a decoded job decode to a job written the same");
  } catch (const flashq::Error& e) {
    flashq::fuzz::require_code(e, flashq::ErrorCode::kProtocol);
  }
  return 0;
}
