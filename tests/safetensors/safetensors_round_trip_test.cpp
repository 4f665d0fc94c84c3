// What SafetensorsWriter writes, SafetensorsFile reads back unchanged, in the layout the format
// asks for; files from other writers (unpadded headers, gaps between tensors) read too; tensors
// are zero-copy views that keep their file mapped.

#include <cmath>

#include "tests/safetensors/safetensors_test_util.h"

namespace flashq::testing {
namespace {

using RoundTripTest = SafetensorsTest;

std::string f16_bytes(const std::vector<float>& values) {
  std::vector<uint16_t> bits;
  for (float value : values) bits.push_back(f32_to_f16(value));
  return to_bytes(bits);
}

std::string bf16_bytes(const std::vector<float>& values) {
  std::vector<uint16_t> bits;
  for (float value : values) bits.push_back(f32_to_bf16(value));
  return to_bytes(bits);
}

TEST_F(RoundTripTest, RoundTripsEveryDtype) {
  struct Case {
    std::string name;
    DType dtype;
    Shape shape;
    std::string bytes;
  };
  std::vector<Case> cases = {
      {"f32", DType::kF32, {2, 3}, to_bytes(std::vector<float>{0.5f, -1.0f, 3.25f, 1e-20f, -0.0f, INFINITY})},
      {"f16", DType::kF16, {4}, f16_bytes({1.0f, -2.5f, 65504.0f, 0.000061035f})},
      {"bf16", DType::kBF16, {2, 2}, bf16_bytes({1.0f, -3.0e38f, 0.1f, -7.0f})},
      {"i32", DType::kI32, {3}, to_bytes(std::vector<int32_t>{-1, 0, 2147483647})},
      {"scalar", DType::kF32, {}, to_bytes(std::vector<float>{42.0f})},
      {"empty", DType::kBF16, {0, 4}, ""},
  };
  SafetensorsWriter writer;
  for (const Case& c : cases) writer.add(c.name, c.dtype, c.shape, c.bytes);
  writer.set_metadata("format", "pt");
  writer.write(dir_ / "all.safetensors");
  EXPECT_EQ(writer.tensor_count(), cases.size());

  std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(dir_ / "all.safetensors");
  EXPECT_EQ(file->header().tensors.size(), cases.size());
  EXPECT_EQ(file->header().metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  for (const Case& c : cases) {
    Tensor tensor = file->tensor(c.name);
    EXPECT_EQ(tensor.dtype(), c.dtype) << c.name;
    EXPECT_EQ(tensor.shape(), c.shape) << c.name;
    EXPECT_EQ(tensor.device(), Device::kCpu) << c.name;
    EXPECT_EQ(tensor_bytes(tensor), c.bytes) << c.name;
  }
}

TEST_F(RoundTripTest, WritesPaddedHeaderAndPacksDataInNameOrder) {
  SafetensorsWriter writer;
  writer.add("zeta", DType::kF16, {3}, std::string(6, 'z'));
  writer.add("alpha", DType::kF32, {1}, std::string(4, 'a'));
  writer.write(dir_ / "layout.safetensors");

  std::string image = read_file(dir_ / "layout.safetensors");
  SafetensorsLayout layout = split_safetensors_file(image, "layout");
  EXPECT_EQ(layout.data_start % 8, 0u) << "the data section starts 8-byte aligned";
  EXPECT_EQ(layout.header_json.size() % 8, 0u) << "header padded to a multiple of 8";
  EXPECT_EQ(layout.header_json[layout.header_json.find_last_not_of(' ')], '}') << "padding is spaces";
  EXPECT_EQ(image.substr(layout.data_start), "aaaazzzzzz") << "data contiguous, in name order";

  SafetensorsHeader header = parse_safetensors_header(layout.header_json, layout.data_size, "layout");
  ASSERT_EQ(header.tensors.size(), 2u);
  EXPECT_EQ(header.tensors[0].name, "alpha");
  EXPECT_EQ(header.tensors[0].begin, 0u);
  EXPECT_EQ(header.tensors[0].end, 4u);
  EXPECT_EQ(header.tensors[1].name, "zeta");
  EXPECT_EQ(header.tensors[1].begin, 4u);
  EXPECT_EQ(header.tensors[1].end, 10u);
  EXPECT_TRUE(header.metadata.empty());
}

TEST_F(RoundTripTest, ReadsHeaderNotPaddedToEightBytes) {
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_NE((8 + header.size()) % 8, 0u) << "the point is an unaligned data section";
  std::vector<float> values = {1.5f, -2.0f};
  write_file(dir_ / "odd.safetensors", make_image(header, to_bytes(values)));

  Tensor tensor = SafetensorsFile::open(dir_ / "odd.safetensors")->tensor("w");
  EXPECT_EQ(tensor_bytes(tensor), to_bytes(values));
}

TEST_F(RoundTripTest, AcceptsGapsBetweenTensorsAndTrailingBytes) {
  std::string header = R"({"b": {"dtype": "I32", "shape": [1], "data_offsets": [8, 12]},)"
                       R"( "a": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]}})";
  std::string data = to_bytes(std::vector<int32_t>{7, -1, 9, -1, -1});
  write_file(dir_ / "gaps.safetensors", make_image(header, data));

  std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(dir_ / "gaps.safetensors");
  EXPECT_EQ(tensor_bytes(file->tensor("a")), to_bytes(std::vector<int32_t>{7}));
  EXPECT_EQ(tensor_bytes(file->tensor("b")), to_bytes(std::vector<int32_t>{9}));
  EXPECT_EQ(file->header().tensors[0].name, "a") << "tensors listed in offset order";
}

TEST_F(RoundTripTest, AcceptsEmptyTensorAmongOthers) {
  std::string header = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                       R"( "none": {"dtype": "F32", "shape": [3, 0], "data_offsets": [4, 4]}})";
  write_file(dir_ / "empty.safetensors", make_image(header, std::string(8, '\0')));

  Tensor none = SafetensorsFile::open(dir_ / "empty.safetensors")->tensor("none");
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.shape(), (Shape{3, 0}));
}

TEST_F(RoundTripTest, TensorsAreViewsIntoTheMapping) {
  SafetensorsWriter writer;
  writer.add("a", DType::kF32, {4}, std::string(16, 'a'));
  writer.add("b", DType::kF32, {4}, std::string(16, 'b'));
  writer.write(dir_ / "views.safetensors");

  std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(dir_ / "views.safetensors");
  Tensor a = file->tensor("a");
  Tensor b = file->tensor("b");
  EXPECT_EQ(static_cast<char*>(b.raw()) - static_cast<char*>(a.raw()), 16);
  EXPECT_EQ(file->tensor("a").raw(), a.raw()) << "no copy per call";
}

TEST_F(RoundTripTest, TensorKeepsItsFileMappedAfterTheFileIsReleased) {
  std::vector<float> values = {1.0f, 2.0f, 3.0f};
  SafetensorsWriter writer;
  writer.add("w", DType::kF32, {3}, to_bytes(values));
  writer.write(dir_ / "kept.safetensors");

  std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(dir_ / "kept.safetensors");
  Tensor tensor = file->tensor("w");
  std::weak_ptr<SafetensorsFile> watch = file;
  file.reset();
  std::filesystem::remove(dir_ / "kept.safetensors");
  EXPECT_FALSE(watch.expired()) << "the tensor holds the file";
  EXPECT_EQ(tensor_bytes(tensor), to_bytes(values));
  tensor = Tensor();
  EXPECT_TRUE(watch.expired()) << "the last view gone, the file is unmapped";
}

TEST_F(RoundTripTest, UnknownTensorIsNotFoundNamingTheFile) {
  SafetensorsWriter writer;
  writer.add("w", DType::kF32, {1}, std::string(4, '\0'));
  writer.write(dir_ / "one.safetensors");
  std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(dir_ / "one.safetensors");
  EXPECT_FALSE(file->contains("v"));
  EXPECT_TRUE(fails_with([&] { file->tensor("v"); }, ErrorCode::kNotFound,
                         {"tensor 'v' not found in " + (dir_ / "one.safetensors").string()}));
}

TEST_F(RoundTripTest, WriterReplacesFileAtomically) {
  SafetensorsWriter first;
  first.add("w", DType::kF32, {1}, std::string(4, '\1'));
  first.write(dir_ / "model.safetensors");
  SafetensorsWriter second;
  second.add("v", DType::kI32, {2}, std::string(8, '\2'));
  second.write(dir_ / "model.safetensors");

  std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(dir_ / "model.safetensors");
  EXPECT_TRUE(file->contains("v"));
  EXPECT_FALSE(file->contains("w"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "model.safetensors.tmp"));
}

/* The writer refuses what it cannot write truthfully. */

TEST_F(RoundTripTest, WriterRejectsBytesNotMatchingShape) {
  SafetensorsWriter writer;
  EXPECT_TRUE(fails_with([&] { writer.add("w", DType::kBF16, {2, 3}, std::string(10, '\0')); },
                         ErrorCode::kInvalidArgument, {"tensor 'w'", "10 bytes", "BF16 [2, 3] needs 12"}));
}

TEST_F(RoundTripTest, WriterRejectsNegativeShape) {
  SafetensorsWriter writer;
  EXPECT_TRUE(fails_with([&] { writer.add("w", DType::kF32, {-1}, ""); }, ErrorCode::kInvalidArgument,
                         {"tensor 'w'", "negative shape [-1]"}));
}

TEST_F(RoundTripTest, WriterRejectsTensorAddedTwice) {
  SafetensorsWriter writer;
  writer.add("w", DType::kF32, {1}, std::string(4, '\0'));
  EXPECT_TRUE(fails_with([&] { writer.add("w", DType::kF32, {1}, std::string(4, '\0')); },
                         ErrorCode::kInvalidArgument, {"tensor 'w' added twice"}));
}

TEST_F(RoundTripTest, WriterRejectsTheMetadataKeyAsATensorName) {
  SafetensorsWriter writer;
  EXPECT_TRUE(fails_with([&] { writer.add("__metadata__", DType::kF32, {1}, std::string(4, '\0')); },
                         ErrorCode::kInvalidArgument, {"'__metadata__' is reserved"}));
}

TEST_F(RoundTripTest, WriterRejectsNameThatIsNotUtf8) {
  SafetensorsWriter writer;
  writer.add("w\xff", DType::kF32, {1}, std::string(4, '\0'));
  EXPECT_TRUE(fails_with([&] { writer.write(dir_ / "bad.safetensors"); }, ErrorCode::kInvalidArgument,
                         {"cannot encode header"}));
}

TEST_F(RoundTripTest, WriterReportsUnwritablePathAsIo) {
  SafetensorsWriter writer;
  writer.add("w", DType::kF32, {1}, std::string(4, '\0'));
  std::filesystem::path path = dir_ / "no-such-dir" / "model.safetensors";
  EXPECT_TRUE(fails_with([&] { writer.write(path); }, ErrorCode::kIo, {path.string(), "cannot open for writing"}));
}

}  // namespace
}  // namespace flashq::testing
