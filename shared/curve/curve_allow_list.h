// The CURVE public keys a broker lets in, read from a file: one Z85 public key per line, which
// may be followed by a comment (`KEY  # alice's laptop`); blank lines and lines starting with '#'
// are comments.
#pragma once

#include <filesystem>
#include <set>
#include <string>

namespace flashq {

// kNotFound for a missing file; kBadConfig naming file and line for a line that is neither a key
// nor a comment, and for a file with no key at all (it would shut everyone out, surely a mistake).
std::set<std::string> load_curve_allow_list(const std::filesystem::path& path);

}  // namespace flashq
