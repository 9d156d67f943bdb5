// The table of libneptune_ops.so's AOT libraries (Libraries.h). prefill_gqa is prefill_causal with
// other head counts, which are run-time extents: it shares prefill_causal's libraries. Decode
// libraries are compiled for their operator's grouping (decode_gqa 8, decode_softcap 2, else 1).
// cross_entropy's GPU library runs Neptune's kernels, which give a NaN loss for a label out of range
// (a kernel cannot raise the algorithm's error); its host library raises the error.
#include "ops/Libraries.h"

#include "cross_entropy.h"
#include "cross_entropy_host.h"
#include "decode_alibi.h"
#include "decode_alibi_host.h"
#include "decode_causal.h"
#include "decode_causal_host.h"
#include "decode_gqa.h"
#include "decode_gqa_host.h"
#include "decode_softcap.h"
#include "decode_softcap_host.h"
#include "layernorm.h"
#include "layernorm_host.h"
#include "logsumexp.h"
#include "logsumexp_host.h"
#include "neptune/NeptuneOps.h"
#include "performer.h"
#include "performer_host.h"
#include "prefill_alibi.h"
#include "prefill_alibi_host.h"
#include "prefill_causal.h"
#include "prefill_causal_host.h"
#include "prefill_global.h"
#include "prefill_global_host.h"
#include "prefill_softcap.h"
#include "prefill_softcap_host.h"
#include "prefill_windowed.h"
#include "prefill_windowed_host.h"
#include "rmsnorm.h"
#include "rmsnorm_host.h"
#include "softmax.h"
#include "softmax_host.h"

namespace neptune::ops {

#define GPU_LIBRARY(lib, op) \
    { #lib, op, NEPTUNE_OPS_CUDA, &lib##_argv, &lib##_metadata }
#define HOST_LIBRARY(lib, op) \
    { #lib, op, NEPTUNE_OPS_HOST, &lib##_argv, &lib##_metadata }

const std::vector<Library> &libraries() {
    static const std::vector<Library> table = {
        GPU_LIBRARY(prefill_global, "prefill_global"),
        HOST_LIBRARY(prefill_global_host, "prefill_global"),
        GPU_LIBRARY(prefill_causal, "prefill_causal"),
        HOST_LIBRARY(prefill_causal_host, "prefill_causal"),
        GPU_LIBRARY(prefill_alibi, "prefill_alibi"),
        HOST_LIBRARY(prefill_alibi_host, "prefill_alibi"),
        GPU_LIBRARY(prefill_causal, "prefill_gqa"),
        HOST_LIBRARY(prefill_causal_host, "prefill_gqa"),
        GPU_LIBRARY(prefill_softcap, "prefill_softcap"),
        HOST_LIBRARY(prefill_softcap_host, "prefill_softcap"),
        GPU_LIBRARY(prefill_windowed, "prefill_windowed"),
        HOST_LIBRARY(prefill_windowed_host, "prefill_windowed"),
        GPU_LIBRARY(decode_causal, "decode_causal"),
        HOST_LIBRARY(decode_causal_host, "decode_causal"),
        GPU_LIBRARY(decode_alibi, "decode_alibi"),
        HOST_LIBRARY(decode_alibi_host, "decode_alibi"),
        GPU_LIBRARY(decode_gqa, "decode_gqa"),
        HOST_LIBRARY(decode_gqa_host, "decode_gqa"),
        GPU_LIBRARY(decode_softcap, "decode_softcap"),
        HOST_LIBRARY(decode_softcap_host, "decode_softcap"),
        GPU_LIBRARY(softmax, "softmax"),
        HOST_LIBRARY(softmax_host, "softmax"),
        GPU_LIBRARY(logsumexp, "logsumexp"),
        HOST_LIBRARY(logsumexp_host, "logsumexp"),
        GPU_LIBRARY(cross_entropy, "cross_entropy"),
        HOST_LIBRARY(cross_entropy_host, "cross_entropy"),
        GPU_LIBRARY(layernorm, "layernorm"),
        HOST_LIBRARY(layernorm_host, "layernorm"),
        GPU_LIBRARY(rmsnorm, "rmsnorm"),
        HOST_LIBRARY(rmsnorm_host, "rmsnorm"),
        GPU_LIBRARY(performer, "performer"),
        HOST_LIBRARY(performer_host, "performer"),
    };
    return table;
}

}  // namespace neptune::ops
