// Every way a safetensors file can be broken or lie is refused with a flashq::Error whose code
// says what kind of failure it is and whose message names the file, the tensor and the problem.

#include <sys/stat.h>
#include <unistd.h>

#include "tests/safetensors/safetensors_test_util.h"

namespace flashq::testing {
namespace {

using HeaderTest = SafetensorsTest;

// One valid F32 [2] tensor named 'w' with its fields replaced by `fields`.
std::string entry_with(const std::string& fields) { return R"({"w": {)" + fields + "}}"; }

const char* const kValidEntry = R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";

TEST_F(HeaderTest, AcceptsTheValidEntryTheOtherTestsBreak) {
  std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(write_header(kValidEntry, 8));
  EXPECT_TRUE(file->contains("w"));
}

/* The length field and the file size. */

TEST_F(HeaderTest, RejectsEmptyFile) {
  std::filesystem::path path = dir_ / "empty.safetensors";
  write_file(path, "");
  EXPECT_TRUE(open_fails(path, ErrorCode::kBadCheckpoint, {"0 bytes", "too short"}));
}

TEST_F(HeaderTest, RejectsFileShorterThanLengthField) {
  std::filesystem::path path = dir_ / "short.safetensors";
  write_file(path, std::string("\x10\0\0\0\0", 5));
  EXPECT_TRUE(open_fails(path, ErrorCode::kBadCheckpoint, {"5 bytes", "too short"}));
}

TEST_F(HeaderTest, RejectsHeaderLongerThanFile) {
  std::filesystem::path path = dir_ / "long.safetensors";
  std::string image = make_image(kValidEntry, std::string(8, '\0'));
  image[0] = static_cast<char>(200);  // claims 200 header bytes; the file has fewer
  write_file(path, image);
  EXPECT_TRUE(open_fails(path, ErrorCode::kBadCheckpoint, {"header length 200", "longer than the file"}));
}

TEST_F(HeaderTest, RejectsAbsurdHeaderLength) {
  std::filesystem::path path = dir_ / "absurd.safetensors";
  std::string image = make_image(kValidEntry, "");
  image[7] = static_cast<char>(0x80);  // 2^63 + the real length
  write_file(path, image);
  EXPECT_TRUE(open_fails(path, ErrorCode::kBadCheckpoint, {"header length", "over the limit"}));
}

TEST_F(HeaderTest, RejectsHeaderLengthJustOverTheLimit) {
  std::string image(8, '\0');
  uint64_t length = kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) image[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  EXPECT_TRUE(fails_with([&] { split_safetensors_file(image, "label.safetensors"); }, ErrorCode::kBadCheckpoint,
                         {"label.safetensors", "100000001", "over the limit"}));
}

/* The header as JSON. */

TEST_F(HeaderTest, RejectsHeaderThatIsNotJson) {
  EXPECT_TRUE(open_fails(write_header("{not json", 0), ErrorCode::kBadCheckpoint, {"header is not valid JSON"}));
}

TEST_F(HeaderTest, RejectsEmptyHeader) {
  EXPECT_TRUE(open_fails(write_header("", 0), ErrorCode::kBadCheckpoint, {"header is not valid JSON"}));
}

TEST_F(HeaderTest, RejectsInvalidUtf8InHeader) {
  std::string header = R"({"w)" + std::string("\xff") + R"(": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"header is not valid JSON"}));
}

TEST_F(HeaderTest, RejectsHeaderThatIsNotAnObject) {
  EXPECT_TRUE(open_fails(write_header("[1, 2]", 0), ErrorCode::kBadCheckpoint, {"not a JSON object"}));
}

TEST_F(HeaderTest, RejectsDuplicateTensorName) {
  std::string header = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                       R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"duplicate key 'w'"}));
}

TEST_F(HeaderTest, EscapesControlBytesOfNamesInMessages) {
  std::string header = R"({"w\u0000x": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}})";
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w\\x00x'", "unknown dtype 'F33'"}));
}

/* One entry's fields. */

TEST_F(HeaderTest, RejectsEntryThatIsNotAnObject) {
  EXPECT_TRUE(open_fails(write_header(R"({"w": [0, 8]})", 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "not an object"}));
}

TEST_F(HeaderTest, RejectsMissingDtype) {
  std::string header = entry_with(R"("shape": [2], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"tensor 'w'", "missing field 'dtype'"}));
}

TEST_F(HeaderTest, RejectsMissingShape) {
  std::string header = entry_with(R"("dtype": "F32", "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"tensor 'w'", "missing field 'shape'"}));
}

TEST_F(HeaderTest, RejectsMissingDataOffsets) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [2])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "missing field 'data_offsets'"}));
}

TEST_F(HeaderTest, RejectsUnexpectedField) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8], "offset": 0)");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"tensor 'w'", "unexpected field 'offset'"}));
}

TEST_F(HeaderTest, RejectsDtypeThatIsNotAString) {
  std::string header = entry_with(R"("dtype": 5, "shape": [2], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"tensor 'w'", "dtype is 5, not a string"}));
}

/* Dtypes: unknown strings are a broken file; real dtypes we do not load are unsupported. */

TEST_F(HeaderTest, RejectsUnknownDtype) {
  std::string header = entry_with(R"("dtype": "F33", "shape": [2], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"tensor 'w'", "unknown dtype 'F33'"}));
}

TEST_F(HeaderTest, RejectsLowercaseDtype) {
  std::string header = entry_with(R"("dtype": "f32", "shape": [2], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"tensor 'w'", "unknown dtype 'f32'"}));
}

TEST_F(HeaderTest, RefusesF8WithUnsupported) {
  std::string header = entry_with(R"("dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kUnsupported,
                         {"tensor 'w'", "dtype F8_E4M3 is not supported"}));
}

TEST_F(HeaderTest, RefusesEveryRealDtypeWeDoNotLoadWithUnsupported) {
  for (std::string dtype : {"F64", "I64", "U64", "I16", "U16", "U32", "I8", "BOOL", "F8_E5M2", "F8_E4M3"}) {
    std::string header = entry_with(R"("dtype": ")" + dtype + R"(", "shape": [1], "data_offsets": [0, 1])");
    EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kUnsupported,
                           {"tensor 'w'", "dtype " + dtype + " is not supported"}))
        << dtype;
  }
}

// U8 holds MXFP4 weights (FP4 blocks and E8M0 scales): loaded as raw bytes, one per element.
TEST_F(HeaderTest, LoadsU8AsRawBytes) {
  std::filesystem::path path = dir_ / "bytes.safetensors";
  write_file(path, make_image(entry_with(R"("dtype": "U8", "shape": [2, 3], "data_offsets": [0, 6])"),
                              std::string("\x01\x7f\x80\xff\x00\x2a", 6)));
  std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(path);
  const Tensor w = file->tensor("w");
  EXPECT_EQ(w.dtype(), DType::kU8);
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(w.nbytes(), 6u);
  EXPECT_EQ(w.data<uint8_t>()[0], 0x01);
  EXPECT_EQ(w.data<uint8_t>()[3], 0xff);
  EXPECT_EQ(w.data<uint8_t>()[5], 0x2a);
}

/* Shapes. */

TEST_F(HeaderTest, RejectsShapeThatIsNotAnArray) {
  std::string header = entry_with(R"("dtype": "F32", "shape": 2, "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"tensor 'w'", "shape is 2, not an array"}));
}

TEST_F(HeaderTest, RejectsNegativeShapeDimension) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [-2, -1], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "shape dimension 0 is negative (-2)"}));
}

TEST_F(HeaderTest, RejectsNonIntegerShapeDimension) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [1, 2.5], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "shape dimension 1 is 2.5, not a non-negative integer"}));
}

TEST_F(HeaderTest, RejectsStringShapeDimension) {
  std::string header = entry_with(R"("dtype": "F32", "shape": ["2"], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "shape dimension 0 is '2', not a non-negative integer"}));
}

TEST_F(HeaderTest, RejectsShapeDimensionBeyondInt64) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "shape dimension 0 is too large"}));
}

TEST_F(HeaderTest, RejectsShapeProductOverflow) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "shape [4294967296, 4294967296] is too large", "overflows"}));
}

TEST_F(HeaderTest, RejectsShapeWhoseByteCountOverflows) {
  // 2^62 elements fit in int64, but 2^62 x 4 bytes does not fit in 64 bits.
  std::string header = entry_with(R"("dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 8])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"tensor 'w'", "overflows"}));
}

/* Offsets. */

TEST_F(HeaderTest, RejectsDataOffsetsThatAreNotAPair) {
  for (std::string offsets : {"[0]", "[0, 4, 8]", R"("0-8")", "{}"}) {
    std::string header = entry_with(R"("dtype": "F32", "shape": [2], "data_offsets": )" + offsets);
    EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                           {"tensor 'w'", "data_offsets is", "not [begin, end]"}))
        << offsets;
  }
}

TEST_F(HeaderTest, RejectsNegativeDataOffset) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [2], "data_offsets": [-8, 0])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "data_offsets begin is negative"}));
}

TEST_F(HeaderTest, RejectsNonIntegerDataOffset) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8.0])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "data_offsets end is 8.0, not a non-negative integer"}));
}

TEST_F(HeaderTest, RejectsBeginAfterEnd) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [0], "data_offsets": [8, 4])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "data_offsets [8, 4] begin after end"}));
}

TEST_F(HeaderTest, RejectsEndBeyondDataSection) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [4], "data_offsets": [0, 16])");
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "data_offsets [0, 16] end beyond the data section (8 bytes)"}));
}

TEST_F(HeaderTest, RejectsSizeNotMatchingShapeAndDtype) {
  std::string header = entry_with(R"("dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12])");
  EXPECT_TRUE(open_fails(write_header(header, 16), ErrorCode::kBadCheckpoint,
                         {"tensor 'w'", "data_offsets [0, 12] hold 12 bytes but F32 [2, 2] needs 16"}));
}

TEST_F(HeaderTest, RejectsOverlappingTensorOffsets) {
  std::string header = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                       R"( "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})";
  EXPECT_TRUE(open_fails(write_header(header, 24), ErrorCode::kBadCheckpoint,
                         {"tensor 'b'", "data_offsets [8, 24] overlap tensor 'a' at [0, 16]"}));
}

TEST_F(HeaderTest, RejectsTwoTensorsOnTheSameBytes) {
  std::string header = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                       R"( "b": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})";
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"tensor 'b'", "overlap tensor 'a'"}));
}

/* __metadata__. */

TEST_F(HeaderTest, RejectsMetadataThatIsNotAnObject) {
  std::string header = R"({"__metadata__": "pt", "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint, {"__metadata__ is 'pt', not an object"}));
}

TEST_F(HeaderTest, RejectsMetadataWithNonStringValue) {
  std::string header = R"({"__metadata__": {"format": "pt", "step": 7},)"
                       R"( "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  EXPECT_TRUE(open_fails(write_header(header, 8), ErrorCode::kBadCheckpoint,
                         {"__metadata__ value for 'step' is 7, not a string"}));
}

/* The operating system's side. */

TEST_F(HeaderTest, MissingFileIsNotFound) {
  EXPECT_TRUE(open_fails(dir_ / "absent.safetensors", ErrorCode::kNotFound, {"no such file"}));
}

TEST_F(HeaderTest, DirectoryIsAnIoError) {
  std::filesystem::create_directory(dir_ / "dir.safetensors");
  EXPECT_TRUE(open_fails(dir_ / "dir.safetensors", ErrorCode::kIo, {"not a regular file"}));
}

TEST_F(HeaderTest, FifoIsAnIoErrorNotAHang) {
  std::filesystem::path path = dir_ / "fifo.safetensors";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_TRUE(open_fails(path, ErrorCode::kIo, {"not a regular file"}));
}

TEST_F(HeaderTest, UnreadableFileIsAnIoError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  std::filesystem::path path = write_header(kValidEntry, 8);
  ::chmod(path.c_str(), 0);
  EXPECT_TRUE(open_fails(path, ErrorCode::kIo, {"cannot open"}));
}

/* Damage anywhere never crashes. */

// A valid file of several tensors whose data runs to the last byte, so every truncation
// loses something the header promises.
std::string valid_image() {
  SafetensorsWriter writer;
  writer.add("a", DType::kF32, {2, 3}, std::string(24, '\1'));
  writer.add("b", DType::kBF16, {5}, std::string(10, '\2'));
  writer.add("c", DType::kI32, {1}, std::string(4, '\3'));
  writer.set_metadata("format", "pt");
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("flashq-valid-" + std::to_string(::getpid()) + ".safetensors");
  writer.write(path);
  std::string image = read_file(path);
  std::filesystem::remove(path);
  return image;
}

TEST_F(HeaderTest, TruncationAtEveryByteThrowsError) {
  std::string image = valid_image();
  std::filesystem::path path = dir_ / "cut.safetensors";
  for (size_t length = 0; length < image.size(); ++length) {
    write_file(path, image.substr(0, length));
    EXPECT_TRUE(fails_with([&] { SafetensorsFile::open(path); }, ErrorCode::kBadCheckpoint, {path.string()}))
        << "truncated to " << length << " of " << image.size() << " bytes";
  }
}

TEST_F(HeaderTest, CorruptingAnyByteNeverCrashes) {
  std::string image = valid_image();
  std::filesystem::path path = dir_ / "flipped.safetensors";
  for (size_t position = 0; position < image.size(); ++position) {
    for (unsigned char pattern : {0xffu, 0x01u, 0x80u}) {
      std::string damaged = image;
      damaged[position] = static_cast<char>(damaged[position] ^ pattern);
      write_file(path, damaged);
      try {
        SafetensorsFile::open(path);  // damage in the data, or a harmless header change, still opens
      } catch (const Error&) {
      }
    }
  }
}

}  // namespace
}  // namespace flashq::testing
