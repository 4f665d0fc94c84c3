// `flashq up`: the embedded default. A broker and one worker in this process; the worker reaches
// the broker over inproc, producers and subscribers over the broker's TCP endpoints. Serves until
// SIGINT or SIGTERM, then drains the worker and the broker.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_up_command(CLI::App& app);

}  // namespace flashq
