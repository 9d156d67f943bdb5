// The device library's Hopper instructions (hopper.cuh) on the GPU, each against a CPU product, through
// the path emitted kernels take (NVRTC for sm_90a from the embedded headers, the runtime's C ABI and
// its TMA descriptors): TMA tile copies into the 128-byte swizzle (addressing, zero fill past a
// plane's rows), wgmma with both operands from swizzled tiles (S = Q K^T: K-major descriptors; one and
// two warpgroups; zero-init and accumulate), and wgmma with A from registers and B MN-major (O += P V:
// the leading offset across 64-column blocks). Skips (77) without a GPU; needs an sm_90 device.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "HopperKernels.h"
#include "neptune/Half.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "neptune/CompileCuda.h"

namespace neptune::internal {
const std::vector<std::pair<std::string, std::string>> &device_headers();
}

using namespace neptune;

namespace {

std::string last_error() { return neptune_last_error(); }

struct Device {
    void *ptr = nullptr;
    explicit Device(size_t bytes) { REQUIRE_MESSAGE(neptune_malloc(&ptr, bytes) == NEPTUNE_OK, last_error()); }
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;
    ~Device() { neptune_free(ptr); }
};

struct alignas(64) TensorMap {
    unsigned char bytes[128];
};

/** planes x rows x cols random 16-bit values of `bf16` or f16, on the device, with a TMA map. */
struct Tensor {
    std::vector<float> values;  // as rounded
    std::vector<uint16_t> bits;
    std::unique_ptr<Device> dev;
    TensorMap map{};

    Tensor(std::mt19937 &rng, bool bf16, int planes, int rows, int cols, int box_rows) {
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (int i = 0; i < planes * rows * cols; i++) {
            const uint16_t b = bf16 ? float_to_bf16(normal(rng)) : float_to_f16(normal(rng));
            bits.push_back(b);
            values.push_back(bf16 ? bf16_to_float(b) : f16_to_float(b));
        }
        dev = std::make_unique<Device>(bits.size() * 2);
        REQUIRE(neptune_memcpy_htod(dev->ptr, bits.data(), bits.size() * 2) == NEPTUNE_OK);
        const unsigned long long dims[3] = {unsigned(cols), unsigned(rows), unsigned(planes)};
        const unsigned long long strides[2] = {2ull * cols, 2ull * cols * rows};
        const unsigned box[2] = {64, unsigned(box_rows)};
        REQUIRE_MESSAGE(neptune_tensor_map_encode(map.bytes, dev->ptr, 2, 3, dims, strides, box, 256) == NEPTUNE_OK,
                        last_error());
    }
};

neptune_function *kernel(const std::string &name) {
    static internal::ModuleCache cache;
    internal::NvrtcOptions o;
    o.arch = "sm_90a";
    o.cubin = true;
    o.headers = internal::device_headers();
    return cache.get(testing::hopper_kernels, name, o);
}

void launch(const std::string &name, unsigned threads, unsigned smem, std::vector<void *> args) {
    const unsigned grid[3] = {1, 1, 1}, block[3] = {threads, 1, 1};
    REQUIRE_MESSAGE(neptune_launch(kernel(name), grid, block, smem + 2048, nullptr, args.data()) == NEPTUNE_OK,
                    last_error());
    REQUIRE_MESSAGE(neptune_synchronize() == NEPTUNE_OK, name << ": " << last_error());
}

template <typename V>
std::vector<V> download(const Device &d, size_t n) {
    std::vector<V> v(n);
    REQUIRE(neptune_memcpy_dtoh(v.data(), d.ptr, n * sizeof(V)) == NEPTUNE_OK);
    return v;
}

bool sm90() {
    neptune_device_info info;
    return neptune_get_device_info(&info) == NEPTUNE_OK && info.cc_major == 9 && info.cc_minor == 0;
}

}  // namespace

TEST_CASE("hopper: TMA copies a box of a plane into the swizzled layout, zeros past its rows") {
    REQUIRE(sm90());  // the test runs only on sm_90 (NEPTUNE_TEST_NEEDS_SM90, else it skips)
    std::mt19937 rng(1);
    for (const auto &[rows_box, cols] : {std::pair{64, 128}, std::pair{128, 64}}) {
        const int planes = 3, rows = 100;
        Tensor t(rng, false, planes, rows, cols, rows_box);
        Device out(size_t(rows_box) * cols * 2);
        for (const auto &[row0, plane] : {std::pair{0, 0}, std::pair{64, 1}, std::pair{40, 2}}) {
            int r0 = row0, p = plane;
            void *o = out.ptr;
            launch("tma_" + std::to_string(rows_box) + "x" + std::to_string(cols), 128, unsigned(rows_box * cols * 2),
                   {t.map.bytes, &r0, &p, &o});
            const std::vector<uint16_t> got = download<uint16_t>(out, size_t(rows_box) * cols);
            int bad = 0;
            for (int r = 0; r < rows_box; r++)
                for (int c = 0; c < cols; c++) {
                    const uint16_t want = row0 + r < rows ? t.bits[(size_t(plane) * rows + row0 + r) * cols + c] : 0;
                    bad += got[size_t(r) * cols + c] != want;
                }
            INFO("box " << rows_box << " x " << cols << " at row " << row0 << " of plane " << plane);
            CHECK(bad == 0);
        }
    }
}

TEST_CASE("hopper: wgmma S = Q K^T from swizzled tiles (K-major), zero-init and accumulate") {
    REQUIRE(sm90());  // the test runs only on sm_90 (NEPTUNE_TEST_NEEDS_SM90, else it skips)
    std::mt19937 rng(2);
    struct Shape {
        int ra, n, k;
        bool accumulate;
    };
    for (const bool bf16 : {false, true})
        for (const Shape &s : {Shape{64, 64, 64, false}, Shape{128, 128, 128, false}, Shape{128, 128, 128, true},
                               Shape{64, 64, 256, true}}) {
            Tensor a(rng, bf16, 1, s.ra, s.k, s.ra), b(rng, bf16, 1, s.n, s.k, s.n);
            Device out(size_t(s.ra) * s.n * 4);
            int acc = s.accumulate;
            void *o = out.ptr;
            const std::string name = std::string("abt_") + (bf16 ? "bf16" : "f16") + "_" + std::to_string(s.ra) + "_" +
                                     std::to_string(s.n) + "_" + std::to_string(s.k);
            launch(name, unsigned(128 * (s.ra / 64)), unsigned((s.ra + s.n) * s.k * 2),
                   {a.map.bytes, b.map.bytes, &acc, &o});
            const std::vector<float> got = download<float>(out, size_t(s.ra) * s.n);
            double worst = 0;
            for (int m = 0; m < s.ra; m++)
                for (int n = 0; n < s.n; n++) {
                    double want = s.accumulate ? 1.0 : 0.0;
                    for (int k = 0; k < s.k; k++)
                        want += double(a.values[size_t(m) * s.k + k]) * b.values[size_t(n) * s.k + k];
                    worst = std::max(worst, std::fabs(got[size_t(m) * s.n + n] - want));
                }
            INFO(name << ": max abs error " << worst);
            CHECK(worst < 1e-3 * std::sqrt(double(s.k)));
        }
}

TEST_CASE("hopper: wgmma O = P V with P in registers and V MN-major across column blocks") {
    REQUIRE(sm90());  // the test runs only on sm_90 (NEPTUNE_TEST_NEEDS_SM90, else it skips)
    std::mt19937 rng(3);
    struct Shape {
        int kt, rv, n;
    };
    for (const bool bf16 : {false, true})
        for (const Shape &s : {Shape{8, 128, 128}, Shape{4, 128, 64}, Shape{8, 128, 256}}) {
            const int k = 16 * s.kt;
            Tensor a(rng, bf16, 1, 64, k, 64), v(rng, bf16, 1, s.rv, s.n, s.rv);
            Device out(size_t(64) * s.n * 4);
            void *ap = a.dev->ptr, *o = out.ptr;
            const std::string name = std::string("ab_") + (bf16 ? "bf16" : "f16") + "_" + std::to_string(s.kt) + "_" +
                                     std::to_string(s.rv) + "_" + std::to_string(s.n);
            launch(name, 128, unsigned(s.rv * s.n * 2 + 64 * (k + 8) * 2), {&ap, v.map.bytes, &o});
            const std::vector<float> got = download<float>(out, size_t(64) * s.n);
            double worst = 0;
            for (int m = 0; m < 64; m++)
                for (int n = 0; n < s.n; n++) {
                    double want = 0;
                    for (int kk = 0; kk < k; kk++)
                        want += double(a.values[size_t(m) * k + kk]) * v.values[size_t(kk) * s.n + n];
                    worst = std::max(worst, std::fabs(got[size_t(m) * s.n + n] - want));
                }
            INFO(name << ": max abs error " << worst);
            CHECK(worst < 1e-3 * std::sqrt(double(k)));
        }
}
