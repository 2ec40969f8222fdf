/* The bench's denominators and numerators (model/traffic.c): the bytes a
 * decode step reads and the arithmetic of a prompt, checked against each
 * other and against counts from the config on an F32 fixture. */
#include "dsv4.h"
#include "model/model.h"
#include "test.h"

#define FX "tests/fixtures/tiny-mixed-f32"

static dsv4_model *load(void)
{
    dsv4_load_options o = {0};
    o.n_threads = 1;
    o.device = "cpu";
    dsv4_model *m = NULL;
    if (dsv4_model_load(FX, &o, &m)) printf("load %s: %s\n", FX, dsv4_last_error());
    return m;
}

static void test_prefill_flops(void)
{
    dsv4_model *m = load();
    CHECK(m != NULL);
    if (!m) return;
    const dsv4_config *c = &m->cfg;
    double a1, at1, b1, bt1, a7, at7, a6, at6;
    model_prefill_flops(m, 1, 0, &a1, &at1); /* a token row's products */
    model_prefill_flops(m, 1, 1, &b1, &bt1); /* ... and the output head's */
    /* every weight is 4 bytes and a decode step reads each weight a row
     * meets once, plus one embedding row: 2 FLOPs per value read */
    uint64_t w, s;
    model_decode_traffic(m, 0, c->n_active, &w, &s);
    CHECKF((double)w == 4.0 * c->dim + 2.0 * b1, "decode reads %llu weight bytes, the prompt's products %g FLOPs",
           (unsigned long long)w, b1);
    CHECK(b1 > a1 && a1 > 0);
    /* products grow by one row's per token; the head stays with the output rows */
    model_prefill_flops(m, 7, 1, &a7, &at7);
    model_prefill_flops(m, 6, 1, &a6, &at6);
    CHECKF(a7 - a6 == a1, "a 7th row adds %g FLOPs, one row has %g", a7 - a6, a1);
    CHECK(a7 == 7 * a1 + (b1 - a1));
    /* the first row attends to itself alone at every layer (no compressed
     * entry is complete yet): a score and a weighted sum of head_dim a head */
    CHECKF(at1 == 4.0 * c->n_layers * c->n_heads * c->head_dim, "attention of one row: %g", at1);
    CHECK(bt1 == at1);
    /* row 6 attends to 7 window keys at every layer (window >= 7), and to
     * compressed entries too where 7 rows completed one */
    CHECK(c->window >= 7);
    CHECKF(at7 - at6 >= 4.0 * c->n_layers * 7 * c->n_heads * c->head_dim, "attention of row 6: %g", at7 - at6);
    dsv4_model_free(m);
}

int main(void)
{
    RUN(test_prefill_flops);
    TEST_MAIN_END();
}
