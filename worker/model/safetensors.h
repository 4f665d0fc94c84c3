// Safetensors checkpoints: a u64 little-endian header length, a JSON header mapping tensor
// names to {dtype, shape, data_offsets}, then the data. Files are mmapped; tensors are views
// into the mapping (zero copy on the CPU). Everything in the header is validated before use:
// lengths, offsets inside the data and not overlapping, sizes matching dtype x shape, known
// dtypes. Errors name the file and the problem.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/tensor.h"

namespace flashq {

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;  // byte offsets within the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in offset order
  std::map<std::string, std::string> metadata;  // "__metadata__", if present
};

// Where the parts of a file lie: the 8-byte length, then `header_json`, then the data section.
struct SafetensorsLayout {
  std::string_view header_json;  // a view into the bytes given to split_safetensors_file
  uint64_t data_start = 0;       // offset of the data section from the start of the file
  uint64_t data_size = 0;
};

// Headers longer than this are refused before reading them (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Splits the bytes of a whole file into header and data, checking the length field against the
// file size and kMaxSafetensorsHeaderBytes. Throws kBadCheckpoint naming `file_label`.
SafetensorsLayout split_safetensors_file(std::string_view file_bytes, const std::string& file_label);

// Parses and validates a header (the JSON text) against a data section of `data_size` bytes.
// `file_label` names the file in error messages. Throws kBadCheckpoint (malformed, lying or
// overlapping entries) or kUnsupported (a real dtype we do not load, e.g. F8_E4M3, naming it).
SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size,
                                           const std::string& file_label);

// One mmapped .safetensors file.
class SafetensorsFile {
 public:
  static std::shared_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  bool contains(const std::string& name) const;
  // A CPU tensor viewing the mapping; the view keeps this file mapped.
  Tensor tensor(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  SafetensorsHeader header_;
  std::map<std::string, size_t> index_;  // name -> position in header_.tensors
  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  const char* data_ = nullptr;  // start of the data section
  std::weak_ptr<SafetensorsFile> self_;
};

// All weights of a model directory: model.safetensors, or the shards listed by
// model.safetensors.index.json (every listed shard must exist and hold what the index says).
class WeightStore {
 public:
  static WeightStore open(const std::filesystem::path& dir);

  bool contains(const std::string& name) const;
  // kNotFound naming the tensor and the directory when absent.
  Tensor get(const std::string& name) const;
  // As get, and kBadCheckpoint naming the tensor, the expected and the actual shape on mismatch.
  Tensor get(const std::string& name, const Shape& expected_shape) const;
  std::vector<std::string> names() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> by_name_;
};

// Writes a .safetensors file (used by flashq-model make-tiny and by tests).
class SafetensorsWriter {
 public:
  // `bytes` must hold exactly numel(shape) * dtype_size(dtype) bytes.
  void add(const std::string& name, DType dtype, const Shape& shape, std::string bytes);
  void set_metadata(const std::string& key, const std::string& value);
  // Tensors are written contiguously in name order; the header is padded with spaces so that
  // the data section starts 8-byte aligned (as the format asks).
  void write(const std::filesystem::path& path) const;
  size_t tensor_count() const { return tensors_.size(); }

 private:
  struct Entry {
    DType dtype;
    Shape shape;
    std::string bytes;
  };
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace flashq
