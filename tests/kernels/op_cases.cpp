#include "tests/kernels/op_cases.h"

#include <utility>
#include <vector>

namespace flashq {

const std::vector<OpCase>& op_table() {
  static const std::vector<OpCase> table = [] {
    std::vector<OpCase> cases;
    for (auto* group : {&memory_op_cases, &dense_op_cases, &token_op_cases, &attention_op_cases, &llama_op_cases}) {
      for (OpCase& c : group()) cases.push_back(std::move(c));
    }
    for (OpCase& c : moe_op_cases()) cases.push_back(std::move(c));
    for (OpCase& c : deltanet_op_cases()) cases.push_back(std::move(c));
    for (OpCase& c : dflash2_op_cases()) cases.push_back(std::move(c));
    return cases;
  }();
  return table;
}

}  // namespace flashq
