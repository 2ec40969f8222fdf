#include "io/tensor_source.h"

#include <string.h>

#include "base/ggml_quant.h"

int tsrc_count(const tensor_source *s) { return s->st ? st_count(s->st) : gguf_tensor_count(s->gg); }

uint64_t tsrc_mapped_bytes(const tensor_source *s)
{
    return s->st ? st_mapped_bytes(s->st) : gguf_mapped_bytes(s->gg);
}

/* ggml scalar types that are also dtypes here */
static int dtype_of_ggml(uint32_t t)
{
    switch (t) {
    case GGML_F32: return DT_F32;
    case GGML_F16: return DT_F16;
    case GGML_BF16: return DT_BF16;
    case GGML_I8: return DT_I8;
    case GGML_I16: return DT_I16;
    case GGML_I32: return DT_I32;
    case GGML_I64: return DT_I64;
    case GGML_F64: return DT_F64;
    default: return -1;
    }
}

int tsrc_get(const tensor_source *s, int i, src_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (s->st) {
        const st_tensor *t = st_get(s->st, i);
        if (!t) return 0;
        out->name = t->name;
        out->ndim = t->ndim;
        memcpy(out->shape, t->shape, sizeof out->shape);
        out->data = t->data;
        out->nbytes = t->nbytes;
        out->dtype = t->dtype;
        out->fmt = wformat_of_dtype(t->dtype);
        out->type = dtype_name(t->dtype);
        return 1;
    }
    const gguf_tensor *t = gguf_tensor_at(s->gg, i);
    if (!t) return 0;
    out->name = t->name;
    out->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) out->shape[d] = t->shape[d];
    out->data = t->data;
    out->nbytes = t->nbytes;
    out->fmt = wformat_of_ggml(t->type);
    int dt = dtype_of_ggml(t->type);
    out->dtype = dt >= 0 ? (dsv4_dtype)dt : out->fmt >= 0 ? DT_U8 : DT_COUNT;
    out->type = ggml_type_get(t->type)->name;
    return 1;
}

int tsrc_find(const tensor_source *s, const char *name, src_tensor *out)
{
    int i;
    if (s->st) {
        const st_tensor *t = st_find(s->st, name);
        i = t ? (int)(t - st_get(s->st, 0)) : -1;
    } else {
        const gguf_tensor *t = gguf_find_tensor(s->gg, name);
        i = t ? (int)(t - gguf_tensor_at(s->gg, 0)) : -1;
    }
    if (i >= 0) tsrc_get(s, i, out);
    return i;
}
