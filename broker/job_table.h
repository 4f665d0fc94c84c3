// Every job this broker knows, by id, and the finished ones in the order they finished: retention
// (STATUS, idempotent resubmission, replay) drops the oldest finished jobs first. Shared by the
// broker's core, its dispatcher and its stream fan-out (never the job store, which reports to the
// broker instead); only the broker thread uses it.
#pragma once

#include <deque>
#include <map>
#include <string>

#include "broker/job_record.h"

namespace flashq {

struct JobTable {
  std::map<std::string, JobRecord> jobs;
  std::deque<std::string> finished_order;  // oldest first; each id is in `jobs`

  JobRecord* find(const std::string& id) {
    auto it = jobs.find(id);
    return it == jobs.end() ? nullptr : &it->second;
  }
  bool contains(const std::string& id) const { return jobs.count(id) > 0; }
};

}  // namespace flashq
