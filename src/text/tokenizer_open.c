/* tok_load: a tokenizer from whatever the user names: a tokenizer.json, the
 * checkpoint directory holding one, or a .gguf file (its tokenizer.ggml.*
 * metadata). Above both readers, so that neither calls the other. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "io/fileio.h"
#include "text/tokenizer_internal.h"

/* DeepSeek-V4's tokenizer.json is ~8 MB; a larger file is no tokenizer. */
#define TOK_MAX_FILE_BYTES ((size_t)256 << 20)

dsv4_status tok_load(const char *path, tok_t **out)
{
    *out = NULL;
    size_t plen = strlen(path);
    if (plen > 5 && !strcmp(path + plen - 5, ".gguf")) return tok_load_gguf(path, out);
    struct stat sb;
    char *file = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? io_join(path, "tokenizer.json") : strdup(path);
    if (!file) return dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path);
    char *buf = NULL;
    size_t len = 0;
    dsv4_status st = io_read_all(file, TOK_MAX_FILE_BYTES, &buf, &len);
    if (!st) st = tok_parse(buf, len, file, out);
    free(buf);
    free(file);
    return st;
}
