// `flashq keygen`: a new CurveZMQ key pair (docs/security.md). Prints `public: <z85>` and
// `secret: <z85>`; with --out PREFIX writes the secret to PREFIX.key (mode 0600) and the public
// key to PREFIX.pub instead of printing the secret, and never overwrites either.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace flashq {

std::function<void()> add_keygen_command(CLI::App& app);

}  // namespace flashq
