// Builds one msgpack map with string keys, field by field, for the encoders of messages.h.
// Fields are packed as they come and counted; finish() puts the map header in front.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashq::protocol {

class MapWriter {
 public:
  MapWriter& string(std::string_view key, std::string_view value);
  MapWriter& binary(std::string_view key, std::string_view bytes);  // msgpack bin: any bytes
  MapWriter& integer(std::string_view key, std::int64_t value);
  MapWriter& unsigned_integer(std::string_view key, std::uint64_t value);
  MapWriter& number(std::string_view key, double value);  // always a float64
  MapWriter& boolean(std::string_view key, bool value);
  MapWriter& token_ids(std::string_view key, std::span<const std::int32_t> ids);
  MapWriter& integers(std::string_view key, std::span<const std::int64_t> values);
  MapWriter& strings(std::string_view key, std::span<const std::string> values);
  // `map` is a finished map (MapWriter::finish()).
  MapWriter& map(std::string_view key, std::string_view map);
  MapWriter& maps(std::string_view key, std::span<const std::string> maps);
  // `value` is already one msgpack value; it is copied in unchanged.
  MapWriter& raw(std::string_view key, std::string_view value);

  std::string finish() const;

 private:
  void key(std::string_view name);

  std::string fields_;
  std::uint32_t count_ = 0;
};

}  // namespace flashq::protocol
