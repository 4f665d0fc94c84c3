#include "worker/text/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "shared/error.h"
#include "worker/text/utf8.h"

namespace flashq {

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& path)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  auto status = processor_->Load(path.string());
  if (!status.ok()) {
    throw Error(ErrorCode::kBadTokenizer,
                path.string() + ": not a usable SentencePiece model: " + status.ToString());
  }
  std::vector<AddedToken> specials;
  for (int id = 0; id < processor_->GetPieceSize(); ++id) {
    if (!is_special(id)) continue;
    AddedToken token;
    token.id = id;
    token.content = processor_->IdToPiece(id);
    token.special = true;
    if (!token.content.empty()) specials.push_back(std::move(token));
  }
  special_pieces_ = std::make_unique<AddedVocabulary>(std::move(specials));
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::string valid = replace_invalid_utf8(text);
  std::vector<TextSegment> segments;
  special_pieces_->split(valid, /*normalized=*/false, segments);
  std::vector<int32_t> ids;
  std::vector<int> piece_ids;
  for (const TextSegment& segment : segments) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
      continue;
    }
    piece_ids.clear();
    auto status = processor_->Encode(segment.text, &piece_ids);
    if (!status.ok()) {
      throw Error(ErrorCode::kInternal, "SentencePiece encode failed: " + status.ToString());
    }
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  return ids;
}

std::string SentencePieceTokenizer::decode_pieces(const std::vector<int>& ids) const {
  std::string text;
  auto status = processor_->Decode(ids, &text);
  if (!status.ok()) {
    throw Error(ErrorCode::kInternal, "SentencePiece decode failed: " + status.ToString());
  }
  return text;
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids,
                                           bool skip_special_tokens) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "token id " + std::to_string(id) + " is not in the vocabulary");
    }
  }
  std::string text;
  std::vector<int> run;  // ordinary pieces since the last special one
  for (int32_t id : ids) {
    // Skipped special pieces vanish without splitting the text around them into runs, so the
    // text reads as if they had never been there.
    if (!is_special(id) || skip_special_tokens) {
      if (!is_special(id)) run.push_back(id);
      continue;
    }
    text += decode_pieces(run);
    run.clear();
    text += processor_->IdToPiece(id);
  }
  text += decode_pieces(run);
  return replace_invalid_utf8(text);
}

int32_t SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

std::optional<int32_t> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  int id = processor_->PieceToId(token);
  // PieceToId answers unk_id for unknown pieces; only the unk piece itself really is unk.
  if (id == processor_->unk_id() && processor_->IdToPiece(id) != token) return std::nullopt;
  return id;
}

bool SentencePieceTokenizer::is_special(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return false;
  return processor_->IsControl(id) || processor_->IsUnknown(id);
}

std::string SentencePieceTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || is_special(id)) return {};
  std::string piece = processor_->IdToPiece(id);
  if (processor_->IsByte(id)) {
    // A byte-fallback piece, written <0xAB>.
    return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
  }
  // U+2581 (LOWER ONE EIGHTH BLOCK) is SentencePiece's mark for a space.
  static constexpr std::string_view kSpaceMark = "\xE2\x96\x81";
  std::string bytes;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
      bytes += ' ';
      i += kSpaceMark.size();
    } else {
      bytes += piece[i++];
    }
  }
  return bytes;
}

}  // namespace flashq
