/* The tensor catalog: every weight tensor of the model written once — its
 * names in each spelling, where it exists, its shape over the config, which
 * formats its slot accepts and whether a decode step reads it whole. The
 * binder, the adoption onto a backend and the traffic count loop over it.
 * Routed experts (per expert or merged) and tid2eid have their own code in
 * weights.c: their storage varies beyond a name. */
#ifndef DSV4_MODEL_CATALOG_H
#define DSV4_MODEL_CATALOG_H
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* Where a tensor exists. The drafter's own tensors, present when the
 * checkpoint has one: CAT_MTP the MTP head's input fusion (under "mtp.0."),
 * CAT_DRAFT_HEAD its own hc head and norm (the MTP's "mtp.0.", DSpark's last
 * stage), CAT_DSPARK_IN DSpark's context fusion ("mtp.0."), CAT_DSPARK_OUT
 * its Markov and confidence heads (last stage). The drafter's blocks
 * (layers[n_layers ..]) take the per-layer entries (CAT_LAYER ..) like any
 * layer. */
enum {
    CAT_TOP, CAT_MTP, CAT_DRAFT_HEAD, CAT_DSPARK_IN, CAT_DSPARK_OUT,
    CAT_LAYER, CAT_COMP /* CSA and HCA layers */, CAT_CSA, CAT_ROUTED /* non-hash layers */
};

/* Dimensions, evaluated over the config and the layer (catalog_dim). */
enum {
    DM_NONE, DM_1, DM_3, DM_VOCAB, DM_DIM, DM_HC, DM_HC_DIM, DM_MIX, DM_QLORA, DM_HD, DM_HEADS, DM_HEADS_HD,
    DM_OA_ROWS, DM_OA_COLS, DM_COMP_W, DM_RATIO, DM_IDX_HD, DM_IDX_W, DM_IDX_Q, DM_IDX_HEADS, DM_EXPERTS, DM_INTER,
    DM_DSPARK_CTX /* L·D */, DM_MARKOV /* R */, DM_CONF_IN /* D + R */
};

/* Formats a slot accepts besides plain floats. */
enum { Q_PLAIN, Q_DENSE /* a matmul weight: FP8 e4m3 with a block grid */, Q_EXPERT /* routed: MXFP4 or FP8 */ };

typedef struct {
    const char *name[3];  /* official, transformers, a third spelling (save_pretrained); NULL-padded */
    int where;            /* CAT_* */
    size_t off;           /* of its dsv4_mat in dsv4_model (where < CAT_LAYER) or dsv4_layer_w */
    int d0, d1;           /* DM_*; d1 DM_NONE: 1-D */
    int quant;            /* Q_* */
    int per_step;         /* 1: a decode step reads all of it (traffic) */
} cat_tensor;

extern const cat_tensor k_catalog[];
extern const int k_catalog_count;

/* Layers l run 0..n_layers + n_draft - 1, from n_layers the drafter's blocks. */
int64_t catalog_dim(const dsv4_config *c, int layer, int dm);
/* 1 when t is a per-layer tensor (where >= CAT_LAYER). */
int catalog_per_layer(const cat_tensor *t);
/* 1 when per-layer tensor t exists in layer l (others: 1). */
int catalog_present(const dsv4_config *c, int l, const cat_tensor *t);
/* Its slot in m (layer l for per-layer tensors). */
dsv4_mat *catalog_slot(dsv4_model *m, int l, const cat_tensor *t);

#endif
