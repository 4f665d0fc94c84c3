#include "shared/protocol/map_writer.h"

#include <msgpack.hpp>

namespace flashq::protocol {
namespace {

// msgpack::packer writes to any stream with write(); this one appends to a string.
struct StringSink {
  std::string* out;
  void write(const char* data, std::size_t size) { out->append(data, size); }
};

using Packer = msgpack::packer<StringSink>;

template <typename PackFn>
void pack_into(std::string& out, PackFn pack) {
  StringSink sink{&out};
  Packer packer(sink);
  pack(packer);
}

void pack_string(Packer& packer, std::string_view text) {
  packer.pack_str(static_cast<std::uint32_t>(text.size()));
  packer.pack_str_body(text.data(), static_cast<std::uint32_t>(text.size()));
}

}  // namespace

void MapWriter::key(std::string_view name) {
  pack_into(fields_, [&](Packer& p) { pack_string(p, name); });
  ++count_;
}

MapWriter& MapWriter::string(std::string_view name, std::string_view value) {
  key(name);
  pack_into(fields_, [&](Packer& p) { pack_string(p, value); });
  return *this;
}

MapWriter& MapWriter::binary(std::string_view name, std::string_view bytes) {
  key(name);
  pack_into(fields_, [&](Packer& p) {
    p.pack_bin(static_cast<std::uint32_t>(bytes.size()));
    p.pack_bin_body(bytes.data(), static_cast<std::uint32_t>(bytes.size()));
  });
  return *this;
}

MapWriter& MapWriter::integer(std::string_view name, std::int64_t value) {
  key(name);
  pack_into(fields_, [&](Packer& p) { p.pack_int64(value); });
  return *this;
}

MapWriter& MapWriter::unsigned_integer(std::string_view name, std::uint64_t value) {
  key(name);
  pack_into(fields_, [&](Packer& p) { p.pack_uint64(value); });
  return *this;
}

MapWriter& MapWriter::number(std::string_view name, double value) {
  key(name);
  pack_into(fields_, [&](Packer& p) { p.pack_double(value); });
  return *this;
}

MapWriter& MapWriter::boolean(std::string_view name, bool value) {
  key(name);
  pack_into(fields_, [&](Packer& p) { value ? p.pack_true() : p.pack_false(); });
  return *this;
}

MapWriter& MapWriter::token_ids(std::string_view name, std::span<const std::int32_t> ids) {
  key(name);
  pack_into(fields_, [&](Packer& p) {
    p.pack_array(static_cast<std::uint32_t>(ids.size()));
    for (std::int32_t id : ids) p.pack_int32(id);
  });
  return *this;
}

MapWriter& MapWriter::integers(std::string_view name, std::span<const std::int64_t> values) {
  key(name);
  pack_into(fields_, [&](Packer& p) {
    p.pack_array(static_cast<std::uint32_t>(values.size()));
    for (std::int64_t value : values) p.pack_int64(value);
  });
  return *this;
}

MapWriter& MapWriter::strings(std::string_view name, std::span<const std::string> values) {
  key(name);
  pack_into(fields_, [&](Packer& p) {
    p.pack_array(static_cast<std::uint32_t>(values.size()));
    for (const std::string& value : values) pack_string(p, value);
  });
  return *this;
}

MapWriter& MapWriter::map(std::string_view name, std::string_view map) { return raw(name, map); }

MapWriter& MapWriter::maps(std::string_view name, std::span<const std::string> maps) {
  key(name);
  pack_into(fields_, [&](Packer& p) { p.pack_array(static_cast<std::uint32_t>(maps.size())); });
  for (const std::string& map : maps) fields_ += map;
  return *this;
}

MapWriter& MapWriter::raw(std::string_view name, std::string_view value) {
  key(name);
  fields_ += value;
  return *this;
}

std::string MapWriter::finish() const {
  std::string out;
  pack_into(out, [&](Packer& p) { p.pack_map(count_); });
  out += fields_;
  return out;
}

}  // namespace flashq::protocol
