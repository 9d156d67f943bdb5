/* libneptune_ops.so from C (C99): the header compiles as C, the variant table reads, the host
 * log-sum-exp of two rows matches values computed by hand, and a refusal has its status and message. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "neptune/NeptuneOps.h"

static int failures = 0;
#define EXPECT(cond)                                                           \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("FAILED: %s (line %d): %s\n", #cond, __LINE__, neptune_ops_last_error()); \
            failures++;                                                        \
        }                                                                      \
    } while (0)

int main(void) {
    EXPECT(neptune_ops_abi_version() == NEPTUNE_OPS_ABI_VERSION);
    int host_lse = 0, i;
    for (i = 0; i < neptune_ops_num_variants(); i++) {
        neptune_ops_variant v;
        EXPECT(neptune_ops_get_variant(i, &v) == NEPTUNE_OPS_OK);
        if (strcmp(v.op, "logsumexp") == 0 && v.device == NEPTUNE_OPS_HOST) host_lse = 1;
    }
    EXPECT(host_lse);

    /* x = [[0, 0, 0, 0], [1, 0, 0, 0]] in f16 bits (1.0 is 0x3C00): lse = ln 4 and ln(e + 3). */
    unsigned short x[8] = {0, 0, 0, 0, 0x3C00, 0, 0, 0};
    float lse[2] = {0.0f, 0.0f};
    neptune_ops_tensor tx = {0}, tl = {0};
    tx.data = x;
    tx.dtype = NEPTUNE_OPS_F16;
    tx.device = NEPTUNE_OPS_HOST;
    tx.ndim = 2;
    tx.abi = NEPTUNE_OPS_ABI_VERSION;
    tx.shape[0] = 2;
    tx.shape[1] = 4;
    tl.data = lse;
    tl.dtype = NEPTUNE_OPS_F32;
    tl.device = NEPTUNE_OPS_HOST;
    tl.ndim = 1;
    tl.abi = NEPTUNE_OPS_ABI_VERSION;
    tl.shape[0] = 2;
    EXPECT(neptune_ops_logsumexp(&tx, &tl, NULL) == NEPTUNE_OPS_OK);
    EXPECT(fabs(lse[0] - log(4.0)) < 1e-5);
    EXPECT(fabs(lse[1] - log(exp(1.0) + 3.0)) < 1e-5);

    tl.shape[0] = 3;
    EXPECT(neptune_ops_logsumexp(&tx, &tl, NULL) == NEPTUNE_OPS_ERROR_SHAPE);
    EXPECT(strstr(neptune_ops_last_error(), "logsumexp: output lse has shape [3], expected [2]") != NULL);
    EXPECT(neptune_ops_logsumexp(NULL, &tl, NULL) == NEPTUNE_OPS_ERROR_ARGUMENT);
    /* A caller built against version 1 (no abi field, no strides) leaves 0 there. */
    tl.shape[0] = 2;
    tx.abi = 0;
    EXPECT(neptune_ops_logsumexp(&tx, &tl, NULL) == NEPTUNE_OPS_ERROR_ARGUMENT);
    EXPECT(strstr(neptune_ops_last_error(), "logsumexp: x has abi 0, expected 2") != NULL);
    printf("%s\n", failures ? "FAILED" : "Success!");
    return failures ? 1 : 0;
}
