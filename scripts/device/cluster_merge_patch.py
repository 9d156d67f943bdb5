#!/usr/bin/env python3
"""Merge a decode group's chunks through distributed shared memory, by hand, to measure the folded
combine's tail before the compiler emits another form.

  cluster_merge_patch.py DUMP.cu OUT.cu --cluster C

DUMP: a split-K decode kernel with the workspace fold (NEPTUNE_DUMP_CUDA with --cluster-merge 0, one
warp per block, head dim 128, f16 output). The emitted fold ends each block with its state stored to the
workspace, a release and an atomic arrival; the group's last block then loads every chunk's state
back from L2 and merges: about three L2 round trips after the last stream ends. Here the kernel gets
`__cluster_dims__(C, 1, 1)`, so a group's C chunk blocks (grid x) are one cluster: each block leaves
its state in its own shared memory (the K ring, free after the loop), one cluster barrier, then rank
r merges rows r, r + C, ... from every rank's shared memory (mapa, generic loads) and stores them; a
second barrier keeps every block resident while it is read. No workspace, no counter, no L2 round
trip after the stream. The launch must have exactly C chunks (the run-time rule's count: 2 at
decode_causal 8,8192, 4 at decode_gqa 8,8192; pass --chunks C to be sure); the benchmark's fp64
check still applies.
Usage on the H200 machine:
  NEPTUNE_DUMP_CUDA=/tmp/d neptune_bench profile decode_causal 8,8192 --cluster-merge 0 --no-baselines --repeat 1
  cluster_merge_patch.py /tmp/d/neptune_split_k.cu /tmp/c/neptune_split_k.cu --cluster 2
  NEPTUNE_CUDA_OVERRIDE=/tmp/c neptune_bench profile decode_causal 8,8192 --cluster-merge 0 --no-baselines
Measured (perf-log.md, session 24): 245.8 against the fold's 247.2 us at decode_causal 8,8192; the
compiler's cluster merge (the default since) 251.35 against 252.0 in another call, where this edit
gave 250.5: it merges one row with the cluster size fixed at compile time."""
import sys

from cuda_edit import block_end

MERGE = r'''{
        // cluster merge (hand edit): each block's state in its own shared memory, rank r merges rows r, r + C, ...
        float *const st_acc = reinterpret_cast<float *>(smem);  // the K ring, free after the loop
        float *const st_max = st_acc + 16 * 128;
        float *const st_sum = st_max + 16;
        __syncwarp();
        nd::store_acc_f32(st_acc, 128, acc, 16 * warp, group, 128);
        nd::store_rows(st_max, row_max, 16 * warp, group);
        nd::store_rows(st_sum, row_sum, 16 * warp, group);
        asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
        unsigned rank_;
        asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank_));
        const int lane = threadIdx.x & 31;
        for (int r = int(rank_); r < r_valid; r += CLUSTER_) {
            float m[CLUSTER_], l[CLUSTER_];
            float4 a[CLUSTER_];
            #pragma unroll
            for (int p = 0; p < CLUSTER_; ++p) {
                unsigned long long base_;
                asm volatile("mapa.u64 %0, %1, %2;" : "=l"(base_) : "l"(st_acc), "r"(unsigned(p)));
                const float *const base = reinterpret_cast<const float *>(base_);
                m[p] = base[16 * 128 + r];
                l[p] = base[16 * 128 + 16 + r];
                a[p] = *reinterpret_cast<const float4 *>(base + r * 128 + 4 * lane);
            }
            float big = m[0];
            #pragma unroll
            for (int p = 1; p < CLUSTER_; ++p) big = fmaxf(big, m[p]);
            const float big0 = big == nd::neg_inf() ? 0.0f : big;
            float sum = 0.0f;
            float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            #pragma unroll
            for (int p = 0; p < CLUSTER_; ++p) {
                const float s = m[p] == nd::neg_inf() ? 0.0f : nd::fast_exp2((m[p] - big0) * 1.44269504f);
                sum += l[p] * s;
                o.x += a[p].x * s, o.y += a[p].y * s, o.z += a[p].z * s, o.w += a[p].w * s;
            }
            const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
            uint2 packed;
            packed.x = nd::pack2<nd::f16>(o.x * inv, o.y * inv);
            packed.y = nd::pack2<nd::f16>(o.z * inv, o.w * inv);
            *reinterpret_cast<uint2 *>(out + (long long)(r0 + r) * 128 + 4 * lane) = packed;
        }
        // no block leaves while another reads its shared memory
        asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    }'''


def main(src, dst, cluster):
    s = open(src).read()
    head = "// several chunks: store the state, the last one combines"
    at = s.find(head)
    if at < 0 or "THREADS = 32;" not in s or "nd::acc_tile<1, 16> acc;" not in s or "out + (long long)((((strip * 4) + r0) * 128))" not in s:
        sys.exit(f"cluster_merge_patch: no one-warp folded combine of head dim 128 in {src}")
    open_brace = s.index("{\n", s.index("if ((!(chunks == 1)))", at))
    i = block_end(s, open_brace)
    s = s[:open_brace] + MERGE.replace("CLUSTER_", str(cluster)) + s[i + 1:]
    kernel = 'extern "C" __global__ void __launch_bounds__(32)'
    if kernel not in s:
        sys.exit("cluster_merge_patch: the kernel's declaration is not the one-warp form")
    s = s.replace(kernel, f'extern "C" __global__ void __cluster_dims__({cluster}, 1, 1) __launch_bounds__(32)', 1)
    open(dst, "w").write(s)


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) != 4 or args[2] != "--cluster" or not args[3].isdigit() or not 2 <= int(args[3]) <= 8:
        sys.exit(__doc__)
    main(args[0], args[1], int(args[3]))
