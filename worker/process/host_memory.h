// What the host can give a worker's KV cache pool on the CPU (docs/operations.md, "Capacity and
// sizing"): the kernel's estimate of memory available without swapping, and, inside a container
// with a memory limit, what is left under that limit, whichever is smaller.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace flashq {

// MemAvailable of /proc/meminfo's text, in bytes; nothing when it is missing or malformed.
std::optional<int64_t> meminfo_available_bytes(std::string_view meminfo);

// A cgroup's memory limit less its usage, from the texts of its limit file (cgroup v2
// memory.max, v1 memory.limit_in_bytes) and usage file (memory.current, memory.usage_in_bytes);
// nothing when there is no limit ("max", or v1's near-2^63 "unlimited") or a text is malformed.
std::optional<int64_t> cgroup_headroom_bytes(std::string_view limit, std::string_view usage);

// The smaller of /proc/meminfo's MemAvailable and the headroom of the memory cgroup mounted at
// /sys/fs/cgroup (v2, else v1: a container sees its own there); nothing when neither is readable.
std::optional<int64_t> host_available_bytes();

}  // namespace flashq
