// Safetensors reading and writing.
//
// A file is: an 8-byte little-endian header length N, N bytes of JSON, then the data section.
// The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" string map.
//
// Checkpoints come from the outside world, so nothing in a header is trusted: every entry is
// checked for shape, type and range before any byte of data is touched, and every error names
// the file, the tensor and what is wrong with it. Once a header has passed
// parse_safetensors_header, every tensor lies inside the data section, has exactly the bytes its
// dtype and shape need, and no two tensors share a byte.
//
// Files are mapped read-only; tensors handed out are views into the mapping that keep it alive.

#include "worker/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"

namespace flashq {

namespace {

using nlohmann::json;

const char* const kMetadataKey = "__metadata__";
const char* const kIndexFile = "model.safetensors.index.json";
const char* const kSingleFile = "model.safetensors";

/* ---------------------------------------------------------------------------------------------
 * Error helpers
 * ------------------------------------------------------------------------------------------- */

// A name or string from a file, quoted for a message: control bytes escaped (a NUL would end
// what() early) and long text cut, since hostile headers may hold megabytes in one string.
std::string quote(std::string_view text) {
  const size_t kMaxShown = 200;
  const char* hex = "0123456789abcdef";
  std::string quoted = "'";
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      quoted += std::string("\\x") + hex[c >> 4] + hex[c & 0xf];
    } else {
      quoted += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxShown) quoted += "...";
  return quoted + "'";
}

[[noreturn]] void fail_file(ErrorCode code, const std::string& label, const std::string& problem) {
  throw Error(code, label + ": " + problem);
}

[[noreturn]] void fail_tensor(const std::string& label, const std::string& name,
                              const std::string& problem,
                              ErrorCode code = ErrorCode::kBadCheckpoint) {
  throw Error(code, label + ": tensor " + quote(name) + ": " + problem);
}

// A short printable form of a JSON value for messages.
std::string describe_json(const json& value) {
  if (value.is_string()) return quote(value.get_ref<const std::string&>());
  if (value.is_number()) return value.dump();
  return std::string("a JSON ") + value.type_name();
}

/* ---------------------------------------------------------------------------------------------
 * Strict JSON parsing
 * ------------------------------------------------------------------------------------------- */

// Parses `text`, refusing a key repeated within one object. nlohmann keeps the last of repeated
// keys silently, and a header or index naming a tensor twice is lying about one of the two.
// `what` says which document it is ("header", "index") for messages.
json parse_json_strict(std::string_view text, const std::string& label, const std::string& what) {
  std::vector<std::set<std::string>> keys_per_open_object;
  auto refuse_repeated_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys_per_open_object.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      keys_per_open_object.pop_back();
    } else if (event == json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys_per_open_object.back().insert(key).second) {
        fail_file(ErrorCode::kBadCheckpoint, label, what + " has duplicate key " + describe_json(parsed));
      }
    }
    return true;
  };
  try {
    return json::parse(text.data(), text.data() + text.size(), refuse_repeated_keys);
  } catch (const json::exception& e) {
    // parse_error for bad syntax or UTF-8, out_of_range for numbers beyond double.
    fail_file(ErrorCode::kBadCheckpoint, label, what + " is not valid JSON: " + e.what());
  }
}

/* ---------------------------------------------------------------------------------------------
 * Header entries
 * ------------------------------------------------------------------------------------------- */

// Dtypes of the safetensors format that flashq does not load: real, but refused as unsupported
// rather than as a broken file.
const std::set<std::string>& unloaded_dtype_names() {
  static const std::set<std::string> names = {
      "BOOL", "I8", "I16", "U16", "U32", "I64", "U64", "F64", "C64",
      "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"};
  return names;
}

DType parse_dtype(const json& value, const std::string& label, const std::string& name) {
  if (!value.is_string()) fail_tensor(label, name, "dtype is " + describe_json(value) + ", not a string");
  const std::string& text = value.get_ref<const std::string&>();
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kU8}) {
    if (text == dtype_name(dtype)) return dtype;
  }
  if (unloaded_dtype_names().count(text)) {
    fail_tensor(label, name, "dtype " + text + " is not supported (flashq loads F32, F16, BF16, I32, U8)",
                ErrorCode::kUnsupported);
  }
  fail_tensor(label, name, "unknown dtype " + describe_json(value));
}

// A non-negative JSON integer; `what` names the field for messages.
uint64_t parse_count(const json& value, const std::string& label, const std::string& name,
                     const std::string& what) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) {
    int64_t signed_value = value.get<int64_t>();
    if (signed_value < 0) fail_tensor(label, name, what + " is negative (" + value.dump() + ")");
    return static_cast<uint64_t>(signed_value);
  }
  fail_tensor(label, name, what + " is " + describe_json(value) + ", not a non-negative integer");
}

Shape parse_shape(const json& value, const std::string& label, const std::string& name) {
  if (!value.is_array()) fail_tensor(label, name, "shape is " + describe_json(value) + ", not an array");
  Shape shape;
  for (size_t i = 0; i < value.size(); ++i) {
    uint64_t dim = parse_count(value[i], label, name, "shape dimension " + std::to_string(i));
    if (dim > static_cast<uint64_t>(INT64_MAX)) {
      fail_tensor(label, name, "shape dimension " + std::to_string(i) + " is too large (" +
                                   std::to_string(dim) + ")");
    }
    shape.push_back(static_cast<int64_t>(dim));
  }
  return shape;
}

// Bytes that `dtype` x `shape` occupy (dims known non-negative); false when the count overflows.
// Every prefix product must fit, since Tensor::numel multiplies in order.
bool shape_bytes(DType dtype, const Shape& shape, uint64_t* bytes) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(numel, dim, &numel)) return false;
  }
  return !__builtin_mul_overflow(static_cast<uint64_t>(numel), dtype_size(dtype), bytes);
}

void parse_data_offsets(const json& value, TensorInfo& info, const std::string& label) {
  if (!value.is_array() || value.size() != 2) {
    fail_tensor(label, info.name, "data_offsets is " + describe_json(value) + ", not [begin, end]");
  }
  info.begin = parse_count(value[0], label, info.name, "data_offsets begin");
  info.end = parse_count(value[1], label, info.name, "data_offsets end");
}

// Exactly the three fields, each present once.
void check_entry_fields(const json& entry, const std::string& label, const std::string& name) {
  if (!entry.is_object()) {
    fail_tensor(label, name, "entry is " + describe_json(entry) + ", not an object");
  }
  for (const auto& [key, unused] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail_tensor(label, name, "unexpected field " + quote(key));
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) fail_tensor(label, name, "missing field " + quote(key));
  }
}

std::string offsets_to_string(const TensorInfo& info) {
  return "[" + std::to_string(info.begin) + ", " + std::to_string(info.end) + "]";
}

TensorInfo parse_entry(const std::string& name, const json& entry, uint64_t data_size,
                       const std::string& label) {
  check_entry_fields(entry, label, name);
  TensorInfo info;
  info.name = name;
  info.dtype = parse_dtype(entry.at("dtype"), label, name);
  info.shape = parse_shape(entry.at("shape"), label, name);
  parse_data_offsets(entry.at("data_offsets"), info, label);
  if (info.begin > info.end) {
    fail_tensor(label, name, "data_offsets " + offsets_to_string(info) + " begin after end");
  }
  if (info.end > data_size) {
    fail_tensor(label, name, "data_offsets " + offsets_to_string(info) + " end beyond the data section (" +
                                 std::to_string(data_size) + " bytes)");
  }
  uint64_t needed = 0;
  if (!shape_bytes(info.dtype, info.shape, &needed)) {
    fail_tensor(label, name, "shape " + shape_to_string(info.shape) + " is too large: its size overflows 64 bits");
  }
  if (info.end - info.begin != needed) {
    fail_tensor(label, name, "data_offsets " + offsets_to_string(info) + " hold " +
                                 std::to_string(info.end - info.begin) + " bytes but " +
                                 std::string(dtype_name(info.dtype)) + " " + shape_to_string(info.shape) +
                                 " needs " + std::to_string(needed));
  }
  return info;
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::string& label) {
  if (!value.is_object()) {
    fail_file(ErrorCode::kBadCheckpoint, label, "__metadata__ is " + describe_json(value) + ", not an object");
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      fail_file(ErrorCode::kBadCheckpoint, label, "__metadata__ value for " + quote(key) + " is " +
                                                      describe_json(item) + ", not a string");
    }
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

// Tensors come sorted by offset; empty tensors occupy no bytes and so overlap nothing.
void check_no_overlap(const std::vector<TensorInfo>& tensors, const std::string& label) {
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& info : tensors) {
    if (info.begin == info.end) continue;
    if (previous && info.begin < previous->end) {
      fail_tensor(label, info.name, "data_offsets " + offsets_to_string(info) + " overlap tensor " +
                                        quote(previous->name) + " at " + offsets_to_string(*previous));
    }
    previous = &info;
  }
}

uint64_t read_le_u64(const char* bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return value;
}

}  // namespace

/* ---------------------------------------------------------------------------------------------
 * Header parsing
 * ------------------------------------------------------------------------------------------- */

SafetensorsLayout split_safetensors_file(std::string_view file_bytes, const std::string& file_label) {
  if (file_bytes.size() < 8) {
    fail_file(ErrorCode::kBadCheckpoint, file_label,
              "file is " + std::to_string(file_bytes.size()) + " bytes, too short for the 8-byte header length");
  }
  uint64_t header_length = read_le_u64(file_bytes.data());
  uint64_t after_length = file_bytes.size() - 8;
  if (header_length > kMaxSafetensorsHeaderBytes) {
    fail_file(ErrorCode::kBadCheckpoint, file_label,
              "header length " + std::to_string(header_length) + " is over the limit of " +
                  std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  if (header_length > after_length) {
    fail_file(ErrorCode::kBadCheckpoint, file_label,
              "header length " + std::to_string(header_length) + " is longer than the file (" +
                  std::to_string(file_bytes.size()) + " bytes)");
  }
  SafetensorsLayout layout;
  layout.header_json = file_bytes.substr(8, header_length);
  layout.data_start = 8 + header_length;
  layout.data_size = after_length - header_length;
  return layout;
}

SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size,
                                           const std::string& file_label) {
  json root = parse_json_strict(header_json, file_label, "header");
  if (!root.is_object()) {
    fail_file(ErrorCode::kBadCheckpoint, file_label, "header is " + describe_json(root) + ", not a JSON object");
  }
  SafetensorsHeader header;
  for (const auto& [name, entry] : root.items()) {
    if (name == kMetadataKey) {
      header.metadata = parse_metadata(entry, file_label);
    } else {
      header.tensors.push_back(parse_entry(name, entry, data_size, file_label));
    }
  }
  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  check_no_overlap(header.tensors, file_label);
  return header;
}

/* ---------------------------------------------------------------------------------------------
 * SafetensorsFile: one mapped file
 * ------------------------------------------------------------------------------------------- */

namespace {

// An open file descriptor, closed on every path out (the mapping outlives it).
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void fail_os(const std::filesystem::path& path, const std::string& action, int error) {
  ErrorCode code = error == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo;
  std::string problem = error == ENOENT ? "no such file" : action + ": " + std::strerror(error);
  fail_file(code, path.string(), problem);
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->self_ = file;
  file->path_ = path;
  const std::string label = path.string();

  // O_NONBLOCK so that a FIFO fails the regular-file check below instead of hanging the open.
  FileDescriptor descriptor;
  descriptor.fd = ::open(label.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (descriptor.fd < 0) fail_os(path, "cannot open", errno);
  struct stat info {};
  if (::fstat(descriptor.fd, &info) != 0) fail_os(path, "cannot stat", errno);
  if (!S_ISREG(info.st_mode)) fail_file(ErrorCode::kIo, label, "not a regular file");

  // mmap refuses length 0; an empty file is simply too short, which split reports.
  file->mapping_size_ = static_cast<size_t>(info.st_size);
  if (file->mapping_size_ > 0) {
    void* mapping = ::mmap(nullptr, file->mapping_size_, PROT_READ, MAP_PRIVATE, descriptor.fd, 0);
    if (mapping == MAP_FAILED) fail_os(path, "cannot mmap", errno);
    file->mapping_ = mapping;
    ::madvise(mapping, file->mapping_size_, MADV_WILLNEED);  // a hint; failure changes nothing
  }

  std::string_view bytes(static_cast<const char*>(file->mapping_), file->mapping_size_);
  SafetensorsLayout layout = split_safetensors_file(bytes, label);
  file->header_ = parse_safetensors_header(layout.header_json, layout.data_size, label);
  file->data_ = static_cast<const char*>(file->mapping_) + layout.data_start;
  for (size_t i = 0; i < file->header_.tensors.size(); ++i) file->index_[file->header_.tensors[i].name] = i;
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, mapping_size_);
}

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) != 0; }

// The mapping is read-only: writing through the returned tensor faults. The tensor holds a
// reference to this file, so the mapping stays until the last view is gone.
Tensor SafetensorsFile::tensor(const std::string& name) const {
  auto found = index_.find(name);
  if (found == index_.end()) {
    throw Error(ErrorCode::kNotFound, "tensor " + quote(name) + " not found in " + path_.string());
  }
  const TensorInfo& info = header_.tensors[found->second];
  std::shared_ptr<void> owner = self_.lock();
  check_invariant(owner != nullptr, "SafetensorsFile is owned by a shared_ptr");
  void* data = const_cast<char*>(data_ + info.begin);
  return Tensor(std::move(owner), data, info.dtype, Device::kCpu, info.shape);
}

/* ---------------------------------------------------------------------------------------------
 * WeightStore: the weights of a model directory
 * ------------------------------------------------------------------------------------------- */

namespace {

// A shard named by the index must be a relative path that stays inside the model directory.
// The check is lexical: symlinks are followed as usual (the Hugging Face cache links every
// file into a blobs/ directory elsewhere).
bool is_name_inside_dir(const std::string& shard) {
  if (shard.empty() || shard.find('\0') != std::string::npos) return false;
  std::filesystem::path path(shard);
  if (path.has_root_path()) return false;
  for (const auto& part : path) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

// The index's weight_map as shard name -> tensor names listed for it.
std::map<std::string, std::vector<std::string>> read_weight_map(const std::filesystem::path& index_path) {
  const std::string label = index_path.string();
  json index = parse_json_strict(read_text_file(index_path), label, "index");
  if (!index.is_object()) fail_file(ErrorCode::kBadCheckpoint, label, "index is not a JSON object");
  if (!index.contains("weight_map") || !index.at("weight_map").is_object()) {
    fail_file(ErrorCode::kBadCheckpoint, label, "index has no weight_map object");
  }
  std::map<std::string, std::vector<std::string>> tensors_by_shard;
  for (const auto& [name, shard] : index.at("weight_map").items()) {
    if (!shard.is_string()) {
      fail_file(ErrorCode::kBadCheckpoint, label,
                "weight_map entry for tensor " + quote(name) + " is " + describe_json(shard) + ", not a file name");
    }
    const std::string& shard_name = shard.get_ref<const std::string&>();
    if (!is_name_inside_dir(shard_name)) {
      fail_file(ErrorCode::kBadCheckpoint, label,
                "weight_map puts tensor " + quote(name) + " in shard " + describe_json(shard) +
                    ", which is not a file inside the model directory");
    }
    tensors_by_shard[shard_name].push_back(name);
  }
  if (tensors_by_shard.empty()) fail_file(ErrorCode::kBadCheckpoint, label, "weight_map lists no tensors");
  return tensors_by_shard;
}

std::shared_ptr<SafetensorsFile> open_shard(const std::filesystem::path& dir, const std::string& shard_name,
                                            const std::vector<std::string>& listed,
                                            const std::filesystem::path& index_path) {
  std::filesystem::path shard_path = dir / shard_name;
  std::error_code ec;
  if (!std::filesystem::exists(shard_path, ec)) {
    throw Error(ErrorCode::kNotFound, shard_path.string() + ": no such file (listed in " +
                                          index_path.string() + " for tensor " + quote(listed.front()) + ")");
  }
  std::shared_ptr<SafetensorsFile> shard = SafetensorsFile::open(shard_path);
  for (const std::string& name : listed) {
    if (!shard->contains(name)) {
      fail_tensor(shard_path.string(), name, "missing, but " + index_path.string() + " lists it in this shard");
    }
  }
  return shard;
}

// Serves every tensor of `file`; a name already served by another file is refused, since the
// two copies could differ and nothing says which one is meant.
void add_file_tensors(std::map<std::string, std::shared_ptr<SafetensorsFile>>& by_name,
                      const std::shared_ptr<SafetensorsFile>& file) {
  for (const TensorInfo& info : file->header().tensors) {
    auto [existing, inserted] = by_name.emplace(info.name, file);
    if (!inserted) {
      fail_tensor(file->path().string(), info.name,
                  "also present in " + existing->second->path().string() + " (a tensor must be in one file)");
    }
  }
}

}  // namespace

// Prefers the index when both kinds are present: a directory with an index is sharded, and a
// stray model.safetensors beside it is more likely a leftover than the whole model. Tensors in
// a shard that the index does not list are served too, as transformers loads them.
WeightStore WeightStore::open(const std::filesystem::path& dir) {
  WeightStore store;
  store.dir_ = dir;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    fail_file(ErrorCode::kNotFound, dir.string(), "no such model directory");
  }
  std::filesystem::path index_path = dir / kIndexFile;
  if (std::filesystem::exists(index_path, ec)) {
    for (const auto& [shard_name, listed] : read_weight_map(index_path)) {
      add_file_tensors(store.by_name_, open_shard(dir, shard_name, listed, index_path));
    }
    return store;
  }
  std::filesystem::path single_path = dir / kSingleFile;
  if (std::filesystem::exists(single_path, ec)) {
    add_file_tensors(store.by_name_, SafetensorsFile::open(single_path));
    return store;
  }
  fail_file(ErrorCode::kNotFound, dir.string(),
            std::string("no weights: neither ") + kSingleFile + " nor " + kIndexFile + " exists");
}

bool WeightStore::contains(const std::string& name) const { return by_name_.count(name) != 0; }

Tensor WeightStore::get(const std::string& name) const {
  auto found = by_name_.find(name);
  if (found == by_name_.end()) {
    throw Error(ErrorCode::kNotFound, "tensor " + quote(name) + " not found in " + dir_.string());
  }
  return found->second->tensor(name);
}

Tensor WeightStore::get(const std::string& name, const Shape& expected_shape) const {
  Tensor tensor = get(name);
  if (tensor.shape() != expected_shape) {
    throw Error(ErrorCode::kBadCheckpoint,
                "tensor " + quote(name) + " in " + by_name_.at(name)->path().string() + " has shape " +
                    shape_to_string(tensor.shape()) + ", expected " + shape_to_string(expected_shape));
  }
  return tensor;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> names;
  for (const auto& entry : by_name_) names.push_back(entry.first);
  return names;
}

/* ---------------------------------------------------------------------------------------------
 * SafetensorsWriter
 * ------------------------------------------------------------------------------------------- */

void SafetensorsWriter::add(const std::string& name, DType dtype, const Shape& shape, std::string bytes) {
  const std::string label = "safetensors writer";
  if (name == kMetadataKey) {
    throw Error(ErrorCode::kInvalidArgument, label + ": " + quote(name) + " is reserved and cannot name a tensor");
  }
  if (tensors_.count(name)) {
    throw Error(ErrorCode::kInvalidArgument, label + ": tensor " + quote(name) + " added twice");
  }
  for (int64_t dim : shape) {
    if (dim < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  label + ": tensor " + quote(name) + " has negative shape " + shape_to_string(shape));
    }
  }
  uint64_t needed = 0;
  if (!shape_bytes(dtype, shape, &needed)) {
    throw Error(ErrorCode::kInvalidArgument,
                label + ": tensor " + quote(name) + " has shape " + shape_to_string(shape) + ", too large");
  }
  if (bytes.size() != needed) {
    throw Error(ErrorCode::kInvalidArgument, label + ": tensor " + quote(name) + " given " +
                                                 std::to_string(bytes.size()) + " bytes, but " +
                                                 std::string(dtype_name(dtype)) + " " +
                                                 shape_to_string(shape) + " needs " + std::to_string(needed));
  }
  tensors_[name] = Entry{dtype, shape, std::move(bytes)};
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

namespace {

// The header text, padded with spaces so that 8 + its length is a multiple of 8.
template <typename Entries>
std::string build_header(const Entries& tensors, const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, entry] : tensors) {
    uint64_t end = offset + entry.bytes.size();
    header[name] = {{"dtype", std::string(dtype_name(entry.dtype))},
                    {"shape", entry.shape},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // a name or value that is not UTF-8
    throw Error(ErrorCode::kInvalidArgument, std::string("safetensors writer: cannot encode header: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::string le_u64_bytes(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

}  // namespace

// Writes to "<path>.tmp" and renames, so a reader never sees a half-written checkpoint.
void SafetensorsWriter::write(const std::filesystem::path& path) const {
  std::string header = build_header(tensors_, metadata_);
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail_file(ErrorCode::kIo, tmp.string(), "cannot open for writing");
    out << le_u64_bytes(header.size()) << header;
    for (const auto& entry : tensors_) {
      out.write(entry.second.bytes.data(), static_cast<std::streamsize>(entry.second.bytes.size()));
    }
    out.flush();
    if (!out) fail_file(ErrorCode::kIo, tmp.string(), "write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail_file(ErrorCode::kIo, path.string(), "cannot rename from " + tmp.string() + ": " + ec.message());
}

}  // namespace flashq
