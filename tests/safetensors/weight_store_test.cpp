// A model directory's weights: model.safetensors, or shards listed by
// model.safetensors.index.json. Every listed shard must exist inside the directory and hold what
// the index says; no tensor may be in two files; lookups name the tensor, file and directory.

#include "tests/safetensors/safetensors_test_util.h"

namespace flashq::testing {
namespace {

class WeightStoreTest : public SafetensorsTest {
 protected:
  // Writes `file` holding F32 tensors of the given names, each [2] filled with its first letter.
  void write_shard(const std::string& file, std::initializer_list<std::string> names) {
    SafetensorsWriter writer;
    for (const std::string& name : names) writer.add(name, DType::kF32, {2}, std::string(8, name[0]));
    writer.write(dir_ / file);
  }

  void write_index(const std::string& weight_map_json) {
    write_file(dir_ / "model.safetensors.index.json",
               R"({"metadata": {"total_size": 32}, "weight_map": )" + weight_map_json + "}");
  }

  std::string index_path() const { return (dir_ / "model.safetensors.index.json").string(); }

  ::testing::AssertionResult store_fails(ErrorCode code, std::initializer_list<std::string> parts) {
    return fails_with([&] { WeightStore::open(dir_); }, code, parts);
  }
};

TEST_F(WeightStoreTest, OpensSingleFileModel) {
  write_shard("model.safetensors", {"embed", "norm"});
  WeightStore store = WeightStore::open(dir_);
  EXPECT_EQ(store.names(), (std::vector<std::string>{"embed", "norm"}));
  EXPECT_TRUE(store.contains("embed"));
  EXPECT_EQ(tensor_bytes(store.get("norm")), std::string(8, 'n'));
  EXPECT_EQ(store.dir(), dir_);
}

TEST_F(WeightStoreTest, OpensShardedModelThroughIndex) {
  write_shard("model-00001-of-00002.safetensors", {"a", "b"});
  write_shard("model-00002-of-00002.safetensors", {"c", "d"});
  write_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",)"
              R"( "c": "model-00002-of-00002.safetensors", "d": "model-00002-of-00002.safetensors"})");

  WeightStore store = WeightStore::open(dir_);
  EXPECT_EQ(store.names(), (std::vector<std::string>{"a", "b", "c", "d"}));
  for (const std::string& name : store.names()) {
    EXPECT_EQ(tensor_bytes(store.get(name, {2})), std::string(8, name[0])) << name;
  }
  // Each shard is mapped once: tensors of one shard lie side by side in one mapping.
  EXPECT_EQ(static_cast<char*>(store.get("b").raw()) - static_cast<char*>(store.get("a").raw()), 8);
  EXPECT_EQ(static_cast<char*>(store.get("d").raw()) - static_cast<char*>(store.get("c").raw()), 8);
}

TEST_F(WeightStoreTest, PrefersIndexWhenBothKindsExist) {
  write_shard("model.safetensors", {"stale"});
  write_shard("shard.safetensors", {"fresh"});
  write_index(R"({"fresh": "shard.safetensors"})");
  WeightStore store = WeightStore::open(dir_);
  EXPECT_TRUE(store.contains("fresh"));
  EXPECT_FALSE(store.contains("stale"));
}

TEST_F(WeightStoreTest, ServesShardTensorsTheIndexOmits) {
  write_shard("shard.safetensors", {"listed", "unlisted"});
  write_index(R"({"listed": "shard.safetensors"})");
  EXPECT_TRUE(WeightStore::open(dir_).contains("unlisted"));
}

TEST_F(WeightStoreTest, AcceptsShardInSubdirectory) {
  std::filesystem::create_directory(dir_ / "shards");
  write_shard("shards/one.safetensors", {"w"});
  write_index(R"({"w": "shards/one.safetensors"})");
  EXPECT_TRUE(WeightStore::open(dir_).contains("w"));
}

/* Lookups. */

TEST_F(WeightStoreTest, GetUnknownTensorIsNotFound) {
  write_shard("model.safetensors", {"w"});
  WeightStore store = WeightStore::open(dir_);
  EXPECT_FALSE(store.contains("x"));
  EXPECT_TRUE(fails_with([&] { store.get("x"); }, ErrorCode::kNotFound, {"tensor 'x' not found in " + dir_.string()}));
}

TEST_F(WeightStoreTest, GetWithWrongShapeIsBadCheckpoint) {
  SafetensorsWriter writer;
  writer.add("w", DType::kBF16, {2, 3}, std::string(12, '\0'));
  writer.write(dir_ / "model.safetensors");
  WeightStore store = WeightStore::open(dir_);
  EXPECT_TRUE(fails_with([&] { store.get("w", {3, 2}); }, ErrorCode::kBadCheckpoint,
                         {"tensor 'w' in " + (dir_ / "model.safetensors").string() +
                          " has shape [2, 3], expected [3, 2]"}));
}

TEST_F(WeightStoreTest, GetWithExpectedShapeReturnsTheTensor) {
  write_shard("model.safetensors", {"w"});
  Tensor tensor = WeightStore::open(dir_).get("w", {2});
  EXPECT_EQ(tensor.shape(), (Shape{2}));
  EXPECT_EQ(tensor_bytes(tensor), std::string(8, 'w')) << "the tensor outlives the store";
}

/* Directories without weights. */

TEST_F(WeightStoreTest, RejectsDirectoryWithoutWeights) {
  EXPECT_TRUE(store_fails(ErrorCode::kNotFound, {dir_.string(), "no weights", "model.safetensors"}));
}

TEST_F(WeightStoreTest, RejectsMissingDirectory) {
  std::filesystem::path missing = dir_ / "absent";
  EXPECT_TRUE(fails_with([&] { WeightStore::open(missing); }, ErrorCode::kNotFound,
                         {missing.string(), "no such model directory"}));
}

TEST_F(WeightStoreTest, SingleFileErrorsNameTheFile) {
  write_file(dir_ / "model.safetensors", make_image("[]", ""));
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint, {(dir_ / "model.safetensors").string(), "not a JSON object"}));
}

/* A lying or broken index. */

TEST_F(WeightStoreTest, RejectsMissingShard) {
  write_shard("one.safetensors", {"a"});
  write_index(R"({"a": "one.safetensors", "b": "two.safetensors"})");
  EXPECT_TRUE(store_fails(ErrorCode::kNotFound,
                          {(dir_ / "two.safetensors").string(), "no such file", index_path(), "tensor 'b'"}));
}

TEST_F(WeightStoreTest, RejectsTensorMissingFromItsShard) {
  write_shard("one.safetensors", {"a"});
  write_index(R"({"a": "one.safetensors", "b": "one.safetensors"})");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint,
                          {(dir_ / "one.safetensors").string(), "tensor 'b'", "missing", index_path()}));
}

TEST_F(WeightStoreTest, RejectsShardPathEscapingDirectory) {
  // The shard exists beside the model directory: refused all the same.
  std::string escaping = "../" + dir_.filename().string() + "-escaped.safetensors";
  write_shard(escaping, {"a"});
  write_index(R"({"a": ")" + escaping + R"("})");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint,
                          {index_path(), "tensor 'a'", "'" + escaping + "'", "not a file inside"}));
  std::filesystem::remove(dir_ / escaping);
}

TEST_F(WeightStoreTest, RejectsShardPathEscapingThroughSubdirectory) {
  write_index(R"({"a": "sub/../../x.safetensors"})");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint, {index_path(), "'sub/../../x.safetensors'", "not a file inside"}));
}

TEST_F(WeightStoreTest, RejectsAbsoluteShardPath) {
  write_index(R"({"a": "/etc/passwd"})");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint, {index_path(), "'/etc/passwd'", "not a file inside"}));
}

TEST_F(WeightStoreTest, RejectsShardNameWithNulByte) {
  write_shard("one.safetensors", {"a"});
  write_index(R"({"a": "one.safetensors\u0000../../x"})");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint, {index_path(), "tensor 'a'", "not a file inside"}));
}

TEST_F(WeightStoreTest, RejectsSameTensorInTwoShards) {
  write_shard("one.safetensors", {"a", "b"});
  write_shard("two.safetensors", {"b"});
  write_index(R"({"a": "one.safetensors", "b": "two.safetensors"})");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint,
                          {"tensor 'b'", "also present in", (dir_ / "one.safetensors").string(),
                           (dir_ / "two.safetensors").string()}));
}

TEST_F(WeightStoreTest, RejectsTensorListedTwiceInIndex) {
  write_shard("one.safetensors", {"a"});
  write_shard("two.safetensors", {"b"});
  write_index(R"({"a": "one.safetensors", "a": "two.safetensors"})");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint, {index_path(), "duplicate key 'a'"}));
}

TEST_F(WeightStoreTest, RejectsIndexThatIsNotJson) {
  write_file(dir_ / "model.safetensors.index.json", "{\"weight_map\": ");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint, {index_path(), "index is not valid JSON"}));
}

TEST_F(WeightStoreTest, RejectsIndexWithoutWeightMap) {
  write_file(dir_ / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint, {index_path(), "no weight_map object"}));
}

TEST_F(WeightStoreTest, RejectsWeightMapValueThatIsNotAString) {
  write_index(R"({"a": 1})");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint, {index_path(), "tensor 'a'", "is 1, not a file name"}));
}

TEST_F(WeightStoreTest, RejectsEmptyWeightMap) {
  write_index("{}");
  EXPECT_TRUE(store_fails(ErrorCode::kBadCheckpoint, {index_path(), "lists no tensors"}));
}

TEST_F(WeightStoreTest, ShardErrorsNameTheShard) {
  write_file(dir_ / "one.safetensors", make_image(R"({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})",
                                                  std::string(8, '\0')));
  write_index(R"({"a": "one.safetensors"})");
  EXPECT_TRUE(store_fails(ErrorCode::kUnsupported, {(dir_ / "one.safetensors").string(), "tensor 'a'", "F64"}));
}

}  // namespace
}  // namespace flashq::testing
