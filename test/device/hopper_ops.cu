/** \file
 * GPU test of the device library's Hopper instructions (hopper.cuh), each against a CPU reference:
 * TMA tile copies into the 128-byte swizzle (addressing, zero fill past a plane's rows), wgmma with
 * both operands from swizzled shared tiles (S = Q K^T: K-major descriptors, one and two
 * warpgroups, zero-init and accumulate), and wgmma with A from registers and B MN-major (O += P V:
 * the leading offset across 64-column blocks). Built for sm_90a; exits 77 (skip) without an sm_90
 * device. Ends with "hopper ops: N checks passed". */
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#include "cuda_check.cuh"
#include "neptune/Half.h"
#include "neptune/device/neptune_device.cuh"
#include "neptune/runtime/NeptuneRuntime.h"

namespace {

namespace nd = neptune::device;


/** Dynamic shared memory from a 1024-byte aligned address (swizzle and TMA need it; the launch asks
 * for 1024 bytes more), with an mbarrier in front of the tiles. */
struct Smem {
    unsigned long long *bar;
    unsigned char *tiles;
};
__device__ Smem aligned_smem() {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *p = smem_raw + ((1024u - (nd::smem_address(smem_raw) & 1023u)) & 1023u);
    return {reinterpret_cast<unsigned long long *>(p), p + 1024};
}
constexpr int smem_extra = 2048;

template <typename T>
float to_float(T x) {
    return std::is_same_v<T, nd::f16> ? neptune::f16_to_float(x.bits) : neptune::bf16_to_float(x.bits);
}
template <typename T>
T from_float(float x) {
    return {std::is_same_v<T, nd::f16> ? neptune::float_to_f16(x) : neptune::float_to_bf16(x)};
}
template <typename T>
const char *type_name() {
    return std::is_same_v<T, nd::f16> ? "f16" : "bf16";
}

class Checker {
public:
    void expect(bool ok, const char *what, double got, double want) {
        if (ok) {
            passed_++;
            return;
        }
        failed_++;
        if (failed_ <= 20) std::printf("FAIL %s: got %.6g, want %.6g\n", what, got, want);
    }
    int passed() const { return passed_; }
    int failed() const { return failed_; }

private:
    int passed_ = 0, failed_ = 0;
};

/** A device copy of `planes` x `rows` x `cols` random elements, with its TMA descriptor for boxes of
 * box_rows x 64. */
template <typename T>
struct DeviceTensor {
    std::vector<T> host;
    T *dev = nullptr;
    nd::tensor_map map{};

    DeviceTensor(std::mt19937 &rng, int planes, int rows, int cols, int box_rows) : host(size_t(planes) * rows * cols) {
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (T &x : host) x = from_float<T>(normal(rng));
        NEPTUNE_CUDA_CHECK(cudaMalloc(&dev, host.size() * sizeof(T)));
        NEPTUNE_CUDA_CHECK(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
        const unsigned long long dims[3] = {unsigned(cols), unsigned(rows), unsigned(planes)};
        const unsigned long long strides[2] = {2ull * cols, 2ull * cols * rows};
        const unsigned box[2] = {64, unsigned(box_rows)};
        if (neptune_tensor_map_encode(&map, dev, 2, dims, strides, box) != NEPTUNE_OK) {
            std::fprintf(stderr, "neptune_tensor_map_encode: %s\n", neptune_last_error());
            std::_Exit(1);
        }
    }
    ~DeviceTensor() { cudaFree(dev); }
    float at(int plane, int rows, int cols, int r, int c) const {
        return to_float(host[(size_t(plane) * rows + r) * cols + c]);
    }
};

// ---- Kernels -------------------------------------------------------------------------------------

/** Thread 0 issues the copy of (row0, plane) and everyone waits; the tile is then read back through
 * swizzled_tile::at, so out[r][c] must be the tensor's element (or 0 past its rows). */
template <typename T, int ROWS, int COLS>
__global__ void tma_tile_kernel(const __grid_constant__ nd::tensor_map map, int row0, int plane, T *out) {
    const Smem sm = aligned_smem();
    const nd::swizzled_tile<T, ROWS, COLS> tile{reinterpret_cast<T *>(sm.tiles)};
    if (threadIdx.x == 0) {
        nd::mbarrier_init(sm.bar, 1);
        nd::fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        nd::mbarrier_arrive_expect_tx(sm.bar, ROWS * COLS * sizeof(T));
        nd::tma_load_tile(tile, map, row0, plane, sm.bar);
    }
    nd::mbarrier_wait(sm.bar, 0);
    for (int i = threadIdx.x; i < ROWS * COLS; i += blockDim.x) out[i] = *tile.at(i / COLS, i % COLS);
}

/** out = a b^T (+ 1 where `accumulate`), one warpgroup per 64 rows of a. */
template <typename T, int RA, int N, int K>
__global__ void wgmma_abt_kernel(const __grid_constant__ nd::tensor_map a_map, const __grid_constant__ nd::tensor_map b_map,
                                 bool accumulate, float *out) {
    const Smem sm = aligned_smem();
    const nd::swizzled_tile<T, RA, K> a{reinterpret_cast<T *>(sm.tiles)};
    const nd::swizzled_tile<T, N, K> b{reinterpret_cast<T *>(sm.tiles + nd::swizzled_tile<T, RA, K>::bytes)};
    if (threadIdx.x == 0) {
        nd::mbarrier_init(sm.bar, 1);
        nd::fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        nd::mbarrier_arrive_expect_tx(sm.bar, (RA + N) * K * sizeof(T));
        nd::tma_load_tile(a, a_map, 0, 0, sm.bar);
        nd::tma_load_tile(b, b_map, 0, 0, sm.bar);
    }
    nd::mbarrier_wait(sm.bar, 0);
    const int warp = nd::warp_id();
    nd::acc_tile<1, N / 8> c;
    nd::fill(c, 1.0f);
    nd::wgmma_abt(c, a, 64 * (warp / 4), b, accumulate);
    nd::wgmma_wait<0>();
    nd::fence_registers(c);
    nd::store_acc_f32(out, N, c, 16 * warp, RA, N);
}

/** out = a v for one warpgroup: a (64 x 16 KT) from a row-major shared tile through ldmatrix (the
 * register A operand), v the first 16 KT rows of a swizzled RV x N tile. */
template <typename T, int KT, int RV, int N>
__global__ void wgmma_ab_kernel(const T *a_global, const __grid_constant__ nd::tensor_map v_map, float *out) {
    const Smem sm = aligned_smem();
    const nd::swizzled_tile<T, RV, N> v{reinterpret_cast<T *>(sm.tiles)};
    const nd::smem_tile<T, 64, 16 * KT> a_s{reinterpret_cast<T *>(sm.tiles + nd::swizzled_tile<T, RV, N>::bytes)};
    if (threadIdx.x == 0) {
        nd::mbarrier_init(sm.bar, 1);
        nd::fence_barrier_init();
    }
    nd::load_tile_sync<128>(a_s, a_global, 16 * KT, 64, 16 * KT);
    __syncthreads();
    if (threadIdx.x == 0) {
        nd::mbarrier_arrive_expect_tx(sm.bar, RV * N * sizeof(T));
        nd::tma_load_tile(v, v_map, 0, 0, sm.bar);
    }
    const int warp = nd::warp_id();
    nd::a_tile<T, 1, KT> a;
    nd::load_a(a, a_s, 16 * warp);
    nd::mbarrier_wait(sm.bar, 0);
    nd::acc_tile<1, N / 8> c;
    nd::wgmma_ab(c, a, v, false);
    nd::wgmma_wait<0>();
    nd::fence_registers(c);
    nd::store_acc_f32(out, N, c, 16 * warp, 64, N);
}

template <typename K>
void allow_smem(K kernel, int bytes) {
    NEPTUNE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// ---- Tests ---------------------------------------------------------------------------------------

template <typename T, int ROWS, int COLS>
void test_tma(Checker &ck, std::mt19937 &rng) {
    std::printf("tma %s %dx%d\n", type_name<T>(), ROWS, COLS);
    std::fflush(stdout);
    const int planes = 3, rows = 100;
    DeviceTensor<T> t(rng, planes, rows, COLS, ROWS);
    std::fprintf(stderr, "  tensor and map ready\n");
    T *out = nullptr;
    NEPTUNE_CUDA_CHECK(cudaMalloc(&out, ROWS * COLS * sizeof(T)));
    const int smem = nd::swizzled_tile<T, ROWS, COLS>::bytes + smem_extra;
    allow_smem(tma_tile_kernel<T, ROWS, COLS>, smem);
    for (const auto &[row0, plane] : {std::pair{0, 0}, std::pair{64, 1}, std::pair{40, 2}}) {
        std::fprintf(stderr, "  launch row %d plane %d\n", row0, plane);
        tma_tile_kernel<T, ROWS, COLS><<<1, 128, smem>>>(t.map, row0, plane, out);
        sync_launch();
        std::fprintf(stderr, "  done\n");
        std::vector<T> got(ROWS * COLS);
        NEPTUNE_CUDA_CHECK(cudaMemcpy(got.data(), out, got.size() * sizeof(T), cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) {
                const float want = row0 + r < rows ? t.at(plane, rows, COLS, row0 + r, c) : 0.0f;
                bad += to_float(got[r * COLS + c]) != want;
            }
        char what[128];
        std::snprintf(what, sizeof what, "tma %s %dx%d tile at row %d of plane %d: wrong elements", type_name<T>(), ROWS,
                      COLS, row0, plane);
        ck.expect(bad == 0, what, bad, 0);
    }
    cudaFree(out);
}

template <typename T, int RA, int N, int K>
void test_wgmma_abt(Checker &ck, std::mt19937 &rng, bool accumulate) {
    std::printf("wgmma ss %s %d x %d x %d\n", type_name<T>(), RA, N, K);
    std::fflush(stdout);
    DeviceTensor<T> a(rng, 1, RA, K, RA), b(rng, 1, N, K, N);
    float *out = nullptr;
    NEPTUNE_CUDA_CHECK(cudaMalloc(&out, RA * N * sizeof(float)));
    const int smem = nd::swizzled_tile<T, RA, K>::bytes + nd::swizzled_tile<T, N, K>::bytes + smem_extra;
    allow_smem(wgmma_abt_kernel<T, RA, N, K>, smem);
    wgmma_abt_kernel<T, RA, N, K><<<1, 128 * (RA / 64), smem>>>(a.map, b.map, accumulate, out);
    sync_launch();
    std::vector<float> got(RA * N);
    NEPTUNE_CUDA_CHECK(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int m = 0; m < RA; m++)
        for (int n = 0; n < N; n++) {
            double want = accumulate ? 1.0 : 0.0;
            for (int k = 0; k < K; k++) want += double(a.at(0, RA, K, m, k)) * b.at(0, N, K, n, k);
            worst = std::max(worst, std::fabs(got[m * N + n] - want));
        }
    char what[128];
    std::snprintf(what, sizeof what, "wgmma ss %s a[%d x %d] b^T[%d x %d]%s: max abs error", type_name<T>(), RA, K, N, K,
                  accumulate ? " + 1" : "");
    ck.expect(worst < 1e-3 * std::sqrt(double(K)), what, worst, 0);
    cudaFree(out);
}

template <typename T, int KT, int RV, int N>
void test_wgmma_ab(Checker &ck, std::mt19937 &rng) {
    std::printf("wgmma rs %s 64 x %d x %d\n", type_name<T>(), N, 16 * KT);
    std::fflush(stdout);
    constexpr int K = 16 * KT;
    DeviceTensor<T> a(rng, 1, 64, K, 64), v(rng, 1, RV, N, RV);
    float *out = nullptr;
    NEPTUNE_CUDA_CHECK(cudaMalloc(&out, 64 * N * sizeof(float)));
    const int smem = nd::swizzled_tile<T, RV, N>::bytes + nd::smem_tile<T, 64, K>::bytes + smem_extra;
    allow_smem(wgmma_ab_kernel<T, KT, RV, N>, smem);
    wgmma_ab_kernel<T, KT, RV, N><<<1, 128, smem>>>(a.dev, v.map, out);
    sync_launch();
    std::vector<float> got(64 * N);
    NEPTUNE_CUDA_CHECK(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int m = 0; m < 64; m++)
        for (int n = 0; n < N; n++) {
            double want = 0;
            for (int k = 0; k < K; k++) want += double(a.at(0, 64, K, m, k)) * v.at(0, RV, N, k, n);
            worst = std::max(worst, std::fabs(got[m * N + n] - want));
        }
    char what[128];
    std::snprintf(what, sizeof what, "wgmma rs %s a[64 x %d] v[%d x %d] (MN-major): max abs error", type_name<T>(), K, K, N);
    ck.expect(worst < 1e-3 * std::sqrt(double(K)), what, worst, 0);
    cudaFree(out);
}

template <typename T>
void test_type(Checker &ck, std::mt19937 &rng) {
    test_tma<T, 64, 128>(ck, rng);
    test_tma<T, 128, 64>(ck, rng);
    test_wgmma_abt<T, 64, 64, 64>(ck, rng, false);
    test_wgmma_abt<T, 128, 128, 128>(ck, rng, false);
    test_wgmma_abt<T, 128, 128, 128>(ck, rng, true);
    test_wgmma_abt<T, 64, 64, 256>(ck, rng, true);
    test_wgmma_ab<T, 8, 128, 128>(ck, rng);
    test_wgmma_ab<T, 4, 128, 64>(ck, rng);
    test_wgmma_ab<T, 8, 128, 256>(ck, rng);
}

}  // namespace

int main() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::puts("[SKIP] no CUDA device");
        return 77;
    }
    cudaDeviceProp prop;
    NEPTUNE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9 || prop.minor != 0) {
        std::printf("[SKIP] %s is sm_%d%d; wgmma and TMA need sm_90\n", prop.name, prop.major, prop.minor);
        return 77;
    }
    std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    Checker ck;
    std::mt19937 rng(20261201);
    test_type<nd::f16>(ck, rng);
    test_type<nd::bf16>(ck, rng);
    if (ck.failed() > 0) {
        std::printf("hopper ops: %d checks passed, %d FAILED\n", ck.passed(), ck.failed());
        return 1;
    }
    std::printf("hopper ops: %d checks passed\n", ck.passed());
    return 0;
}
