#include "shared/curve/curve_allow_list.h"

#include <sstream>

#include "shared/curve/curve_keys.h"
#include "shared/error.h"
#include "shared/json_file.h"

namespace flashq {

std::set<std::string> load_curve_allow_list(const std::filesystem::path& path) {
  std::istringstream lines(read_text_file(path));
  std::set<std::string> keys;
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::istringstream words(line);
    std::string key, rest;
    // No Z85 key starts with '#': its first 5-character group would exceed 2^32.
    if (!(words >> key) || key[0] == '#') continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    if (words >> rest && rest[0] != '#') {
      throw Error(ErrorCode::kBadConfig, where + ": expected one public key, optionally followed by a '#' comment");
    }
    try {
      keys.insert(parse_curve_key(key, where));
    } catch (const Error& e) {
      throw Error(ErrorCode::kBadConfig, e.what());
    }
  }
  if (keys.empty()) throw Error(ErrorCode::kBadConfig, path.string() + ": no CURVE public keys in the allow-list");
  return keys;
}

}  // namespace flashq
