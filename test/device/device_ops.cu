/** \file
 * GPU test of the device library (include/neptune/device/): every op on random data with fixed
 * seeds against a CPU reference in double, then an FA2-style attention forward kernel written with
 * the library (attention_fwd.cuh), checked on a ragged causal and non-causal problem and timed.
 * Exits 77 (skip) without a usable GPU; ends with "device ops: N checks passed". */
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_fwd.cuh"
#include "cuda_check.cuh"
#include "neptune/Half.h"
#include "op_kernels.cuh"

namespace {

namespace nd = neptune::device;
namespace dt = neptune::device_test;

// ---- Element types on the host ----------------------------------------------------------------

/** Names, rounding and conversions of the two element types on the host. */
template <typename T>
struct host_type {
    static constexpr bool half = std::is_same_v<T, nd::f16>;
    static constexpr const char *name = half ? "f16" : "bf16";
    static constexpr double unit_roundoff = half ? 1.0 / 2048 : 1.0 / 256;  // 2^-11, 2^-8
    static T from(float x) { return {half ? neptune::float_to_f16(x) : neptune::float_to_bf16(x)}; }
    static float to(T x) { return half ? neptune::f16_to_float(x.bits) : neptune::bf16_to_float(x.bits); }
};

/** Attention output tolerances per element type: P and O are rounded to T, so both scale with
 * T's unit roundoff (P's rounding errors largely cancel in the weighted sum). */
struct attention_tolerance {
    double max_abs, rel_rms;
};
template <typename T>
constexpr attention_tolerance attention_tol = {12 * host_type<T>::unit_roundoff, 4 * host_type<T>::unit_roundoff};

template <typename T>
std::vector<T> to_type(const std::vector<float> &x) {
    std::vector<T> r(x.size());
    std::transform(x.begin(), x.end(), r.begin(), host_type<T>::from);
    return r;
}
template <typename T>
std::vector<double> to_double(const std::vector<T> &x) {
    std::vector<double> r(x.size());
    std::transform(x.begin(), x.end(), r.begin(), [](T e) { return static_cast<double>(host_type<T>::to(e)); });
    return r;
}
std::vector<double> to_double(const std::vector<float> &x) { return {x.begin(), x.end()}; }
/** The bit patterns, for exact comparisons that also cover poison values. */
template <typename T>
std::vector<double> bits_of(const std::vector<T> &x) {
    std::vector<double> r(x.size());
    std::transform(x.begin(), x.end(), r.begin(), [](T e) { return static_cast<double>(e.bits); });
    return r;
}

std::vector<float> random_floats(std::mt19937 &rng, size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> r(n);
    for (float &x : r) x = dist(rng);
    return r;
}
/** Random values that T represents exactly, so that host and device start from the same numbers. */
template <typename T>
std::vector<float> random_exact(std::mt19937 &rng, size_t n, float lo, float hi) {
    std::vector<float> r = random_floats(rng, n, lo, hi);
    for (float &x : r) x = host_type<T>::to(host_type<T>::from(x));
    return r;
}

// ---- Device buffers ---------------------------------------------------------------------------

template <typename T>
class device_buffer {
public:
    explicit device_buffer(size_t n) : n_(n) { NEPTUNE_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T))); }
    explicit device_buffer(const std::vector<T> &host) : device_buffer(host.size()) {
        NEPTUNE_CUDA_CHECK(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    }
    device_buffer(const device_buffer &) = delete;
    device_buffer &operator=(const device_buffer &) = delete;
    ~device_buffer() { cudaFree(p_); }
    T *get() const { return p_; }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        NEPTUNE_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
        return host;
    }

private:
    T *p_ = nullptr;
    size_t n_;
};

// ---- Comparison -------------------------------------------------------------------------------

/** Element i passes when |actual - expected| <= abs + rel * |expected| (equal infinities pass);
 * the whole comparison also needs rms(error) <= rel_rms * rms(expected). */
struct tolerance {
    double abs = 0, rel = 0, rel_rms = std::numeric_limits<double>::infinity();
};

class checker {
public:
    void close(const std::string &what, const std::vector<double> &actual, const std::vector<double> &expected,
               tolerance tol) {
        if (actual.size() != expected.size()) return fail(what + ": size mismatch");
        size_t bad = 0, first_bad = 0, worst = 0;
        double max_err = 0, err2 = 0, ref2 = 0;
        for (size_t i = 0; i < actual.size(); ++i) {
            const double a = actual[i], e = expected[i];
            // a == e covers equal infinities; a NaN on either side is an infinite error.
            const double err = a == e ? 0.0 : std::isnan(a) || std::isnan(e) ? HUGE_VAL : std::fabs(a - e);
            if (err > tol.abs + tol.rel * std::fabs(e) && bad++ == 0) first_bad = i;
            if (err > max_err || (i == 0)) max_err = err, worst = i;
            if (std::isfinite(e)) err2 += err * err, ref2 += e * e;
        }
        const double rel_rms = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
        char line[512];
        if (bad == 0 && rel_rms <= tol.rel_rms) {
            std::snprintf(line, sizeof line, "ok    %s (max error %.3g, relative RMS %.3g)", what.c_str(), max_err,
                          rel_rms);
            ++passed_;
            std::puts(line);
            return;
        }
        std::snprintf(line, sizeof line,
                      "FAIL  %s: %zu of %zu elements out of tolerance, first [%zu] expected %.9g got %.9g; "
                      "worst [%zu] expected %.9g got %.9g; relative RMS %.3g (allowed %.3g)",
                      what.c_str(), bad, actual.size(), first_bad, expected[first_bad], actual[first_bad], worst,
                      expected[worst], actual[worst], rel_rms, tol.rel_rms);
        fail(line);
    }
    void expect(bool ok, const std::string &what) {
        if (!ok) return fail("FAIL  " + what);
        ++passed_;
        std::printf("ok    %s\n", what.c_str());
    }
    int passed() const { return passed_; }
    int failed() const { return failed_; }

private:
    void fail(const std::string &line) {
        ++failed_;
        std::puts(line.c_str());
    }
    int passed_ = 0, failed_ = 0;
};

std::string shape_name(const char *op, const char *type, std::initializer_list<int> dims) {
    std::string s = std::string(op) + " " + type;
    const char *sep = " <";
    for (int d : dims) s += sep + std::to_string(d), sep = ",";
    return s + ">";
}

// ---- Op tests ---------------------------------------------------------------------------------

/** mma_abt (AB false) or mma_ab (AB true) after load_tile_sync and load_a, read back with
 * store_acc_f32 and store_acc<T>. Products of T values are exact in f32, so the f32 result only
 * carries accumulation rounding; the T result adds one rounding. */
template <typename T, int WARPS, int MT, int NT, int KT, bool AB, bool SWIZZLED = false>
void test_mma(checker &ck, std::mt19937 &rng, int b_row0, int b_col0) {
    using shape = dt::mma_shape<T, WARPS, MT, NT, KT, AB, SWIZZLED>;
    const std::vector<float> a = random_exact<T>(rng, size_t(shape::m) * shape::k, -1, 1);
    const std::vector<float> b = random_exact<T>(rng, size_t(shape::b_rows) * shape::b_cols, -1, 1);
    device_buffer<T> a_d(to_type<T>(a)), b_d(to_type<T>(b)), c16_d(size_t(shape::m) * shape::n);
    device_buffer<float> c32_d(size_t(shape::m) * shape::n);
    dt::mma_kernel<T, WARPS, MT, NT, KT, AB, SWIZZLED>
        <<<1, 32 * WARPS>>>(a_d.get(), b_d.get(), c32_d.get(), c16_d.get(), b_row0, b_col0);
    sync_launch();

    std::vector<double> ref(size_t(shape::m) * shape::n);
    for (int i = 0; i < shape::m; ++i)
        for (int j = 0; j < shape::n; ++j) {
            double sum = 1.0;  // the kernel's fill
            for (int k = 0; k < shape::k; ++k) {
                const size_t bi =
                    AB ? size_t(b_row0 + k) * shape::b_cols + b_col0 + j : size_t(b_row0 + j) * shape::b_cols + k;
                sum += double(a[size_t(i) * shape::k + k]) * b[bi];
            }
            ref[size_t(i) * shape::n + j] = sum;
        }
    const std::string name =
        shape_name(AB ? (SWIZZLED ? "mma_ab swizzled" : "mma_ab") : (SWIZZLED ? "mma_abt swizzled" : "mma_abt"),
                   host_type<T>::name, {WARPS, MT, NT, KT, b_row0, b_col0});
    ck.close(name + " f32", to_double(c32_d.download()), ref, {2e-4, 0});
    ck.close(name + " as T", to_double(c16_d.download()), ref, {2e-4, host_type<T>::unit_roundoff});
}

/** load_tile_async / load_tile_sync into a poisoned tile: valid chunks are copied, masked ones are
 * zero, the padding columns keep the poison, and threads at or beyond THREADS write nothing. */
template <typename T, int THREADS, int ROWS, int COLS, bool ASYNC>
void test_load(checker &ck, std::mt19937 &rng, int valid_rows, int valid_cols, int row_stride) {
    using tile = nd::smem_tile<T, ROWS, COLS>;
    const std::vector<T> src = to_type<T>(random_floats(rng, size_t(ROWS) * row_stride, 1, 2));  // never 0
    device_buffer<T> src_d(src), out_d(size_t(ROWS) * tile::pitch);
    dt::load_kernel<T, THREADS, ROWS, COLS, ASYNC>
        <<<1, THREADS + 32>>>(src_d.get(), row_stride, valid_rows, valid_cols, out_d.get());
    sync_launch();

    std::vector<T> expected(size_t(ROWS) * tile::pitch);
    for (int r = 0; r < ROWS; ++r)
        for (int c = 0; c < tile::pitch; ++c) {
            T &e = expected[size_t(r) * tile::pitch + c];
            if (c >= COLS)
                e.bits = dt::poison_bits;
            else
                e = r < valid_rows && c / 8 * 8 < valid_cols ? src[size_t(r) * row_stride + c] : T{0};
        }
    const std::string name = shape_name(ASYNC ? "load_tile_async" : "load_tile_sync", host_type<T>::name,
                                        {THREADS, ROWS, COLS, valid_rows, valid_cols});
    ck.close(name + " bits", bits_of(out_d.download()), bits_of(expected), {});
}

/** load_tile_async / load_tile_sync into a poisoned swizzled tile, read back through at(): valid
 * chunks are copied, masked ones are zero, and no element is left poisoned or written twice. */
template <typename T, int THREADS, int ROWS, int COLS, bool ASYNC>
void test_load_swizzled(checker &ck, std::mt19937 &rng, int valid_rows, int valid_cols, int row_stride) {
    const std::vector<T> src = to_type<T>(random_floats(rng, size_t(ROWS) * row_stride, 1, 2));  // never 0
    device_buffer<T> src_d(src), out_d(size_t(ROWS) * COLS);
    dt::load_swizzled_kernel<T, THREADS, ROWS, COLS, ASYNC>
        <<<1, THREADS + 32>>>(src_d.get(), row_stride, valid_rows, valid_cols, out_d.get());
    sync_launch();

    std::vector<T> expected(size_t(ROWS) * COLS);
    for (int r = 0; r < ROWS; ++r)
        for (int c = 0; c < COLS; ++c)
            expected[size_t(r) * COLS + c] =
                r < valid_rows && c / 8 * 8 < valid_cols ? src[size_t(r) * row_stride + c] : T{0};
    const std::string name = shape_name(ASYNC ? "load_tile_async swizzled" : "load_tile_sync swizzled",
                                        host_type<T>::name, {THREADS, ROWS, COLS, valid_rows, valid_cols});
    ck.close(name + " bits", bits_of(out_d.download()), bits_of(expected), {});
}

/** row_max and row_sum with -inf entries (a row of only -inf, initial maxima of -inf and above
 * the row's), and the exp2(s - m) map between them. */
template <int MT, int NT>
void test_reduce(checker &ck, std::mt19937 &rng) {
    constexpr int M = 16 * MT, N = 8 * NT;
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> in = random_floats(rng, size_t(M) * N, -8, 8);
    for (float &x : in) x = std::round(x * 64) / 64;  // multiples of 2^-6: f32 sums of a row are exact
    for (size_t i = 0; i < in.size(); i += 3) in[i] = -inf;
    std::fill(in.begin() + 3 * N, in.begin() + 4 * N, -inf);  // row 3: nothing but -inf, with m_init -inf
    std::fill(in.begin() + 6 * N, in.begin() + 7 * N, -inf);  // row 6: nothing but -inf, with a finite m_init
    std::vector<float> m_init = random_floats(rng, M, -4, 4), l_init = random_floats(rng, M, 0, 2);
    for (float &x : l_init) x = std::round(x * 64) / 64;
    for (int r = 1; r < M; r += 2) m_init[size_t(r)] = -inf;
    m_init[3] = -inf;
    m_init[7] = 100;  // above every entry of row 7

    device_buffer<float> in_d(in), m_init_d(m_init), l_init_d(l_init);
    device_buffer<float> m_d(M), l_raw_d(M), p_d(size_t(M) * N), l_d(M);
    dt::reduce_kernel<MT, NT>
        <<<1, 32>>>(in_d.get(), m_init_d.get(), l_init_d.get(), m_d.get(), l_raw_d.get(), p_d.get(), l_d.get());
    sync_launch();

    std::vector<double> m(M), l_raw(M), p(size_t(M) * N), l(M);
    for (int r = 0; r < M; ++r) {
        double mx = m_init[size_t(r)], sum = l_init[size_t(r)];
        for (int c = 0; c < N; ++c) mx = std::max(mx, double(in[size_t(r) * N + c])), sum += in[size_t(r) * N + c];
        m[size_t(r)] = mx, l_raw[size_t(r)] = sum, l[size_t(r)] = l_init[size_t(r)];
        const double bias = std::isinf(mx) ? 0.0 : mx;
        for (int c = 0; c < N; ++c) {
            const double e = std::exp2(in[size_t(r) * N + c] - bias);
            p[size_t(r) * N + c] = e, l[size_t(r)] += e;
        }
    }
    const std::string name = shape_name("reduce", "f32", {MT, NT});
    ck.close(name + " row_max", to_double(m_d.download()), m, {});
    ck.close(name + " row_sum of raw scores", to_double(l_raw_d.download()), l_raw, {});
    ck.close(name + " map_rows exp2(s - m)", to_double(p_d.download()), p, {1e-30, 1e-6});  // ex2.approx: 2 ulp
    ck.close(name + " row_sum of exp2", to_double(l_d.download()), l, {0, 1e-5});
}

/** map's coordinates, and acc_to_a checked by the tensor cores: (acc_to_a(x)) times the identity
 * must be x rounded to T, element for element. */
template <typename T, int MT, int NT>
void test_layout(checker &ck, std::mt19937 &rng) {
    constexpr int M = 16 * MT, N = 8 * NT;
    const std::vector<float> in = random_floats(rng, size_t(M) * N, -3, 3);
    device_buffer<float> in_d(in), mapped_d(size_t(M) * N), trip_d(size_t(M) * N);
    dt::layout_kernel<T, MT, NT><<<1, 32>>>(in_d.get(), mapped_d.get(), trip_d.get());
    sync_launch();

    std::vector<double> mapped(size_t(M) * N), trip(size_t(M) * N);
    for (size_t i = 0; i < mapped.size(); ++i) {
        mapped[i] = 0.5 + double(i);  // i = r * N + col
        trip[i] = host_type<T>::to(host_type<T>::from(in[i]));
    }
    const std::string name = shape_name("layout", host_type<T>::name, {MT, NT});
    ck.close(name + " map coordinates", to_double(mapped_d.download()), mapped, {});
    ck.close(name + " acc_to_a round trip", to_double(trip_d.download()), trip, {});
}

/** store_acc, store_acc_f32 and store_rows into poisoned outputs, at a row offset, with masked rows
 * and an odd number of valid columns (a lone element at the edge): everything masked keeps its poison. */
template <typename T, int MT, int NT>
void test_store(checker &ck, std::mt19937 &rng) {
    constexpr int M = 16 * MT, N = 8 * NT, row0 = 5, stride = N + 6, rows = row0 + M + 2;
    constexpr int valid_rows = row0 + M - 3, valid_cols = N - 3;
    constexpr float poison = -12345.0f;
    const std::vector<float> in = random_floats(rng, size_t(M) * N, -3, 3);
    const T poison16 = {dt::poison_bits};
    device_buffer<float> in_d(in);
    device_buffer<T> out16_d(std::vector<T>(size_t(rows) * stride, poison16));
    device_buffer<float> out32_d(std::vector<float>(size_t(rows) * stride, poison));
    device_buffer<float> rows_d(std::vector<float>(rows, poison));
    dt::store_kernel<T, MT, NT>
        <<<1, 32>>>(in_d.get(), out16_d.get(), out32_d.get(), rows_d.get(), stride, row0, valid_rows, valid_cols);
    sync_launch();

    std::vector<T> out16(size_t(rows) * stride, poison16);
    std::vector<float> out32(size_t(rows) * stride, poison), row_max(rows, poison);
    for (int r = 0; r < M && row0 + r < valid_rows; ++r) {
        row_max[size_t(row0 + r)] = *std::max_element(in.begin() + r * N, in.begin() + (r + 1) * N);
        for (int c = 0; c < valid_cols; ++c) {
            out32[size_t(row0 + r) * stride + c] = in[size_t(r) * N + c];
            // Host and device both round to nearest even, so the bits match.
            out16[size_t(row0 + r) * stride + c] = host_type<T>::from(in[size_t(r) * N + c]);
        }
    }
    const std::string name = shape_name("store", host_type<T>::name, {MT, NT});
    ck.close(name + " store_acc bits", bits_of(out16_d.download()), bits_of(out16), {});
    ck.close(name + " store_acc_f32", to_double(out32_d.download()), to_double(out32), {});
    ck.close(name + " store_rows", to_double(rows_d.download()), to_double(row_max), {});
}

/** Warp-rows tiles (the split-K combine's strips): load_warp_rows and load_warp_rows_vec under a
 * row and column mask that ends inside a lane's four columns, a map through row_of and the lanes'
 * columns, and store_warp_rows (T and f32) and store_rows under a wider mask, so the loads' zeros and
 * fill values show; outside the store mask the poison stays. */
template <typename T, int R, int Q, bool WHOLE_FOURS = false>
void test_warp_rows(checker &ck, std::mt19937 &rng, int load_cols, int store_cols, int missing_rows) {
    constexpr int M = R, N = 128 * Q, row0 = 3, stride = N + 8, rows = row0 + M + 2;
    const int load_rows = row0 + M - missing_rows, store_rows = row0 + M - missing_rows / 2;
    constexpr float poison = -12345.0f;
    const std::vector<float> in = random_floats(rng, size_t(rows) * stride, -3, 3);
    const std::vector<float> in_rows = random_floats(rng, rows, -2, 2);
    const T poison16 = {dt::poison_bits};
    device_buffer<float> in_d(in), in_rows_d(in_rows);
    device_buffer<T> out16_d(std::vector<T>(size_t(rows) * stride, poison16));
    device_buffer<float> out32_d(std::vector<float>(size_t(rows) * stride, poison));
    device_buffer<float> rows_d(std::vector<float>(rows, poison));
    dt::warp_rows_kernel<T, R, Q, WHOLE_FOURS><<<1, 32>>>(in_d.get(), in_rows_d.get(), out16_d.get(), out32_d.get(),
                                                          rows_d.get(), stride, row0, load_rows, load_cols, store_rows,
                                                          store_cols);
    sync_launch();

    std::vector<T> out16(size_t(rows) * stride, poison16);
    std::vector<float> out32(size_t(rows) * stride, poison), vec(rows, poison);
    for (int i = row0; i < row0 + M && i < store_rows; ++i) {
        const float scale = i < load_rows ? in_rows[size_t(i)] : -7.0f;
        vec[size_t(i)] = scale + 1.0f;
        for (int c = 0; c < N && c < store_cols; ++c) {
            const float x = i < load_rows && c < load_cols ? in[size_t(i) * stride + c] : 0.0f;
            const float y = x * scale + float(c) / 1024.0f;  // one rounding each way, as on the device
            out32[size_t(i) * stride + c] = y;
            out16[size_t(i) * stride + c] = host_type<T>::from(y);
        }
    }
    const std::string name =
        shape_name("warp_rows", host_type<T>::name, {R, Q, WHOLE_FOURS, load_cols, store_cols, missing_rows});
    // The device may fuse x * scale + c / 1024 into one FMA: half an ulp of f32 apart at most.
    ck.close(name + " store_warp_rows f32", to_double(out32_d.download()), to_double(out32), {1e-6, 1e-6});
    ck.close(name + " store_warp_rows " + host_type<T>::name, to_double(out16_d.download()), to_double(out16),
             {0, 2 * host_type<T>::unit_roundoff});
    ck.close(name + " store_rows", to_double(rows_d.download()), to_double(vec), {});
}

// ---- Attention --------------------------------------------------------------------------------

constexpr int head_dim = dt::attention_shape::head_dim;

template <typename T, bool CAUSAL>
void launch_attention(const T *q, const T *k, const T *v, T *o, int batch_heads, int seq) {
    constexpr int smem = dt::attention_smem_bytes<T>;
    static const cudaError_t configured =  // once per instantiation, outside the timed launches
        cudaFuncSetAttribute(dt::attention_fwd<T, CAUSAL>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    NEPTUNE_CUDA_CHECK(configured);
    const dim3 grid((seq + dt::attention_shape::block_m - 1) / dt::attention_shape::block_m, batch_heads);
    const float scale_log2 = float(1.0 / std::sqrt(double(head_dim)) / std::log(2.0));
    dt::attention_fwd<T, CAUSAL><<<grid, dt::attention_shape::threads, smem>>>(q, k, v, o, seq, scale_log2);
}

/** Attention on [batch_heads][seq][128] inputs against a double reference on the same T values;
 * the output starts as NaN so rows the kernel skips fail. */
template <typename T, bool CAUSAL>
void test_attention(checker &ck, std::mt19937 &rng, int batch_heads, int seq) {
    const size_t n = size_t(batch_heads) * seq * head_dim;
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> q(n), k(n), v(n);
    for (std::vector<float> *x : {&q, &k, &v})
        for (float &e : *x) e = host_type<T>::to(host_type<T>::from(normal(rng)));
    device_buffer<T> q_d(to_type<T>(q)), k_d(to_type<T>(k)), v_d(to_type<T>(v));
    device_buffer<T> o_d(std::vector<T>(n, T{0x7fff}));  // NaN in both types
    launch_attention<T, CAUSAL>(q_d.get(), k_d.get(), v_d.get(), o_d.get(), batch_heads, seq);
    sync_launch();

    std::vector<double> ref(n), p(static_cast<size_t>(seq));
    const double scale = 1.0 / std::sqrt(double(head_dim));
    for (size_t bh = 0; bh < size_t(batch_heads); ++bh)
        for (size_t i = 0; i < size_t(seq); ++i) {
            const size_t row = (bh * seq + i) * head_dim, keys = CAUSAL ? i + 1 : size_t(seq);
            double mx = -HUGE_VAL, sum = 0;
            for (size_t j = 0; j < keys; ++j) {
                const size_t key = (bh * seq + j) * head_dim;
                double dot = 0;
                for (size_t d = 0; d < head_dim; ++d) dot += double(q[row + d]) * k[key + d];
                p[j] = dot * scale;
                mx = std::max(mx, p[j]);
            }
            for (size_t j = 0; j < keys; ++j) {
                p[j] = std::exp(p[j] - mx);
                sum += p[j];
            }
            for (size_t j = 0; j < keys; ++j) {
                const size_t value = (bh * seq + j) * head_dim;
                for (size_t d = 0; d < head_dim; ++d) ref[row + d] += p[j] / sum * v[value + d];
            }
        }
    const attention_tolerance tol = attention_tol<T>;
    ck.close(std::string("attention_fwd ") + host_type<T>::name + (CAUSAL ? " causal" : "") +
                 " BH=" + std::to_string(batch_heads) + " S=" + std::to_string(seq),
             to_double(o_d.download()), ref, {tol.max_abs, 0, tol.rel_rms});
}

/** Uniform [-1, 1) inputs for the timing runs, generated where they are used. */
template <typename T>
__global__ void fill_random(T *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        unsigned h = unsigned(i) * 0x9e3779b9u ^ seed;
        h ^= h >> 16, h *= 0x85ebca6bu, h ^= h >> 13, h *= 0xc2b2ae35u, h ^= h >> 16;
        p[i] = nd::from_float<T>(float(h) * (2.0f / 4294967296.0f) - 1.0f);
    }
}

/** Median time of 20 runs after 3 warm-up runs; TFLOP/s counts 4 B H S^2 D, halved when causal. */
template <typename T, bool CAUSAL>
void time_attention(checker &ck, int batch, int heads, int seq) {
    const size_t n = size_t(batch) * heads * seq * head_dim;
    device_buffer<T> q(n), k(n), v(n), o(n);
    fill_random<<<1024, 256>>>(q.get(), n, 1u);
    fill_random<<<1024, 256>>>(k.get(), n, 2u);
    fill_random<<<1024, 256>>>(v.get(), n, 3u);
    sync_launch();
    cudaEvent_t start, stop;
    NEPTUNE_CUDA_CHECK(cudaEventCreate(&start));
    NEPTUNE_CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> ms;
    for (int it = 0; it < 23; ++it) {
        NEPTUNE_CUDA_CHECK(cudaEventRecord(start));
        launch_attention<T, CAUSAL>(q.get(), k.get(), v.get(), o.get(), batch * heads, seq);
        NEPTUNE_CUDA_CHECK(cudaEventRecord(stop));
        sync_launch();
        float t = 0;
        NEPTUNE_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
        if (it >= 3) ms.push_back(t);
    }
    NEPTUNE_CUDA_CHECK(cudaEventDestroy(start));
    NEPTUNE_CUDA_CHECK(cudaEventDestroy(stop));
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    const double flops = 4.0 * batch * heads * double(seq) * seq * head_dim * (CAUSAL ? 0.5 : 1.0);
    std::printf("perf  attention_fwd %s%s B=%d H=%d S=%d D=%d: median %.3f ms (min %.3f), %.1f TFLOP/s\n",
                host_type<T>::name, CAUSAL ? " causal" : "", batch, heads, seq, head_dim, median, ms.front(),
                flops / (median * 1e-3) / 1e12);
    const std::vector<T> out = o.download();
    const bool finite = std::all_of(out.begin(), out.end(), [](T x) { return std::isfinite(host_type<T>::to(x)); });
    ck.expect(finite, std::string("attention_fwd ") + host_type<T>::name + (CAUSAL ? " causal" : "") +
                          " timing run: finite output");
}

template <typename T>
void test_type(checker &ck, std::mt19937 &rng) {
    test_mma<T, 2, 1, 8, 8, false>(ck, rng, 8, 0);  // S = Q K^T shape: 16 x 64 per warp, d = 128
    test_mma<T, 1, 2, 3, 2, false>(ck, rng, 16, 0);  // odd NT: the ldmatrix .x2 tail
    test_mma<T, 2, 1, 16, 4, true>(ck, rng, 8, 16);  // O += P V shape: 64 keys, d = 128
    test_mma<T, 1, 2, 5, 1, true>(ck, rng, 16, 8);
    test_load<T, 64, 24, 40, false>(ck, rng, 19, 24, 56);
    test_load<T, 64, 24, 40, true>(ck, rng, 19, 24, 56);
    test_load<T, 64, 24, 40, true>(ck, rng, 1000, 1000, 40);  // nothing masked
    test_load<T, 64, 24, 40, true>(ck, rng, 0, 40, 40);  // everything masked
    test_load<T, 128, 64, 128, true>(ck, rng, 50, 96, 136);
    // Swizzled tiles (decode's and mma.sync prefill's K, V and Q tiles): any b_row0, b_col0 0 or 64.
    test_mma<T, 2, 1, 8, 8, false, true>(ck, rng, 8, 0);  // S = Q K^T, d = 128
    test_mma<T, 1, 2, 3, 4, false, true>(ck, rng, 5, 0);  // odd NT (.x2 tail), a row offset inside a group
    test_mma<T, 2, 1, 16, 4, true, true>(ck, rng, 8, 64);  // O += P V, 64 keys, the second column block
    test_mma<T, 1, 1, 5, 8, true, true>(ck, rng, 3, 0);  // odd NT, 128 keys
    test_load_swizzled<T, 32, 32, 128, true>(ck, rng, 32, 128, 128);  // decode's K tile
    test_load_swizzled<T, 64, 24, 64, true>(ck, rng, 19, 40, 72);  // masked rows and chunks
    test_load_swizzled<T, 64, 16, 128, false>(ck, rng, 1, 128, 128);  // decode's Q tile: one row
    test_layout<T, 2, 4>(ck, rng);
    test_layout<T, 1, 16>(ck, rng);
    test_store<T, 2, 4>(ck, rng);
    test_warp_rows<T, 4, 1>(ck, rng, 126, 125, 2);  // a combine strip at head dim 128; lone column at the end
    test_warp_rows<T, 16, 2>(ck, rng, 201, 256, 5);  // 16 rows, two column blocks, loads that end inside a lane
    test_warp_rows<T, 4, 1, true>(ck, rng, 80, 128, 3);  // head dim 80: lanes 20..31 past the columns; 1 row
    test_attention<T, false>(ck, rng, 2, 333);
    test_attention<T, true>(ck, rng, 2, 333);
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
    if (prop.major < 8) {
        std::printf("[SKIP] %s is sm_%d%d; the device library needs sm_80\n", prop.name, prop.major, prop.minor);
        return 77;
    }
    std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

    checker ck;
    std::mt19937 rng(20260901);
    test_reduce<2, 4>(ck, rng);
    test_reduce<1, 8>(ck, rng);
    test_type<nd::f16>(ck, rng);
    test_type<nd::bf16>(ck, rng);
    time_attention<nd::f16, false>(ck, 1, 32, 8192);
    time_attention<nd::f16, true>(ck, 1, 32, 8192);
    time_attention<nd::bf16, false>(ck, 1, 32, 8192);
    time_attention<nd::bf16, true>(ck, 1, 32, 8192);

    if (ck.failed() > 0) {
        std::printf("device ops: %d checks passed, %d FAILED\n", ck.passed(), ck.failed());
        return 1;
    }
    std::printf("device ops: %d checks passed\n", ck.passed());
    return 0;
}
