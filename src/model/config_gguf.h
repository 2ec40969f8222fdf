/* The model configuration from a GGUF file's metadata (llama.cpp's
 * `deepseek4` architecture keys). */
#ifndef DSV4_MODEL_CONFIG_GGUF_H
#define DSV4_MODEL_CONFIG_GGUF_H
#include "io/gguf.h"
#include "io/gguf_write.h"
#include "model/config.h"

/* Fails (CONFIG/UNSUPPORTED) with a message naming the key. */
dsv4_status config_from_gguf(const gguf_file *g, dsv4_config *out);
/* The metadata config_from_gguf reads back as c (floats as f32, as llama.cpp
 * writes them), for n_layers + n_mtp blocks (n_mtp: the MTP blocks the
 * image will hold, 0 or c->n_mtp). A file's CSA layers are those with an
 * indexer: the caller writes their tensors. UNSUPPORTED for what GGUF cannot
 * say (hash layers other than the first ones, YaRN on the main rope). */
dsv4_status config_to_gguf(const dsv4_config *c, int n_mtp, gguf_writer *w);

/* What a GGUF file's tokenizer.chat_template is. It is never executed: chats
 * are rendered by the engine's own DeepSeek-V4 encoder (text/chat.h). */
enum { CHAT_TEMPLATE_NONE, CHAT_TEMPLATE_V4, CHAT_TEMPLATE_OTHER };
int gguf_chat_template_kind(const gguf_file *g);

/* The configuration of a model path: a checkpoint directory (config.json)
 * or a GGUF file / split set (its metadata). chat_template (may be NULL)
 * receives CHAT_TEMPLATE_* for GGUF files, -1 for directories. */
dsv4_status config_load_model(const char *path, dsv4_config *out, int *chat_template);
/* 1 when path names a GGUF file (NAME.gguf, a regular file). */
int model_path_is_gguf(const char *path);

#endif
