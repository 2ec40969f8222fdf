/* Memory planning arithmetic on hand-computed cases. */
#include <stdint.h>

#include "model/memplan.h"
#include "test.h"

#define GiB (1ull << 30)

static void test_plan(void)
{
    /* 100 GiB weights, 1 GiB reserve, 140 GiB device: 39 GiB for sessions of
     * 1 MiB fixed + 2048 bytes per token */
    memplan p = {100 * GiB, 1u << 20, 2048.0, 140 * GiB, GiB, 1 << 20};
    CHECK(memplan_session_bytes(&p, 0) == 1u << 20);
    CHECK(memplan_session_bytes(&p, 1000) == (1u << 20) + 2048000u);
    int64_t want = (int64_t)((39 * GiB - (1u << 20)) / 2048);
    CHECK(memplan_max_context(&p) == (want < (1 << 20) ? want : (1 << 20)));
    CHECK(memplan_sessions(&p, 65536) == (int64_t)(39 * GiB / ((1u << 20) + 65536u * 2048u)));
    p.max_pos = 1000;
    CHECK(memplan_max_context(&p) == 1000);
    /* weights alone do not fit */
    p.weights = 140 * GiB;
    CHECK(memplan_max_context(&p) == 0 && memplan_sessions(&p, 16) == 0);
    /* fractional bytes per token: the limit is exact at the edge */
    memplan q = {0, 10, 2.5, 110, 0, 1000};
    CHECK(memplan_max_context(&q) == 40); /* 10 + ceil(2.5 * 40) = 110 */
    CHECK(memplan_session_bytes(&q, 41) == 113 && memplan_sessions(&q, 4) == 5);
}

int main(void)
{
    RUN(test_plan);
    TEST_MAIN_END();
}
