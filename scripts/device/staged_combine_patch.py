#!/usr/bin/env python3
"""Stage the folded combine's partials in shared memory, by hand, to measure it before the compiler
emits it.

  staged_combine_patch.py DUMP.cu OUT.cu [--unroll1] [--stamps]

DUMP: a split-K decode kernel with the workspace fold (NEPTUNE_DUMP_CUDA with --cluster-merge 0, head
dim 128, f16 output). The emitted combine merges the chunks online, four at a time: each group of four is
one round of L2 loads followed by four dependent merges, so a group's last block pays chunks / 4
round trips after its stream (per-block timelines, session 23: 8.2 us of a 23 us launch at
decode_gqa 1,8192 with 16 chunks). Here the last block copies every chunk's partial rows into the
ring (free after the KV loop) with cp.async in one wave, loads the row maxima and sums beside them,
then merges from shared memory against the maximum over all chunks: one round trip, and no
dependent rescale chain. Run the result with NEPTUNE_CUDA_OVERRIDE=<folder of OUT.cu>; the
benchmark's fp64 check still applies. The ring must hold chunks x rows x 512 bytes (decode_gqa
2,8191's 2-stage ring of 32-key tiles does not hold 16 chunks of 4 rows; nothing checks it).
Measured (perf-log.md, session 23): the staged form is slower than the emitted one (27.0 against
25.7 us at decode_gqa 1,8192); its stamps show a lone warp's latency, not memory, as the cost.
Usage on the H200 machine, per shape:
  NEPTUNE_DUMP_CUDA=/tmp/d neptune_bench profile decode_gqa 1,8192 --cluster-merge 0 --no-baselines --repeat 1
  staged_combine_patch.py /tmp/d/neptune_split_k.cu /tmp/f/neptune_split_k.cu --fast
  NEPTUNE_CUDA_OVERRIDE=/tmp/f neptune_bench profile decode_gqa 1,8192 --no-baselines --repeat 100
--fast: one bulk copy per chunk, the maxima, factors and sums with a lane per (chunk, row), the merge
from shared memory only (at most 128 (chunk, row) pairs). Session 24: wrong at decode_gqa (groups of 8
rows: relative RMS 1.7, a bug of this edit), right and 1.7 % faster at decode_causal 1,8192.
--unroll1: no loop of the staged combine unrolled (the least code for the tail to fetch).
--stamps: the combining blocks of launch 6 print %globaltimer stamps (start, copies issued, copies
landed, merged) and the SM's clock64 at the same points as STAMP lines (NVRTC only: the override)."""
import re
import sys

from cuda_edit import block_end

STAGED = r'''{
            // staged combine (hand edit): every chunk's rows of the group into the free ring at once
            STAMP(0)
            float *const acc_st = reinterpret_cast<float *>(smem);
            const int per_chunk4 = r_valid * 32;  // float4s of one chunk's rows (head dim 128)
            const int n4 = chunks * per_chunk4;
            for (int i = threadIdx.x; i < n4; i += 32) {
                const int p = i / per_chunk4, j = i - p * per_chunk4;
                nd::cp_async_16(nd::smem_address(acc_st + 4 * i), ws_acc + (long long)(n_rows * p + r0) * 128 + 4 * j, 16);
            }
            nd::cp_async_commit();
            STAMP(1)
            float *const m_st = acc_st + 4 * n4;
            float *const l_st = m_st + chunks * r_valid;
            for (int i = threadIdx.x; i < chunks * r_valid; i += 32) {
                const int p = i / r_valid, r = i - p * r_valid;
                m_st[i] = __ldcg(ws_row_max + n_rows * p + r0 + r);
                l_st[i] = __ldcg(ws_row_sum + n_rows * p + r0 + r);
            }
            nd::cp_async_wait<0>();
            __syncwarp();
            STAMP(2)
            for (int r = 0; r < r_valid; ++r) {
                float big = nd::neg_inf();
                for (int p = 0; p < chunks; ++p) big = fmaxf(big, m_st[p * r_valid + r]);
                const float big0 = big == nd::neg_inf() ? 0.0f : big;
                float sum = 0.0f;
                float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                for (int p = 0; p < chunks; ++p) {
                    const float mp = m_st[p * r_valid + r];
                    const float s = mp == nd::neg_inf() ? 0.0f : nd::fast_exp2((mp - big0) * 1.44269504f);
                    sum += l_st[p * r_valid + r] * s;
                    const float4 x = *reinterpret_cast<const float4 *>(acc_st + 4 * ((p * r_valid + r) * 32 + threadIdx.x));
                    a.x += x.x * s, a.y += x.y * s, a.z += x.z * s, a.w += x.w * s;
                }
                const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
                uint2 packed;
                packed.x = nd::pack2<nd::f16>(a.x * inv, a.y * inv);
                packed.y = nd::pack2<nd::f16>(a.z * inv, a.w * inv);
                *reinterpret_cast<uint2 *>(out + (long long)(r0 + r) * 128 + 4 * threadIdx.x) = packed;
            }
            STAMP(3)
            STAMP_PRINT
        }'''


FAST = r'''{
            // fast staged combine (hand edit): one bulk copy per chunk into the free ring; the maxima,
            // factors and sums with a lane per (chunk, row); the merge reads shared memory only.
            __shared__ unsigned long long cb_bar_;
            float *const acc_st = reinterpret_cast<float *>(smem);
            const int pairs = chunks * r_valid;           // (chunk, row) pairs, p * r_valid + r
            float *const m_st = acc_st + (long long)pairs * 128;
            float *const w_st = m_st + pairs;             // factor of pair i
            float *const sum_st = w_st + pairs;           // per row: the sum's final value
            const int lane = threadIdx.x;
            if (lane == 0) {
                nd::mbarrier_init(&cb_bar_, 1);
                nd::fence_barrier_init();
                nd::fence_proxy_async();  // the ring's last reads (generic) before the copies' writes (async)
                nd::mbarrier_arrive_expect_tx(&cb_bar_, unsigned(pairs) * 512u);
                for (int p = 0; p < chunks; ++p)
                    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                                 :: "r"(nd::smem_address(acc_st + (long long)p * r_valid * 128)),
                                    "l"(ws_acc + (long long)(n_rows * p + r0) * 128), "r"(unsigned(r_valid) * 512u),
                                    "r"(nd::smem_address(&cb_bar_)) : "memory");
            }
            float mv[4], lv[4];
            #pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int i = lane + 32 * k, p = i / r_valid, r = i - p * r_valid;
                mv[k] = i < pairs ? __ldcg(ws_row_max + n_rows * p + r0 + r) : nd::neg_inf();
                lv[k] = i < pairs ? __ldcg(ws_row_sum + n_rows * p + r0 + r) : 0.0f;
                if (i < pairs) m_st[i] = mv[k];
            }
            __syncwarp();
            #pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int i = lane + 32 * k, r = i % r_valid;
                if (i >= pairs) continue;
                float big = nd::neg_inf();
                #pragma unroll 8
                for (int p = 0; p < chunks; ++p) big = fmaxf(big, m_st[p * r_valid + r]);
                const float big0 = big == nd::neg_inf() ? 0.0f : big;
                const float w = mv[k] == nd::neg_inf() ? 0.0f : nd::fast_exp2((mv[k] - big0) * 1.44269504f);
                w_st[i] = w;
                m_st[i] = lv[k] * w;  // reused: the pair's share of the row's sum
            }
            __syncwarp();
            if (lane < r_valid) {
                float sum = 0.0f;
                #pragma unroll 8
                for (int p = 0; p < chunks; ++p) sum += m_st[p * r_valid + lane];
                sum_st[lane] = sum;
            }
            nd::mbarrier_wait(&cb_bar_, 0);
            __syncwarp();
            for (int r = 0; r < r_valid; ++r) {
                float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                #pragma unroll 8
                for (int p = 0; p < chunks; ++p) {
                    const float w = w_st[p * r_valid + r];
                    const float4 x = *reinterpret_cast<const float4 *>(acc_st + 4 * ((p * r_valid + r) * 32 + lane));
                    a.x += x.x * w, a.y += x.y * w, a.z += x.z * w, a.w += x.w * w;
                }
                const float sum = sum_st[r];
                const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
                uint2 packed;
                packed.x = nd::pack2<nd::f16>(a.x * inv, a.y * inv);
                packed.y = nd::pack2<nd::f16>(a.z * inv, a.w * inv);
                *reinterpret_cast<uint2 *>(out + (long long)(r0 + r) * 128 + 4 * lane) = packed;
            }
        }'''


STAMP_HEAD = r'''
#ifdef __CUDACC_RTC__
extern "C" __device__ int vprintf(const char *format, const char *args);  // printf without <cstdio>
#endif
__device__ unsigned long long staged_blocks_;
__device__ __forceinline__ unsigned long long staged_now_() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
'''


def main(src, dst, unroll1=False, stamps=False, fast=False):
    s = open(src).read()
    head = "if (nd::last_arrival("
    at = s.find(head)
    if at < 0 or "THREADS = 32;" not in s or "ws_acc" not in s:
        sys.exit(f"staged_combine_patch: no one-warp folded combine in {src}")
    open_brace = s.index("{\n", at)
    i = block_end(s, open_brace)
    if fast:  # pairs up to 128 (4 per lane), shared memory for the rows of every chunk
        open(dst, "w").write(s[:open_brace] + FAST + s[i + 1:])
        return
    body = STAGED
    if unroll1:
        body = body.replace("            for (", "            #pragma unroll 1\n            for (")
        body = body.replace("                for (", "                #pragma unroll 1\n                for (")
    if stamps:
        body = body.replace("STAMP_PRINT", "if (threadIdx.x == 0 && staged_launch_ == 6) { unsigned long long d_[9] = "
                            "{(unsigned long long)blockIdx.y, st_[0], st_[1], st_[2], st_[3], ck_[0], ck_[1], ck_[2], ck_[3]}; "
                            "vprintf(\"STAMP %llu %llu %llu %llu %llu %llu %llu %llu %llu\\n\", reinterpret_cast<const char *>(d_)); }")
        body = re.sub(r"STAMP\((\d)\)", r"st_[\1] = staged_now_(); ck_[\1] = clock64();", body)
        body = body.replace("            st_[0] = staged_now_();", "            unsigned long long st_[4]; long long ck_[4];\n            st_[0] = staged_now_();")
        s = s[:open_brace] + body + s[i + 1:]
        k = s.index("extern __shared__")
        k = s.index("\n", k) + 1
        s = (s[:k] + "    unsigned long long staged_launch_ = 0;\n    if (threadIdx.x == 0) staged_launch_ = "
             "atomicAdd(&staged_blocks_, 1ull) / (unsigned long long)(gridDim.x * gridDim.y * gridDim.z);\n" + s[k:])
        g = s.index('extern "C" __global__')
        s = s[:g] + STAMP_HEAD + s[g:]
        open(dst, "w").write(s)
        return
    body = re.sub(r"\s*STAMP\(\d\)|\s*STAMP_PRINT", "", body)
    open(dst, "w").write(s[:open_brace] + body + s[i + 1:])


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2 or any(a not in ("--unroll1", "--stamps", "--fast") for a in sys.argv[1:] if a.startswith("--")):
        sys.exit(__doc__)
    main(args[0], args[1], "--unroll1" in sys.argv, "--stamps" in sys.argv, "--fast" in sys.argv)
