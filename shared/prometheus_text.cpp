#include "shared/prometheus_text.h"

#include <cstdio>

namespace flashq {
namespace prometheus {

void line(std::string& out, const std::string& text) {
  out += text;
  out += '\n';
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

void counter(std::string& out, const std::string& name, const std::string& help, uint64_t value) {
  line(out, "# HELP " + name + " " + help);
  line(out, "# TYPE " + name + " counter");
  line(out, name + " " + std::to_string(value));
}

void gauge(std::string& out, const std::string& name, const std::string& help, double value) {
  line(out, "# HELP " + name + " " + help);
  line(out, "# TYPE " + name + " gauge");
  line(out, name + " " + number(value));
}

}  // namespace prometheus

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value, uint64_t times) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
  counts_[bucket] += times;
  sum_ += value * static_cast<double>(times);
  count_ += times;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  using prometheus::line;
  using prometheus::number;
  line(out, "# HELP " + name + " " + help);
  line(out, "# TYPE " + name + " histogram");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    line(out, name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative));
  }
  line(out, name + "_bucket{le=\"+Inf\"} " + std::to_string(count_));
  line(out, name + "_sum " + number(sum_));
  line(out, name + "_count " + std::to_string(count_));
}

}  // namespace flashq
