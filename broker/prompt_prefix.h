// A job's prompt as the broker's prefix index keys it (docs/decisions.md, "Cache-aware routing").
// The broker sees the prompt before any tokenizer does, so it keys bytes: the prompt's text as
// is, token ids as 4 bytes each, a chat as its tools and template options and then each message's
// fields in order, with separators. That byte string is cut into blocks of kPrefixBlockBytes, and
// block i is keyed by a hash of the kind of prompt and of every byte up to the end of block i, so
// equal keys mean equal prefixes (up to a 64-bit collision, which only costs a cold cache). A
// chat's next turn extends the bytes of the previous one, so its blocks repeat the earlier keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shared/protocol/job.h"

namespace flashq {

inline constexpr std::size_t kPrefixBlockBytes = 256;

// The keys of the prompt's first whole blocks, at most `max_blocks`; a tail shorter than a block
// gets no key.
std::vector<std::uint64_t> prompt_prefix_keys(const protocol::Job& job, std::size_t max_blocks);

}  // namespace flashq
