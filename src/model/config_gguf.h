/* The model configuration from a GGUF file's metadata (llama.cpp's
 * `deepseek4` architecture keys). */
#ifndef DSV4_MODEL_CONFIG_GGUF_H
#define DSV4_MODEL_CONFIG_GGUF_H
#include "io/gguf.h"
#include "model/config.h"

/* Fails (CONFIG/UNSUPPORTED) with a message naming the key. */
dsv4_status config_from_gguf(const gguf_file *g, dsv4_config *out);

#endif
