#include "worker/process/host_memory.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

namespace flashq {
namespace {

// A decimal number after optional blanks; nothing for anything else.
std::optional<int64_t> leading_number(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return std::nullopt;
  text.remove_prefix(first);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || value < 0) return std::nullopt;
  return value;
}

std::optional<std::string> read_text(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// cgroup v1 writes "no limit" as the largest page-aligned int64; anything above this is that.
constexpr int64_t kNoLimitAbove = int64_t{1} << 62;

}  // namespace

std::optional<int64_t> meminfo_available_bytes(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  size_t at = meminfo.find(kKey);
  while (at != std::string_view::npos && at != 0 && meminfo[at - 1] != '\n') at = meminfo.find(kKey, at + 1);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = meminfo.substr(at + kKey.size());
  line = line.substr(0, line.find('\n'));
  const std::optional<int64_t> kib = leading_number(line);
  if (!kib || line.find("kB") == std::string_view::npos) return std::nullopt;
  return *kib * 1024;
}

std::optional<int64_t> cgroup_headroom_bytes(std::string_view limit, std::string_view usage) {
  const std::optional<int64_t> cap = leading_number(limit);
  const std::optional<int64_t> used = leading_number(usage);
  if (!cap || !used || *cap >= kNoLimitAbove) return std::nullopt;  // "max" is no number
  return std::max<int64_t>(0, *cap - *used);
}

std::optional<int64_t> host_available_bytes() {
  std::optional<int64_t> available;
  if (const std::optional<std::string> meminfo = read_text("/proc/meminfo")) {
    available = meminfo_available_bytes(*meminfo);
  }
  for (const auto& [limit_path, usage_path] :
       {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const std::optional<std::string> limit = read_text(limit_path);
    const std::optional<std::string> usage = read_text(usage_path);
    if (!limit || !usage) continue;
    if (const std::optional<int64_t> headroom = cgroup_headroom_bytes(*limit, *usage)) {
      available = available ? std::min(*available, *headroom) : *headroom;
    }
    break;  // the first hierarchy mounted is the one in force
  }
  return available;
}

}  // namespace flashq
