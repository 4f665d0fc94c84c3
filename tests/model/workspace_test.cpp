// Workspace: slots that grow and keep their address while they need not grow (what a recorded
// pass relies on), and several int32 vectors uploaded in one copy.
#include "worker/model/workspace.h"

#include <gtest/gtest.h>

#include <vector>

namespace flashq {
namespace {

std::vector<int32_t> to_host(Backend& backend, const Tensor& t) {
  std::vector<int32_t> values(static_cast<size_t>(t.numel()));
  if (!values.empty()) backend.copy_to_host(t, values.data());
  return values;
}

TEST(Workspace, SlotsKeepTheirAddressUntilTheyGrow) {
  auto backend = make_cpu_backend();
  Workspace workspace(*backend);
  const Tensor first = workspace.get("h", DType::kF32, {4, 8});
  const uint64_t generation = workspace.generation();
  EXPECT_EQ(workspace.get("h", DType::kF32, {2, 8}).raw(), first.raw());
  EXPECT_EQ(workspace.generation(), generation);
  workspace.get("h", DType::kF32, {5, 8});
  EXPECT_GT(workspace.generation(), generation);
}

TEST(Workspace, UploadsSeveralIntVectorsAsViewsOfOneSlot) {
  auto backend = make_cpu_backend();
  Workspace workspace(*backend);
  const std::vector<int32_t> ids = {7, 8, 9}, positions = {0, 1, 2}, none;
  const std::vector<Tensor> views = workspace.upload_int32s("ints", {ids, positions, none});
  ASSERT_EQ(views.size(), 3u);
  EXPECT_EQ(to_host(*backend, views[0]), ids);
  EXPECT_EQ(to_host(*backend, views[1]), positions);
  EXPECT_EQ(views[2].numel(), 0);
  EXPECT_EQ(views[1].data<int32_t>(), views[0].data<int32_t>() + 3) << "one slot, one copy";

  const uint64_t generation = workspace.generation();
  const std::vector<int32_t> fewer = {1, 2};
  const std::vector<Tensor> again = workspace.upload_int32s("ints", {fewer, fewer});
  EXPECT_EQ(again[0].raw(), views[0].raw());
  EXPECT_EQ(to_host(*backend, again[1]), fewer);
  EXPECT_EQ(workspace.generation(), generation) << "fewer values fit the slot as it is";
}

}  // namespace
}  // namespace flashq
