#include "kernels/cpu/argmax.h"

#include "kernels/cpu/sampling.h"

namespace flashq::cpu {

void argmax(const float* logits, int32_t* ids, int64_t rows, int64_t vocab) {
  for (int64_t m = 0; m < rows; ++m) {
    const float* row = logits + m * vocab;
    int64_t best = 0;
    float best_logit = ordered_logit(row[0]);
    for (int64_t i = 1; i < vocab; ++i) {
      if (row[i] > best_logit) {  // false for NaN
        best = i;
        best_logit = row[i];
      }
    }
    ids[m] = static_cast<int32_t>(best);
  }
}

}  // namespace flashq::cpu
