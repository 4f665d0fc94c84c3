// The Prometheus text exposition format (version 0.0.4), for the /metrics pages of the broker and
// the worker: a histogram that can be observed and rendered, and the lines of counters and gauges.
// Not thread-safe: each owner guards its metrics with its own mutex.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flashq {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, increasing; +Inf is implied
  void observe(double value, uint64_t times = 1);  // `times` observations of `value`
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, cumulative when rendered
  double sum_ = 0;
  uint64_t count_ = 0;
};

namespace prometheus {

void line(std::string& out, const std::string& text);
std::string number(double value);
void counter(std::string& out, const std::string& name, const std::string& help, uint64_t value);
void gauge(std::string& out, const std::string& name, const std::string& help, double value);

}  // namespace prometheus
}  // namespace flashq
