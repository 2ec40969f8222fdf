/* Byte-pair merging of one pre-tokenized word, exactly as Hugging Face
 * tokenizers' BPE model does it (no dropout): repeatedly merge the adjacent
 * pair of lowest merge rank, the leftmost one among equal ranks. */
#ifndef DSV4_TEXT_BPE_H
#define DSV4_TEXT_BPE_H
#include <stddef.h>
#include <stdint.h>

#include "dsv4.h"
#include "text/tokenizer_map.h"

/* Reusable work buffers, grown on demand; zero-initialize before first use. */
typedef struct {
    int32_t *prev, *next;
    size_t cap;
    struct bpe_cand *heap;
    size_t heap_n, heap_cap;
} bpe_scratch;

/* ids[0..*n) holds one id per byte of the word; on return it holds the merged
 * ids and *n their count. */
dsv4_status bpe_merge(const tok_pairmap *merges, int32_t *ids, size_t *n, bpe_scratch *s);
void bpe_scratch_free(bpe_scratch *s);

#endif
