/* libFuzzer harness: any byte string as a GGUF file image. Accepted files
 * are walked end to end (every metadata value, every tensor's first and last
 * byte, the first block of every decodable tensor dequantized) so that
 * anything pointing outside the input shows up as an ASan error; then the
 * deepseek4 config and the tokenizer are built from the metadata (each
 * either succeeds or says why). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/ggml_quant.h"
#include "io/gguf.h"
#include "model/config_gguf.h"
#include "text/tokenizer_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_file *g = NULL;
    if (gguf_open_memory(data, size, "fuzz", &g) != DSV4_OK) {
        if (g || !dsv4_last_error()[0]) abort(); /* failures must say why */
        return 0;
    }
    volatile double sink = 0;
    for (int i = 0; i < gguf_kv_count(g); i++) {
        const gguf_kv *kv = gguf_kv_at(g, i);
        if (gguf_find_kv(g, kv->key) != kv) abort();
        for (uint64_t j = 0; j < kv->count; j++) {
            int64_t v;
            double d;
            if (gguf_kv_int(kv, j, &v)) sink += (double)v;
            if (gguf_kv_num(kv, j, &d)) sink += d;
            if (kv->strs && kv->strs[j].len) sink += kv->strs[j].s[0] + kv->strs[j].s[kv->strs[j].len - 1];
        }
    }
    float block[256];
    for (int i = 0; i < gguf_tensor_count(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (gguf_find_tensor(g, t->name) != t || t->ndim < 1 || t->ndim > GGUF_MAX_DIMS || !t->nbytes) abort();
        const uint8_t *p = t->data;
        sink += p[0] + p[t->nbytes - 1];
        const ggml_type_info *ti = ggml_type_get(t->type);
        if (ti->decodable) {
            ggml_dequant_blocks(t->type, t->data, 1, block);
            sink += block[0];
        }
    }
    (void)sink;
    dsv4_config cfg;
    if (config_from_gguf(g, &cfg) != DSV4_OK && !dsv4_last_error()[0]) abort();
    tok_t *tok = NULL;
    if (tok_from_gguf(g, &tok) == DSV4_OK) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tok_encode(tok, "Hello <x> 123", 13, TOK_PARSE_SPECIAL, &ids, &n) == DSV4_OK) free(ids);
        tok_free(tok);
    } else if (!dsv4_last_error()[0]) {
        abort();
    }
    gguf_close(g);
    return 0;
}
