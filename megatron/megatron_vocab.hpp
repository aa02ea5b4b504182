#pragma once
/// Megatron-LM's vocabulary padding, shared by the argument reader and writer.

namespace lynx::megatron {

/// GPT-2 BPE's vocabulary (Megatron-LM's GPT2BPETokenizer, its GPT examples' tokenizer).
inline constexpr int kGpt2BpeVocab = 50257;
/// Megatron-LM's default --make-vocab-size-divisible-by.
inline constexpr int kMegatronVocabDivisibleBy = 128;

/// The vocabulary Megatron-LM allocates: `vocab` rounded up to a multiple of divisible_by × tp
/// (megatron/training/tokenizer: _vocab_size_with_padding).
constexpr int padded_vocab(int vocab, int divisible_by, int tp) {
  const int multiple = divisible_by * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

}  // namespace lynx::megatron
