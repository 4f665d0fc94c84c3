// Picks the tokenizer by what the model directory holds: tokenizer.json (Hugging Face, preferred
// because it carries the added tokens exactly as the model was trained with them) or
// tokenizer.model (SentencePiece).
#include <system_error>

#include "shared/error.h"
#include "worker/text/bpe_tokenizer.h"
#include "worker/text/sentencepiece_tokenizer.h"
#include "worker/text/tokenizer.h"

namespace flashq {

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::path json_path = dir / "tokenizer.json";
  if (std::filesystem::is_regular_file(json_path, ec)) return ByteLevelBpeTokenizer::load(json_path);
  std::filesystem::path model_path = dir / "tokenizer.model";
  if (std::filesystem::is_regular_file(model_path, ec)) {
    return std::make_unique<SentencePieceTokenizer>(model_path);
  }
  throw Error(ErrorCode::kNotFound,
              dir.string() + ": no tokenizer.json or tokenizer.model in this directory");
}

}  // namespace flashq
