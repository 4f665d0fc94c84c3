// A test suite whose tests share one small byte-level BPE tokenizer (flashq-model's tiny one, 511
// ids), written and loaded once for the suite.
#pragma once

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"
#include "tools/flashq_model/tiny_tokenizer.h"
#include "worker/text/tokenizer.h"

namespace flashq::testing {

class TinyTokenizerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    write_tiny_tokenizer(dir_->path(), 511);
    tokenizer_ = load_tokenizer(dir_->path()).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete dir_;
    tokenizer_ = nullptr;
    dir_ = nullptr;
  }

  static inline TempDir* dir_ = nullptr;
  static inline Tokenizer* tokenizer_ = nullptr;
};

}  // namespace flashq::testing
