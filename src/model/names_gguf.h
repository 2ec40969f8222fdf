/* The GGUF spelling of DeepSeek-V4 tensor names (llama.cpp's `deepseek4`
 * architecture, as convert_hf_to_gguf.py writes them). */
#ifndef DSV4_MODEL_NAMES_GGUF_H
#define DSV4_MODEL_NAMES_GGUF_H
#include <stddef.h>

/* Official names of the merged expert tensors, which exist only in GGUF
 * (official checkpoints keep one tensor per expert). */
#define GGUF_EXPERTS_GATE "ffn.experts.w1"
#define GGUF_EXPERTS_UP "ffn.experts.w3"
#define GGUF_EXPERTS_DOWN "ffn.experts.w2"

/* The GGUF name of official tensor `name` under prefix pre ("", "layers.L."
 * or "mtp.0.", the MTP head: block n_layers), written to out; 0 when GGUF has
 * no such tensor. */
int gguf_spelling(const char *pre, const char *name, int n_layers, char *out, size_t n);
/* 1 for the tensors of the MTP blocks (blk.L.* with L >= n_layers). */
int gguf_is_mtp_name(const char *name, int n_layers);

#endif
