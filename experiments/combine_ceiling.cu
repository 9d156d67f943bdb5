// What decode's folded split-K combine costs per chunk, without the partial kernel around it: one warp
// per (batch, KV head) group merges C chunk states (row max m, row sum l, 128-wide acc per query row of
// the group) that sit in L2, as the last block of each group does after its arrival.
//   fragment: the combine in mma fragments (the lowering's form before lay_out_combine). Each lane
//             holds the mma.sync accumulator fragment (rows lane / 4 and lane / 4 + 8, two columns in
//             each of 16 n8 tiles), loads its elements one by one (rows beyond the group masked off),
//             the loop over chunks unrolled by 2.
//   rows:     the layout lay_out_combine gives the combine now (warp-rows tiles): lane l owns columns
//             4l .. 4l + 3 of every row of the group, one float4 load per row and chunk, UNROLL chunks
//             in flight.
// Inference from the chunk-count series at decode_gqa 1,8192 was ~1 us per chunk for the fragment form;
// this measures it. Prints microseconds per launch (median of 50, workspace in L2) for G groups.
// Build and run on an sm_90 GPU (from the repository root):
//   nvcc -O3 -arch=sm_90a -o combine_ceiling experiments/combine_ceiling.cu && ./combine_ceiling
#include <cuda_runtime.h>

#include "../test/device/cuda_check.cuh"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) NEPTUNE_CUDA_CHECK(x)

constexpr int kD = 128;

// The workspace as Neptune lays it out: chunk c, row r (of n_rows = groups * g) at c * n_rows + r.
struct Workspace {
    const float *m, *l, *acc;
    int n_rows;
};

__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float finite_or_zero(float m) { return m == -INFINITY ? 0.0f : m; }

__global__ void combine_fragment(Workspace ws, int chunks, int g, float *out) {
    const int lane = threadIdx.x, r0 = blockIdx.x * g;
    float acc[16][4], m[2], l[2];
    for (int h = 0; h < 2; ++h) m[h] = -INFINITY, l[h] = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
#pragma unroll 2
    for (int c = 0; c < chunks; ++c) {
        float mp[2], lp[2], ap[16][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = lane / 4 + 8 * h;
            mp[h] = row < g ? __ldcg(ws.m + c * ws.n_rows + r0 + row) : -INFINITY;
            lp[h] = row < g ? __ldcg(ws.l + c * ws.n_rows + r0 + row) : 0.0f;
        }
#pragma unroll
        for (int nt = 0; nt < 16; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int row = lane / 4 + 8 * (e / 2), col = 8 * nt + 2 * (lane % 4) + e % 2;
                ap[nt][e] = row < g ? __ldcg(ws.acc + (size_t(c) * ws.n_rows + r0 + row) * kD + col) : 0.0f;
            }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float mn = fmaxf(m[h], mp[h]);
            const float a = ex2((finite_or_zero(m[h]) - finite_or_zero(mn)) * 1.44269504f);
            const float b = ex2((finite_or_zero(mp[h]) - finite_or_zero(mn)) * 1.44269504f);
#pragma unroll
            for (int nt = 0; nt < 16; ++nt)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; ++e) acc[nt][e] = acc[nt][e] * a + ap[nt][e] * b;
            l[h] = l[h] * a + lp[h] * b;
            m[h] = mn;
        }
    }
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int row = lane / 4 + 8 * (e / 2), col = 8 * nt + 2 * (lane % 4) + e % 2;
            if (row < g) out[(r0 + row) * kD + col] = acc[nt][e] / l[e / 2];
        }
}

template <int G, int UNROLL>
__global__ void combine_rows(Workspace ws, int chunks, float *out) {
    const int lane = threadIdx.x, r0 = blockIdx.x * G;
    float4 acc[G];
    float m[G], l[G];
#pragma unroll
    for (int r = 0; r < G; ++r) acc[r] = make_float4(0, 0, 0, 0), m[r] = -INFINITY, l[r] = 0.0f;
#pragma unroll UNROLL
    for (int c = 0; c < chunks; ++c) {
#pragma unroll
        for (int r = 0; r < G; ++r) {
            const size_t row = size_t(c) * ws.n_rows + r0 + r;
            const float mp = __ldcg(ws.m + row), lp = __ldcg(ws.l + row);
            const float4 ap = __ldcg(reinterpret_cast<const float4 *>(ws.acc + row * kD) + lane);
            const float mn = fmaxf(m[r], mp);
            const float a = ex2((finite_or_zero(m[r]) - finite_or_zero(mn)) * 1.44269504f);
            const float b = ex2((finite_or_zero(mp) - finite_or_zero(mn)) * 1.44269504f);
            acc[r] = make_float4(acc[r].x * a + ap.x * b, acc[r].y * a + ap.y * b, acc[r].z * a + ap.z * b,
                                 acc[r].w * a + ap.w * b);
            l[r] = l[r] * a + lp * b;
            m[r] = mn;
        }
    }
#pragma unroll
    for (int r = 0; r < G; ++r) {
        const float inv = 1.0f / l[r];
        reinterpret_cast<float4 *>(out + (r0 + r) * kD)[lane] =
            make_float4(acc[r].x * inv, acc[r].y * inv, acc[r].z * inv, acc[r].w * inv);
    }
}

__global__ void fill(float *p, size_t n, float scale, float offset) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = offset + scale * float((i * 2654435761u) % 1000u) / 1000.0f;
}

template <class F>
double median_us(F launch) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < 55; ++r) {
        CHECK(cudaEventRecord(a));
        launch();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 5) t.push_back(ms);
    }
    CHECK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2] * 1e3;
}

template <int G>
void run(int groups, int chunks) {
    const int n_rows = groups * G;
    const size_t states = size_t(chunks) * n_rows;
    float *m, *l, *acc, *out_f, *out_r;
    CHECK(cudaMalloc(&m, states * 4));
    CHECK(cudaMalloc(&l, states * 4));
    CHECK(cudaMalloc(&acc, states * kD * 4));
    CHECK(cudaMalloc(&out_f, size_t(n_rows) * kD * 4));
    CHECK(cudaMalloc(&out_r, size_t(n_rows) * kD * 4));
    fill<<<256, 256>>>(m, states, 4.0f, -2.0f);
    fill<<<256, 256>>>(l, states, 1.0f, 1.0f);
    fill<<<256, 256>>>(acc, states * kD, 2.0f, -1.0f);
    const Workspace ws{m, l, acc, n_rows};
    const double frag = median_us([&] { combine_fragment<<<groups, 32>>>(ws, chunks, G, out_f); });
    const double rows2 = median_us([&] { combine_rows<G, 2><<<groups, 32>>>(ws, chunks, out_r); });
    const double rows8 = median_us([&] { combine_rows<G, 8><<<groups, 32>>>(ws, chunks, out_r); });
    // The two layouts compute the same merge: their outputs must agree (a check that the timing is of
    // real work, not of a kernel the compiler emptied).
    std::vector<float> f(size_t(n_rows) * kD), r(f.size());
    CHECK(cudaMemcpy(f.data(), out_f, f.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(r.data(), out_r, r.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t i = 0; i < f.size(); ++i) worst = std::max(worst, double(std::abs(f[i] - r[i])));
    std::printf(
        "group rows %2d  groups %3d  chunks %3d   fragment %7.2f us (%.2f per chunk)   rows x2 %7.2f us   "
        "rows x8 %7.2f us   max |fragment - rows| %.1e\n",
        G, groups, chunks, frag, frag / chunks, rows2, rows8, worst);
    CHECK(cudaFree(m));
    CHECK(cudaFree(l));
    CHECK(cudaFree(acc));
    CHECK(cudaFree(out_f));
    CHECK(cudaFree(out_r));
}

int main() {
    for (int chunks : {4, 8, 16, 32, 64}) run<4>(8, chunks);  // decode_gqa at B = 1: 8 KV heads of 4 query rows
    for (int chunks : {4, 9, 16, 32}) run<1>(32, chunks);  // decode_causal at B = 1: 32 heads, 1 row
    for (int chunks : {2, 5, 8}) run<4>(64, chunks);  // decode_gqa at B = 8
    return 0;
}
