// What the host can give a CPU worker's KV cache pool: MemAvailable, and a container's headroom
// under its memory limit, read from the kernel's own texts.
#include "worker/process/host_memory.h"

#include <gtest/gtest.h>

namespace flashq::testing {
namespace {

TEST(HostMemory, ReadsMemAvailableInBytes) {
  const char* meminfo =
      "MemTotal:       24588276 kB\n"
      "MemFree:         1212140 kB\n"
      "MemAvailable:   20000000 kB\n"
      "Buffers:          282012 kB\n";
  EXPECT_EQ(meminfo_available_bytes(meminfo), int64_t{20000000} * 1024);
}

TEST(HostMemory, MissingOrMalformedMemAvailableIsNothing) {
  EXPECT_EQ(meminfo_available_bytes("MemTotal: 100 kB\nMemFree: 50 kB\n"), std::nullopt);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: lots\n"), std::nullopt);
  EXPECT_EQ(meminfo_available_bytes("XMemAvailable: 5 kB\n"), std::nullopt) << "only a line's own key";
}

TEST(HostMemory, ACgroupLimitLeavesItsHeadroom) {
  EXPECT_EQ(cgroup_headroom_bytes("4294967296\n", "1073741824\n"), int64_t{3} << 30);
  EXPECT_EQ(cgroup_headroom_bytes("1000\n", "2000\n"), 0) << "over the limit: nothing to spare";
}

TEST(HostMemory, NoCgroupLimitIsNothing) {
  EXPECT_EQ(cgroup_headroom_bytes("max\n", "1073741824\n"), std::nullopt) << "cgroup v2";
  EXPECT_EQ(cgroup_headroom_bytes("9223372036854771712\n", "3814342656\n"), std::nullopt) << "cgroup v1";
}

TEST(HostMemory, ThisHostHasSomeMemoryAvailable) {
  const std::optional<int64_t> available = host_available_bytes();
  ASSERT_TRUE(available.has_value());
  EXPECT_GT(*available, 0);
}

}  // namespace
}  // namespace flashq::testing
