// libFuzzer target for the safetensors header reader. Each input is a whole file image: it is
// split into length, header and data exactly as SafetensorsFile::open splits a mapped file, and
// the header is parsed and validated. A flashq::Error is the expected answer to bad input;
// anything else escaping (another exception, a sanitizer report) crashes the fuzzer.
//
// A header that passes must keep the promises parse_safetensors_header makes; the checks below
// abort when it does not, so the fuzzer hunts lies that slip through as well as crashes.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "shared/error.h"
#include "worker/model/safetensors.h"

namespace {

void require(bool promise_kept) {
  if (!promise_kept) std::abort();
}

// Every tensor inside the data, sized by dtype x shape, in offset order, sharing no byte.
void check_promises(const flashq::SafetensorsHeader& header, uint64_t data_size) {
  uint64_t previous_end = 0;
  uint64_t previous_begin = 0;
  for (const flashq::TensorInfo& info : header.tensors) {
    require(info.begin <= info.end && info.end <= data_size);
    uint64_t numel = 1;
    for (int64_t dim : info.shape) {
      require(dim >= 0);
      require(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel));
    }
    require(info.end - info.begin == numel * flashq::dtype_size(info.dtype));
    require(info.begin >= previous_begin);
    previous_begin = info.begin;
    if (info.begin == info.end) continue;
    require(info.begin >= previous_end);
    previous_end = info.end;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view image(reinterpret_cast<const char*>(data), size);
  const std::string label = "fuzz.safetensors";
  try {
    flashq::SafetensorsLayout layout = flashq::split_safetensors_file(image, label);
    require(layout.data_start + layout.data_size == size);
    flashq::SafetensorsHeader header = flashq::parse_safetensors_header(layout.header_json, layout.data_size, label);
    check_promises(header, layout.data_size);
  } catch (const flashq::Error& e) {
    require(std::string_view(e.what()).find(label) != std::string_view::npos);
  }
  return 0;
}
