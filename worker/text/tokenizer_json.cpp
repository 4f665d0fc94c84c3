#include "worker/text/tokenizer_json.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"

namespace flashq {
namespace {

using nlohmann::json;

// The pattern Hugging Face's ByteLevel pre-tokenizer uses when use_regex is true (GPT-2's).
constexpr const char* kGpt2SplitPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

const json& optional_member(const json& object, const char* name) {
  static const json kNull;
  auto it = object.find(name);
  return it == object.end() ? kNull : *it;
}

[[noreturn]] void fail_bad(const std::string& problem) {
  throw Error(ErrorCode::kBadTokenizer, problem);
}

[[noreturn]] void fail_unsupported(const std::string& key, const json& value,
                                   const std::string& implemented) {
  throw Error(ErrorCode::kUnsupported, key + " = " + value.dump() +
                                           " is not supported (implemented: " + implemented + ")");
}

const json& member(const json& object, const char* name, const std::string& where) {
  if (!object.is_object()) fail_bad(where + " is not an object");
  auto it = object.find(name);
  if (it == object.end()) fail_bad(where + "." + name + " is missing");
  return *it;
}

std::string string_member(const json& object, const char* name, const std::string& where) {
  const json& value = member(object, name, where);
  if (!value.is_string()) fail_bad(where + "." + name + " is not a string");
  return value.get<std::string>();
}

bool bool_member(const json& object, const char* name, const std::string& where,
                 bool default_value) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return default_value;
  if (!it->is_boolean()) fail_bad(where + "." + name + " is not a boolean");
  return it->get<bool>();
}

int32_t token_id(const json& value, const std::string& where) {
  if (!value.is_number_integer()) fail_bad(where + " is not an integer id");
  int64_t id = value.get<int64_t>();
  if (id < 0 || id > kMaxTokenId) {
    fail_bad(where + " = " + std::to_string(id) + " is outside 0.." + std::to_string(kMaxTokenId));
  }
  return static_cast<int32_t>(id);
}

const json& array_member(const json& object, const char* name, const std::string& where) {
  const json& value = member(object, name, where);
  if (!value.is_array()) fail_bad(where + "." + name + " is not an array");
  return value;
}

// model.vocab and model.merges hold ~150k entries each in Qwen's file. Building nlohmann's DOM for
// them (a std::map node per token) costs more than the rest of loading together, so the parser
// callback hands their entries over here and leaves model.vocab and model.merges empty.
struct BulkModelParts {
  bool vocab_seen = false;   // model.vocab was an object, its entries are in `vocab`
  bool merges_seen = false;  // model.merges was an array, its elements are in `merges`
  std::vector<std::pair<std::string, json>> vocab;
  std::vector<json> merges;
};

class BulkPartsCollector {
 public:
  explicit BulkPartsCollector(BulkModelParts& parts) : parts_(parts) {}

  // nlohmann's parser_callback_t; `depth` 1 is a key of the root object, 2 a key inside "model".
  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    using Event = json::parse_event_t;
    if (event == Event::key) {
      if (depth == 3 && collecting_ == Part::kVocab) {
        vocab_key_ = std::move(parsed.get_ref<std::string&>());
        return false;
      }
      if (depth >= 1 && depth <= 2) keys_[depth] = parsed.get<std::string>();
      return true;
    }
    bool in_model = depth >= 2 && keys_[1] == "model";
    if (event == Event::object_start && depth == 2 && in_model && keys_[2] == "vocab") {
      collecting_ = Part::kVocab;
      parts_.vocab_seen = true;
    } else if (event == Event::array_start && depth == 2 && in_model && keys_[2] == "merges") {
      collecting_ = Part::kMerges;
      parts_.merges_seen = true;
    } else if ((event == Event::object_end || event == Event::array_end) && depth == 2) {
      collecting_ = Part::kNone;
    } else if (depth == 3 && collecting_ != Part::kNone &&
               (event == Event::value || event == Event::object_end || event == Event::array_end)) {
      if (collecting_ == Part::kVocab) {
        parts_.vocab.emplace_back(std::move(vocab_key_), std::move(parsed));
      } else {
        parts_.merges.push_back(std::move(parsed));
      }
      return false;
    }
    return true;
  }

 private:
  enum class Part { kNone, kVocab, kMerges };
  BulkModelParts& parts_;
  std::string keys_[3];  // the current key at depths 1 and 2
  std::string vocab_key_;
  Part collecting_ = Part::kNone;
};

void read_normalizer(const json& node, const std::string& where, TokenizerJson& out) {
  if (node.is_null()) return;
  std::string type = string_member(node, "type", where);
  if (type == "NFC") out.normalizers.push_back(NormalizationForm::kNFC);
  else if (type == "NFD") out.normalizers.push_back(NormalizationForm::kNFD);
  else if (type == "NFKC") out.normalizers.push_back(NormalizationForm::kNFKC);
  else if (type == "NFKD") out.normalizers.push_back(NormalizationForm::kNFKD);
  else if (type == "Sequence") {
    const json& list = array_member(node, "normalizers", where);
    for (size_t i = 0; i < list.size(); ++i) {
      read_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]", out);
    }
  } else {
    fail_unsupported(where + ".type", node["type"], "NFC, NFD, NFKC, NFKD, Sequence");
  }
}

std::string escape_regex_literal(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

void read_split(const json& node, const std::string& where, TokenizerJson& out) {
  std::string behavior = string_member(node, "behavior", where);
  if (behavior != "Isolated") fail_unsupported(where + ".behavior", node["behavior"], "Isolated");
  if (bool_member(node, "invert", where, false)) {
    fail_unsupported(where + ".invert", node["invert"], "false");
  }
  const json& pattern = member(node, "pattern", where);
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    out.split_patterns.push_back(pattern["Regex"].get<std::string>());
  } else if (pattern.contains("String") && pattern["String"].is_string()) {
    out.split_patterns.push_back(escape_regex_literal(pattern["String"].get<std::string>()));
  } else {
    fail_bad(where + ".pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
  }
}

// ByteLevel must come last: it turns text into the byte-level alphabet that the model reads.
void read_pre_tokenizer(const json& node, const std::string& where, TokenizerJson& out,
                        bool& saw_byte_level) {
  if (node.is_null()) return;
  std::string type = string_member(node, "type", where);
  if (saw_byte_level) {
    fail_unsupported(where + ".type", node["type"], "nothing after ByteLevel");
  }
  if (type == "Sequence") {
    const json& list = array_member(node, "pretokenizers", where);
    for (size_t i = 0; i < list.size(); ++i) {
      read_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]", out,
                         saw_byte_level);
    }
  } else if (type == "Split") {
    read_split(node, where, out);
  } else if (type == "ByteLevel") {
    if (bool_member(node, "add_prefix_space", where, false)) {
      fail_unsupported(where + ".add_prefix_space", node["add_prefix_space"], "false");
    }
    if (bool_member(node, "use_regex", where, true)) out.split_patterns.push_back(kGpt2SplitPattern);
    saw_byte_level = true;
  } else {
    fail_unsupported(where + ".type", node["type"], "Sequence, Split, ByteLevel");
  }
}

void read_decoder(const json& node) {
  if (node.is_null()) fail_unsupported("decoder", node, "ByteLevel");
  std::string type = string_member(node, "type", "decoder");
  if (type != "ByteLevel") fail_unsupported("decoder.type", node["type"], "ByteLevel");
}

// The ids a TemplateProcessing piece stands for: a special token's "ids" from special_tokens.
std::vector<int32_t> template_special_ids(const json& node, const json& special_tokens,
                                          const std::string& where) {
  std::string name = string_member(node, "id", where);
  if (!special_tokens.is_object() || !special_tokens.contains(name)) {
    fail_bad(where + ".id = \"" + name + "\" is not in special_tokens");
  }
  const json& ids = array_member(special_tokens[name], "ids", "special_tokens[\"" + name + "\"]");
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    out.push_back(token_id(ids[i], "special_tokens[\"" + name + "\"].ids[" + std::to_string(i) + "]"));
  }
  return out;
}

// Only the "single" template is read: encode takes one text, never a pair.
void read_template_processing(const json& node, const std::string& where, TokenizerJson& out) {
  const json& single = array_member(node, "single", where);
  const json& special_tokens = optional_member(node, "special_tokens");
  bool saw_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    std::string piece_where = where + ".single[" + std::to_string(i) + "]";
    const json& piece = single[i];
    if (piece.is_object() && piece.contains("SpecialToken")) {
      std::vector<int32_t> ids =
          template_special_ids(piece["SpecialToken"], special_tokens, piece_where + ".SpecialToken");
      std::vector<int32_t>& side = saw_sequence ? out.special_suffix : out.special_prefix;
      side.insert(side.end(), ids.begin(), ids.end());
    } else if (piece.is_object() && piece.contains("Sequence")) {
      std::string id = string_member(piece["Sequence"], "id", piece_where + ".Sequence");
      if (id != "A" || saw_sequence) {
        fail_unsupported(piece_where + ".Sequence.id", piece["Sequence"]["id"], "\"A\", once");
      }
      saw_sequence = true;
    } else {
      fail_bad(piece_where + " is neither {\"SpecialToken\": ...} nor {\"Sequence\": ...}");
    }
  }
  if (!saw_sequence) fail_bad(where + ".single has no {\"Sequence\": {\"id\": \"A\"}}");
}

// What encode with special tokens adds around the text. ByteLevel as a post-processor only
// trims offsets, which encode does not report, so it adds nothing.
void read_post_processor(const json& node, const std::string& where, TokenizerJson& out) {
  if (node.is_null()) return;
  std::string type = string_member(node, "type", where);
  if (type == "Sequence") {
    const json& list = array_member(node, "processors", where);
    for (size_t i = 0; i < list.size(); ++i) {
      read_post_processor(list[i], where + ".processors[" + std::to_string(i) + "]", out);
    }
  } else if (type == "TemplateProcessing") {
    if (!out.special_prefix.empty() || !out.special_suffix.empty()) {
      fail_unsupported(where + ".type", node["type"], "one TemplateProcessing");
    }
    read_template_processing(node, where, out);
  } else if (type != "ByteLevel") {
    fail_unsupported(where + ".type", node["type"], "ByteLevel, TemplateProcessing, Sequence");
  }
}

std::pair<std::string, std::string> read_merge(json& merge, size_t index) {
  auto where = [index] { return "model.merges[" + std::to_string(index) + "]"; };
  if (merge.is_string()) {
    const std::string& text = merge.get_ref<const std::string&>();
    size_t space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
      fail_bad(where() + " = \"" + text + "\" is not two tokens separated by one space");
    }
    return {text.substr(0, space), text.substr(space + 1)};
  }
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return {std::move(merge[0].get_ref<std::string&>()), std::move(merge[1].get_ref<std::string&>())};
  }
  fail_bad(where() + " is neither \"a b\" nor [\"a\", \"b\"]");
}

void read_model(const json& node, BulkModelParts& parts, TokenizerJson& out) {
  const std::string where = "model";
  if (!node.is_object()) fail_bad("model is missing or not an object");
  std::string type = node.contains("type") ? string_member(node, "type", where) : "BPE";
  if (type != "BPE") fail_unsupported("model.type", node["type"], "BPE");
  if (node.contains("dropout") && !node["dropout"].is_null() &&
      !(node["dropout"].is_number() && node["dropout"].get<double>() == 0.0)) {
    fail_unsupported("model.dropout", node["dropout"], "null");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (node.contains(key) && !node[key].is_null() && node[key] != "") {
      fail_unsupported(std::string("model.") + key, node[key], "\"\" or null");
    }
  }
  if (bool_member(node, "byte_fallback", where, false)) {
    fail_unsupported("model.byte_fallback", node["byte_fallback"], "false");
  }
  if (node.contains("unk_token") && !node["unk_token"].is_null()) {
    out.bpe_options.unk_token = string_member(node, "unk_token", where);
  }
  out.bpe_options.fuse_unk = bool_member(node, "fuse_unk", where, false);
  out.bpe_options.ignore_merges = bool_member(node, "ignore_merges", where, false);

  if (!parts.vocab_seen) {
    member(node, "vocab", where);
    fail_bad("model.vocab is not an object");
  }
  out.vocab.reserve(parts.vocab.size());
  for (auto& [token, id] : parts.vocab) {
    bool plain_id = id.is_number_unsigned() && id.get<uint64_t>() <= kMaxTokenId;
    // The message is built only for a bad entry: the vocabulary has ~150k of them.
    int32_t value = plain_id ? static_cast<int32_t>(id.get<uint64_t>())
                             : token_id(id, "model.vocab[\"" + token + "\"]");
    if (!out.vocab.emplace(std::move(token), value).second) {
      fail_bad("model.vocab lists a token twice");
    }
  }
  if (!parts.merges_seen) {
    member(node, "merges", where);
    fail_bad("model.merges is not an array");
  }
  out.merges.reserve(parts.merges.size());
  for (size_t i = 0; i < parts.merges.size(); ++i) out.merges.push_back(read_merge(parts.merges[i], i));
}

void read_added_tokens(const json& root, TokenizerJson& out) {
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return;
  if (!it->is_array()) fail_bad("added_tokens is not an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& node = (*it)[i];
    std::string where = "added_tokens[" + std::to_string(i) + "]";
    AddedToken token;
    token.id = token_id(member(node, "id", where), where + ".id");
    token.content = string_member(node, "content", where);
    if (token.content.empty()) fail_bad(where + ".content is empty");
    token.special = bool_member(node, "special", where, false);
    token.normalized = bool_member(node, "normalized", where, !token.special);
    token.lstrip = bool_member(node, "lstrip", where, false);
    token.rstrip = bool_member(node, "rstrip", where, false);
    token.single_word = bool_member(node, "single_word", where, false);
    out.added_tokens.push_back(std::move(token));
  }
}

}  // namespace

TokenizerJson parse_tokenizer_json(std::string text, const std::string& label) {
  BulkModelParts parts;
  json root;
  try {
    root = json::parse(text, BulkPartsCollector(parts));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kBadTokenizer, label + ": invalid JSON: " + e.what());
  }
  text = std::string();
  TokenizerJson out;
  try {
    if (!root.is_object()) fail_bad("not a JSON object");
    read_normalizer(optional_member(root, "normalizer"), "normalizer", out);
    bool saw_byte_level = false;
    read_pre_tokenizer(optional_member(root, "pre_tokenizer"), "pre_tokenizer", out, saw_byte_level);
    if (!saw_byte_level) {
      throw Error(ErrorCode::kUnsupported,
                  "pre_tokenizer has no ByteLevel step; only byte-level BPE is implemented");
    }
    read_decoder(optional_member(root, "decoder"));
    read_model(optional_member(root, "model"), parts, out);
    read_added_tokens(root, out);
    read_post_processor(optional_member(root, "post_processor"), "post_processor", out);
    // truncation and padding only shape batches; encode works on one text, so they are not read.
  } catch (const Error& e) {
    throw Error(e.code(), label + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kBadTokenizer, label + ": " + e.what());
  }
  return out;
}

TokenizerJson read_tokenizer_json(const std::filesystem::path& path) {
  return parse_tokenizer_json(read_text_file(path), path.string());
}

}  // namespace flashq
