// The unfused attention baseline on a library ("no fusion" as a user would write it):
//   S = scale * Q K^T   cuBLAS strided-batched GEMM, fp32 scores in device memory
//   P = softmax(mod(S)) a small kernel of ours: the score modifier, the mask, then three passes
//                       over each row (max, sum of exponentials, normalised probabilities in fp16)
//   O = P V             cuBLAS strided-batched GEMM
// Every score goes through memory twice, which is what fusion saves. Query heads that share a KV
// head are stacked as the rows of one GEMM (their Q rows are contiguous), so K and V are read once
// per group. Scores for all rows need not fit: the rows are processed in chunks of a 4 GiB
// workspace, all inside the timed sequence. libcublas is opened at run time, never linked.
#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include <cublas_api.h>

#include "Native.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "neptune/CompileCuda.h"

namespace neptune::bench {

namespace {

// The entry points we use, with the signatures of cublas_api.h (CUDA 13; unchanged since CUDA 11).
struct CublasLib {
    std::string path;
    cublasStatus_t (*create)(cublasHandle_t *) = nullptr;
    cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
    cublasStatus_t (*version)(cublasHandle_t, int *) = nullptr;
    const char *(*status_string)(cublasStatus_t) = nullptr;
    cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                           const void *, cudaDataType, int, long long, const void *, cudaDataType, int, long long,
                           const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t,
                           cublasGemmAlgo_t) = nullptr;
};

// Where libcublas may be: NEPTUNE_CUBLAS, the loader's path, the toolkit, PyTorch's nvidia-cublas wheel.
std::vector<std::string> cublas_candidates() {
    std::vector<std::string> c;
    if (const char *e = std::getenv("NEPTUNE_CUBLAS")) c.push_back(e);
    c.push_back("libcublas.so.13");
    c.push_back("libcublas.so.12");
    const char *cuda = std::getenv("CUDA_PATH");
    for (const std::string &root : {std::string(cuda ? cuda : "/usr/local/cuda"), std::string("/usr/local/cuda")})
        for (const char *sub : {"/lib64/", "/targets/x86_64-linux/lib/"}) c.push_back(root + sub + "libcublas.so.13");
    for (const char *pattern : {"/opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib/libcublas.so.*",
                                "/opt/torch/.venv/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so.*",
                                "/usr/local/lib/python3*/dist-packages/nvidia/cu*/lib/libcublas.so.*",
                                "/usr/local/lib/python3*/dist-packages/nvidia/cublas/lib/libcublas.so.*"}) {
        glob_t g{};
        if (glob(pattern, 0, nullptr, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc; i++) c.push_back(g.gl_pathv[i]);
        globfree(&g);
    }
    return c;
}

const CublasLib &cublas() {
    static CublasLib lib;
    static std::string failure;
    static std::once_flag once;
    std::call_once(once, [] {
        std::string tried;
        for (const std::string &p : cublas_candidates()) {
            void *h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                tried += (tried.empty() ? "" : ", ") + p;
                continue;
            }
            auto sym = [&](auto &fn, const char *name) {
                fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
                return fn != nullptr;
            };
            if (sym(lib.create, "cublasCreate_v2") && sym(lib.destroy, "cublasDestroy_v2") &&
                sym(lib.version, "cublasGetVersion_v2") && sym(lib.status_string, "cublasGetStatusString") &&
                sym(lib.gemm, "cublasGemmStridedBatchedEx")) {
                lib.path = p;
                return;
            }
            tried += (tried.empty() ? "" : ", ") + p + " (lacks an entry point)";
            dlclose(h);
        }
        failure = "libcublas not found (tried " + tried + "; set NEPTUNE_CUBLAS to its path)";
    });
    if (lib.path.empty()) throw Unsupported(failure);
    return lib;
}

// One block per row of scores. The modifier and the mask follow the conventions of docs/design/operators.md (scores
// arrive already scaled by the GEMM's alpha); a row with no visible key gets P = 0, hence O = 0.
const char *softmax_source = R"(
extern "C" __global__ void __launch_bounds__(256) neptune_bench_softmax(
    const float *__restrict__ s, unsigned short *__restrict__ p, const float *__restrict__ slopes,
    int skv, int sq, int group, int kv_heads, int rows_per_entry_block, int entry0, int row0,
    int mask, int window, int mod, float softcap, int bf16) {
    __shared__ float red[32];
    const float neg_inf = __int_as_float(0xff800000);
    const int row = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
    const int e = entry0 + row / rows_per_entry_block, rr = row0 + row % rows_per_entry_block;
    const int h = (e % kv_heads) * group + rr / sq;
    const long long pos = (long long)skv - sq + rr % sq;
    long long lo = 0, hi = skv;  // visible keys [lo, hi)
    if (mask >= 1) hi = pos + 1 < hi ? pos + 1 : hi;
    if (mask == 2) lo = pos - window + 1 > 0 ? pos - window + 1 : 0;
    const float slope = mod == 1 ? slopes[h] : 0.0f;
    const float *srow = s + (size_t)row * skv;
    unsigned short *prow = p + (size_t)row * skv;
    auto score = [&](long long j) {
        float x = srow[j];
        if (mod == 2) x = softcap * tanhf(x / softcap);
        if (mod == 1) x += slope * (float)(j - pos);
        return x;
    };
    auto reduce = [&](float v, bool is_max) {
        for (int o = 16; o > 0; o >>= 1) {
            const float w = __shfl_xor_sync(0xffffffffu, v, o);
            v = is_max ? fmaxf(v, w) : v + w;
        }
        if ((tid & 31) == 0) red[tid >> 5] = v;
        __syncthreads();
        v = is_max ? neg_inf : 0.0f;
        for (int w = 0; w < nt / 32; w++) v = is_max ? fmaxf(v, red[w]) : v + red[w];
        __syncthreads();
        return v;
    };
    float m = neg_inf;
    for (long long j = lo + tid; j < hi; j += nt) m = fmaxf(m, score(j));
    m = reduce(m, true);
    float l = 0.0f;
    for (long long j = lo + tid; j < hi; j += nt) l += expf(score(j) - m);
    l = reduce(l, false);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (long long j = tid; j < skv; j += nt) {
        const float x = j >= lo && j < hi ? expf(score(j) - m) * inv : 0.0f;
        unsigned short b;
        if (bf16) asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(x));
        else asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(x));
        prow[j] = b;
    }
}
)";

constexpr unsigned softmax_threads = 256;

class CublasAttention : public NativeImpl {
public:
    CublasAttention(const OperatorInstance &inst, size_t workspace_bytes) : inst_(inst) {
        const OperatorSpec &spec = inst.spec;
        const AttentionSpec &a = spec.attention;
        const CublasLib &lib = cublas();
        check_runtime(neptune_init(), "CUDA");
        batch_ = inst.batch;
        kv_heads_ = a.kv_heads;
        group_ = a.q_heads / a.kv_heads;
        sq_ = inst.input("q").shape[2];
        skv_ = inst.input("k").shape[2];
        d_ = inst.input("q").shape[3];
        dv_ = inst.input("v").shape[3];
        rows_per_entry_ = group_ * sq_;
        // Rows per chunk: as many whole (batch, KV head) entries as the workspace holds, else a block
        // of one entry's rows.
        const int64_t row_bytes = skv_ * (4 + 2);
        const int64_t max_rows = std::max<int64_t>(1, int64_t(workspace_bytes) / row_bytes);
        timer_ = std::make_unique<EventTimer>();
        block_rows_ = std::min(rows_per_entry_, max_rows);
        block_entries_ = block_rows_ == rows_per_entry_ ? std::max<int64_t>(1, max_rows / rows_per_entry_) : 1;
        block_entries_ = std::min(block_entries_, batch_ * kv_heads_);
        const size_t chunk_rows = size_t(block_entries_ * block_rows_);
        alloc("scores", chunk_rows * size_t(skv_) * 4);
        alloc("probs", chunk_rows * size_t(skv_) * 2);
        for (const TensorDesc &t : inst.inputs) alloc(t.name, size_t(t.numel()) * size_t(dtype_bytes(t.dtype)));
        alloc("out", size_t(inst.output("out").numel()) * 2);
        if (lib.create(&handle_.h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
        lib.version(handle_.h, &version_);
        internal::NvrtcOptions no;
        no.cubin = true;
        softmax_ = cache_.get(softmax_source, "neptune_bench_softmax", no);
    }

    void set_inputs(const std::vector<HostTensor> &inputs) override {
        for (const HostTensor &t : inputs) {
            std::vector<char> buf(mem_.bytes.at(t.desc.name));
            t.store(buf.data());
            check_runtime(neptune_memcpy_htod(mem_.ptr.at(t.desc.name), buf.data(), buf.size()),
                          "copying " + t.desc.name);
        }
    }

    std::vector<HostTensor> run() override {
        check_runtime(neptune_memset_d8(mem_.ptr["out"], 0xff, mem_.bytes["out"]), "poisoning the output");
        launch();
        check_runtime(neptune_synchronize(), "running cuBLAS and the softmax kernel");
        std::vector<HostTensor> out = make_outputs(inst_);
        std::vector<char> buf(mem_.bytes["out"]);
        check_runtime(neptune_memcpy_dtoh(buf.data(), mem_.ptr["out"], buf.size()), "copying the output");
        out[0].load(buf.data());
        return out;
    }

    double time_once() override {
        return timer_->time_ms([this] { launch(); });
    }

    std::string describe() const override {
        std::ostringstream os;
        os << "cublas_unfused: " << cublas().path << " (version " << version_ << "), chunks of " << block_entries_
           << " (batch, KV head) entries x " << block_rows_ << " rows of " << skv_ << " fp32 scores\n";
        return os.str();
    }

private:
    void alloc(const std::string &name, size_t bytes) {
        void *p = nullptr;
        check_runtime(neptune_malloc(&p, std::max<size_t>(bytes, 16)), "allocating " + name);
        mem_.ptr[name] = p;
        mem_.bytes[name] = bytes;
    }

    void gemm_check(cublasStatus_t st, const char *what) const {
        if (st != CUBLAS_STATUS_SUCCESS)
            throw std::runtime_error(std::string(what) + ": " + cublas().status_string(st));
    }

    void launch() {
        const CublasLib &lib = cublas();
        const AttentionSpec &a = inst_.spec.attention;
        const cudaDataType t = inst_.spec.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
        const float alpha = float(a.score_scale()), one = 1.0f, zero = 0.0f;
        const int64_t entries = batch_ * kv_heads_;
        auto *q = static_cast<char *>(mem_.ptr["q"]), *k = static_cast<char *>(mem_.ptr["k"]);
        auto *v = static_cast<char *>(mem_.ptr["v"]), *o = static_cast<char *>(mem_.ptr["out"]);
        void *s = mem_.ptr["scores"], *p = mem_.ptr["probs"];
        void *slopes = mem_.ptr.count("slopes") ? mem_.ptr["slopes"] : s;  // read only with ALiBi
        int skv = int(skv_), sq = int(sq_), group = int(group_), kvh = int(kv_heads_);
        int mask = a.mask == Mask::None ? 0 : a.mask == Mask::Causal ? 1 : 2, window = a.window;
        int mod = a.mod == ScoreMod::None ? 0 : a.mod == ScoreMod::Alibi ? 1 : 2;
        float cap = float(a.softcap);
        int bf16 = inst_.spec.dtype == DType::BF16;
        for (int64_t e0 = 0; e0 < entries; e0 += block_entries_) {
            const int ne = int(std::min(block_entries_, entries - e0));
            for (int64_t r0 = 0; r0 < rows_per_entry_; r0 += block_rows_) {
                const int m = int(std::min(block_rows_, rows_per_entry_ - r0));
                // Column-major view: S^T (Skv x m) = K (Skv x D, stored as its transpose) * Q^T (D x m).
                gemm_check(lib.gemm(handle_.h, CUBLAS_OP_T, CUBLAS_OP_N, skv, m, int(d_), &alpha,
                                    k + e0 * skv_ * d_ * 2, t, int(d_), skv_ * d_,
                                    q + (e0 * rows_per_entry_ + r0) * d_ * 2, t, int(d_), rows_per_entry_ * d_, &zero,
                                    s, CUDA_R_32F, skv, int64_t(m) * skv_, ne, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                           "cuBLAS S = Q K^T");
                int e0i = int(e0), r0i = int(r0), mi = m;
                void *args[] = {&s,   &p,   &slopes, &skv,    &sq,  &group, &kvh, &mi,
                                &e0i, &r0i, &mask,   &window, &mod, &cap,   &bf16};
                const unsigned grid[3] = {unsigned(ne) * unsigned(m), 1, 1}, block[3] = {softmax_threads, 1, 1};
                check_runtime(neptune_launch(softmax_, grid, block, 0, nullptr, args), "softmax kernel");
                // O^T (Dv x m) = V^T (Dv x Skv) * P^T (Skv x m).
                gemm_check(lib.gemm(handle_.h, CUBLAS_OP_N, CUBLAS_OP_N, int(dv_), m, skv, &one,
                                    v + e0 * skv_ * dv_ * 2, t, int(dv_), skv_ * dv_, p, t, skv, int64_t(m) * skv_,
                                    &zero, o + (e0 * rows_per_entry_ + r0) * dv_ * 2, t, int(dv_),
                                    rows_per_entry_ * dv_, ne, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                           "cuBLAS O = P V");
            }
        }
    }

    OperatorInstance inst_;
    int64_t batch_ = 0, kv_heads_ = 0, group_ = 0, sq_ = 0, skv_ = 0, d_ = 0, dv_ = 0, rows_per_entry_ = 0;
    int64_t block_rows_ = 0, block_entries_ = 0;
    // Owners that release what the constructor got so far when a later step of it throws.
    struct Memory {
        std::map<std::string, void *> ptr;
        std::map<std::string, size_t> bytes;
        ~Memory() {
            for (auto &[n, p] : ptr) neptune_free(p);
        }
    } mem_;
    struct Handle {
        cublasHandle_t h = nullptr;
        ~Handle() {
            if (h) cublas().destroy(h);
        }
    } handle_;
    int version_ = 0;
    internal::ModuleCache cache_;
    neptune_function *softmax_ = nullptr;
    std::unique_ptr<EventTimer> timer_;
};

}  // namespace

const char *cublas_softmax_source() { return softmax_source; }

std::string cublas_library() { return cublas().path; }

std::unique_ptr<NativeImpl> make_cublas_unfused(const OperatorInstance &inst, size_t workspace_bytes) {
    const OperatorSpec &spec = inst.spec;
    if (spec.family != Family::Attention) throw Unsupported("attention operators only");
    if (spec.attention.page_size > 0) throw Unsupported("dense K and V only (the Python baselines read a paged cache)");
    if (spec.row_stats != RowStats::None) throw Unsupported("computes the attention output only, not row statistics");
    if (spec.dtype != DType::F16 && spec.dtype != DType::BF16) throw Unsupported("f16 and bf16 inputs only");
    if (inst.output("out").dtype != spec.dtype) throw Unsupported("outputs in the input type only");
    cublas();  // throws Unsupported when libcublas cannot be opened
    return std::make_unique<CublasAttention>(inst, workspace_bytes);
}

std::unique_ptr<NativeImpl> make_cublas_unfused(const OperatorInstance &inst, const GpuOptions &) {
    return make_cublas_unfused(inst, size_t(4) << 30);
}

}  // namespace neptune::bench
