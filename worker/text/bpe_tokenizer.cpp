#include "worker/text/bpe_tokenizer.h"

#include <algorithm>

#include "shared/error.h"
#include "worker/text/byte_level.h"
#include "worker/text/utf8.h"

namespace flashq {
namespace {

// What Hugging Face's ByteLevel decoder makes of a token: the bytes its characters stand for, or
// the token's own UTF-8 when a character is outside the byte-level alphabet.
std::string decoded_bytes(const std::string& token) {
  if (auto bytes = byte_level_to_bytes(token)) return *std::move(bytes);
  return token;
}

}  // namespace

std::unique_ptr<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::load(
    const std::filesystem::path& path) {
  TokenizerJson spec = read_tokenizer_json(path);
  try {
    return std::make_unique<ByteLevelBpeTokenizer>(std::move(spec));
  } catch (const Error& e) {
    throw Error(e.code(), path.string() + ": " + e.what());
  }
}

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(TokenizerJson spec)
    : normalizers_(std::move(spec.normalizers)),
      added_(spec.added_tokens),
      model_(std::move(spec.vocab), spec.merges, std::move(spec.bpe_options)),
      special_prefix_(std::move(spec.special_prefix)),
      special_suffix_(std::move(spec.special_suffix)) {
  for (const std::string& pattern : spec.split_patterns) split_patterns_.emplace_back(pattern);

  int32_t max_id = -1;
  for (const auto& [token, id] : model_.vocab()) max_id = std::max(max_id, id);
  for (const AddedToken& token : spec.added_tokens) max_id = std::max(max_id, token.id);
  token_bytes_.resize(static_cast<size_t>(max_id + 1));
  known_.resize(token_bytes_.size());
  special_.resize(token_bytes_.size());
  for (const auto& [token, id] : model_.vocab()) {
    if (known_[id]) {
      throw Error(ErrorCode::kBadTokenizer, "model.vocab: id " + std::to_string(id) +
                                                " is given to two tokens");
    }
    known_[id] = true;
    token_bytes_[id] = decoded_bytes(token);
  }
  for (const AddedToken& token : spec.added_tokens) {
    auto in_vocab = model_.token_to_id(token.content);
    if (known_[token.id] && in_vocab != token.id) {
      throw Error(ErrorCode::kBadTokenizer, "added token \"" + token.content + "\" has id " +
                                                std::to_string(token.id) +
                                                ", which model.vocab gives to another token");
    }
    known_[token.id] = true;
    special_[token.id] = token.special;
    token_bytes_[token.id] = decoded_bytes(token.content);
    added_ids_[token.content] = token.id;
  }
  for (const std::vector<int32_t>* ids : {&special_prefix_, &special_suffix_}) {
    for (int32_t id : *ids) {
      if (static_cast<size_t>(id) >= known_.size() || !known_[id]) {
        throw Error(ErrorCode::kBadTokenizer, "post_processor adds id " + std::to_string(id) +
                                                  ", which is neither in model.vocab nor added");
      }
    }
  }
}

std::vector<int32_t> ByteLevelBpeTokenizer::encode_with_special_tokens(std::string_view text) const {
  std::vector<int32_t> ids = special_prefix_;
  std::vector<int32_t> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  ids.insert(ids.end(), special_suffix_.begin(), special_suffix_.end());
  return ids;
}

std::vector<int32_t> ByteLevelBpeTokenizer::encode(std::string_view text) const {
  std::string valid = replace_invalid_utf8(text);
  std::vector<TextSegment> segments;
  added_.split(valid, /*normalized=*/false, segments);
  std::vector<int32_t> ids;
  ids.reserve(valid.size() / 3 + 4);
  for (const TextSegment& segment : segments) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
    } else {
      encode_plain_text(segment.text, ids);
    }
  }
  return ids;
}

void ByteLevelBpeTokenizer::encode_plain_text(std::string_view text,
                                              std::vector<int32_t>& ids) const {
  std::string normalized(text);
  for (NormalizationForm form : normalizers_) normalized = normalize_unicode(normalized, form);
  if (!added_.has_normalized_tokens()) {
    encode_normalized_text(normalized, ids);
    return;
  }
  std::vector<TextSegment> segments;
  added_.split(normalized, /*normalized=*/true, segments);
  for (const TextSegment& segment : segments) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
    } else {
      encode_normalized_text(segment.text, ids);
    }
  }
}

void ByteLevelBpeTokenizer::encode_normalized_text(std::string_view text,
                                                   std::vector<int32_t>& ids) const {
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> refined;
  for (const SplitPattern& pattern : split_patterns_) {
    refined.clear();
    for (std::string_view piece : pieces) pattern.split_isolated(piece, refined);
    pieces.swap(refined);
  }
  std::string word;
  for (std::string_view piece : pieces) {
    word = bytes_to_byte_level(piece);
    model_.encode_word(word, ids);
  }
}

std::string ByteLevelBpeTokenizer::decode(std::span<const int32_t> ids,
                                          bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= token_bytes_.size() || !known_[id]) {
      throw Error(ErrorCode::kInvalidArgument,
                  "token id " + std::to_string(id) + " is not in the vocabulary");
    }
    if (skip_special_tokens && special_[id]) continue;
    bytes += token_bytes_[id];
  }
  return replace_invalid_utf8(bytes);
}

std::optional<int32_t> ByteLevelBpeTokenizer::token_to_id(std::string_view token) const {
  auto it = added_ids_.find(std::string(token));
  if (it != added_ids_.end()) return it->second;
  return model_.token_to_id(token);
}

bool ByteLevelBpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

std::string ByteLevelBpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= token_bytes_.size() || !known_[id] || special_[id]) return {};
  return token_bytes_[id];
}

}  // namespace flashq
