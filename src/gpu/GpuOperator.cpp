#include "neptune/GpuOperator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "Halide.h"
#include "codegen/CodeGenCuda.h"
#include "core/SplitChunks.h"
#include "lower/Lower.h"
#include "suite/LowerOperator.h"
#include "neptune/Error.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "neptune/CompileCuda.h"
#include "tir/IR.h"

namespace neptune {

namespace internal {
const std::vector<std::pair<std::string, std::string>> &device_headers();
}

namespace HI = Halide::Internal;

namespace {

void check(int rc, const char *what) {
    if (rc != NEPTUNE_OK) throw std::runtime_error(std::string(what) + ": " + neptune_last_error());
}

int64_t eval_int(const Halide::Expr &e, const std::map<std::string, int64_t> &vars) {
    std::map<std::string, Halide::Expr> m;
    for (auto &[k, v] : vars) m[k] = Halide::Expr(int(v));
    const Halide::Expr r = HI::simplify(HI::substitute(m, e));
    const HI::IntImm *i = r.as<HI::IntImm>();
    if (!i) {
        std::ostringstream os;
        os << r;
        throw InternalError("launch: cannot evaluate " + os.str());
    }
    return i->value;
}

// The lowering choices of `opt` for `arch`; decode's chunk count is `chunks`.
internal::LoweringChoices choices(const GpuOptions &opt, GpuArch arch, int chunks) {
    internal::LoweringChoices c;
    c.arch = arch;
    c.block_n = opt.block_n;
    c.chunks = chunks;
    c.vocab_chunks = opt.chunks;
    c.min_blocks = opt.min_blocks ? opt.min_blocks : -1;
    c.wgmma = opt.wgmma;
    c.overlap = opt.overlap;
    c.stages = opt.stages;
    c.fold_combine = opt.fold_combine;
    c.cluster_merge = opt.cluster_merge;
    c.tma_loads = opt.tma_loads;
    c.row_threads = opt.row_threads;
    c.row_cluster = opt.row_cluster;
    return c;
}

GpuArch parse_arch(const std::string &arch) {
    if (arch == "sm_90a") return GpuArch::Sm90a;
    if (arch == "sm_80" || arch == "sm_90" || arch == "sm_86" || arch == "sm_89") return GpuArch::Sm80;
    throw std::invalid_argument("unknown GPU architecture '" + arch + "': use sm_80, sm_86, sm_89, sm_90 or sm_90a");
}

}  // namespace

bool gpu_available() { return neptune_cuda_available() == 1; }

EmittedOperator emit_operator(const OperatorInstance &inst, const GpuOptions &opt, const std::string &arch) {
    internal::LoweringChoices c = choices(opt, parse_arch(arch), opt.chunks ? opt.chunks : 4);
    if (c.arch == GpuArch::Sm80) c.min_blocks = opt.min_blocks;  // as given: 0 is no register cap
    internal::OperatorLowering l = internal::lower_operator(inst, c);
    EmittedOperator e;
    e.tile_program = tir::to_string(l.program);
    e.cuda = internal::emit_cuda(l.program);
    internal::NvrtcOptions no;
    no.arch = arch;
    no.headers = internal::device_headers();
    e.ptx = internal::nvrtc_compile(e.cuda, inst.spec.name + ".cu", no).ptx;
    // nvcc reads headers from disk: write the embedded device library to a temporary folder.
    char dir[] = "/tmp/neptune_headersXXXXXX";
    if (!mkdtemp(dir)) throw std::runtime_error("emit_operator: cannot create a temporary folder");
    const std::string root = dir;
    std::system(("mkdir -p " + root + "/neptune/device").c_str());
    for (const auto &[name, text] : internal::device_headers()) std::ofstream(root + "/" + name) << text;
    internal::CompiledModule nv = internal::nvcc_compile(e.cuda, inst.spec.name, arch, {root});
    e.ptxas_log = nv.log;
    e.cubin = std::move(nv.cubin);
    std::system(("rm -rf " + root).c_str());
    for (const tir::Kernel &k : l.program.kernels) {
        const internal::ResourceUsage u = internal::parse_ptxas_report(e.ptxas_log, k.name);
        e.resources.push_back({k.name, u.registers, u.shared_bytes, u.spill_stores, u.spill_loads, u.stack_bytes});
    }
    return e;
}

struct GpuOperator::Impl {
    OperatorInstance inst;
    GpuOptions opt;
    tir::Program program;
    std::string ir_text, source;
    internal::ModuleCache cache;
    std::vector<neptune_function *> fns;
    std::map<std::string, void *> dev;
    std::map<std::string, size_t> bytes;
    std::map<std::string, int64_t> ints;
    void *flush = nullptr;
    static constexpr size_t flush_bytes = size_t(256) << 20;  // > 4x the 60 MB L2
    struct alignas(64) TensorMap {
        unsigned char bytes[128];  // a CUtensorMap
    };
    std::vector<std::vector<TensorMap>> maps;  // per kernel, in its tensor_maps order

    ~Impl() {
        for (auto &[n, p] : dev) neptune_free(p);
        if (flush) neptune_free(flush);
    }

    void launch_all() {
        for (size_t i = 0; i < program.kernels.size(); i++) {
            const tir::Kernel &k = program.kernels[i];
            std::map<std::string, int64_t> v = ints;
            const unsigned grid[3] = {unsigned(eval_int(k.grid_x, v)), unsigned(eval_int(k.grid_y, v)),
                                      unsigned(eval_int(k.grid_z, v))};
            const unsigned block[3] = {unsigned(k.threads()), 1, 1};
            std::vector<void *> ptrs;
            std::vector<int> int_args;
            ptrs.reserve(k.tensors.size());
            int_args.reserve(k.int_params.size());
            std::vector<void *> args;  // the kernel's order: tensors, tensor maps, int parameters
            for (const tir::TensorParam &t : k.tensors) ptrs.push_back(dev.at(t.name));
            for (void *&p : ptrs) args.push_back(&p);
            for (TensorMap &tm : maps[i]) args.push_back(tm.bytes);
            for (const std::string &p : k.int_params) int_args.push_back(int(ints.at(p)));
            for (int &a : int_args) args.push_back(&a);
            if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) continue;
            const unsigned cluster[3] = {k.cluster_x.defined() ? unsigned(eval_int(k.cluster_x, v)) : 1u, 1, 1};
            check(neptune_launch_cluster(fns[i], grid, block, cluster, unsigned(k.shared_bytes), nullptr, args.data()),
                  k.name.c_str());
        }
    }
};

GpuOperator::GpuOperator(const OperatorInstance &inst, const GpuOptions &opt) : impl_(std::make_unique<Impl>()) {
    Impl &m = *impl_;
    m.inst = inst;
    m.opt = opt;
    const OperatorSpec &spec = inst.spec;
    check(neptune_init(), "CUDA");
    neptune_device_info info{};
    check(neptune_get_device_info(&info), "device info");
    const AttentionSpec &a = spec.attention;
    // The Hopper path where the device has it (sm_90: wgmma and TMA), mma.sync elsewhere.
    const GpuArch arch = !opt.arch.empty()
                             ? parse_arch(opt.arch)
                             : (info.cc_major == 9 && info.cc_minor == 0 ? GpuArch::Sm90a : GpuArch::Sm80);
    if (arch == GpuArch::Sm90a && !(info.cc_major == 9 && info.cc_minor == 0))
        throw std::invalid_argument("sm_90a kernels need an sm_90 device, not compute capability " +
                                    std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor));
    // Decode's chunk count is a kernel parameter: chosen after lowering, from the partial kernel's
    // KV tile (k_s) and shared memory (how many of its blocks an SM holds).
    internal::LoweringChoices c = choices(opt, arch, opt.chunks ? opt.chunks : 1);
    // Decode's one-warp kernels: the pipeline depth by how many (batch, KV head) groups share the SMs.
    if (a.decode && !opt.stages) c.stages = internal::decode_stages(inst.batch * a.kv_heads, info.sm_count);
    // ... and its keys per tile (on sm_90a's TMA copies: the mma.sync path's 64-key kernel spills), where
    // the tile divides a paged cache's pages (else the lowering picks one that does).
    if (a.decode && !opt.block_n && arch == GpuArch::Sm90a && opt.tma_loads != 0) {
        const int keys =
            internal::decode_block_n(inst.batch * a.kv_heads, info.sm_count, std::max(a.head_dim_qk, a.head_dim_v));
        if (a.page_size % keys == 0) c.block_n = keys;
    }
    // Takes a lowering and, for decode, its chunk count.
    auto adopt = [&](internal::OperatorLowering lowered) {
        m.program = std::move(lowered.program);
        m.ints = std::move(lowered.ints);
        if (!a.decode) return;
        const tir::Kernel &partial = m.program.kernels.at(0);
        const int64_t chunks =
            opt.chunks
                ? opt.chunks
                : internal::split_k_chunks(
                      inst.batch * a.kv_heads, attention_keys(inst), partial.values.at("k_s").rows, info.sm_count,
                      internal::resident_blocks(partial.shared_bytes, info.max_shared_per_block_optin));
        internal::set_split_k_params(m.ints, chunks);
    };
    adopt(internal::lower_operator(inst, c));
    if (a.decode) {
        const int64_t chunks = m.ints.at("chunks");
        if (c.cluster_merge == 1 && chunks > internal::kMaxClusterChunks)
            throw std::invalid_argument(spec.name + ": a cluster merge takes at most " +
                                        std::to_string(internal::kMaxClusterChunks) +
                                        " chunks (the portable cluster size), not " + std::to_string(chunks) +
                                        "; pass --chunks 8 or fewer, or --cluster-merge 0");
        // By the rule, a second lowering in the cluster form (lowered so when asked for): its state tiles
        // alias the K/V ring, so the partial kernel's shared memory, and with it the chunk count, is the same.
        if (opt.cluster_merge < 0 && internal::use_cluster_merge(-1, chunks, arch == GpuArch::Sm90a, opt.fold_combine,
                                                                 m.program.kernels.at(0).warps)) {
            c.cluster_merge = 1;
            adopt(internal::lower_operator(inst, c));
            if (m.ints.at("chunks") != chunks)
                throw InternalError(spec.name + ": the cluster merge changed the chunk count (" +
                                    std::to_string(chunks) + " -> " + std::to_string(m.ints.at("chunks")) +
                                    "): its state tiles should alias the ring");
        }
    }
    // Ask the register allocator for no more blocks per SM than shared memory can hold (1 KB per block
    // is reserved): a cap that cannot be reached would only cost spills (e.g. head dim 256). Warp-
    // specialized kernels run one block per SM by design.
    for (tir::Kernel &k : m.program.kernels) {
        if (k.min_blocks_per_sm <= 0 || k.shared_bytes == 0 || k.producer_warps) continue;
        k.min_blocks_per_sm =
            std::min(k.min_blocks_per_sm, internal::resident_blocks(k.shared_bytes, info.max_shared_per_block_optin));
        if (k.min_blocks_per_sm < 2) k.min_blocks_per_sm = 0;
    }
    m.ir_text = tir::to_string(m.program);
    m.source = internal::emit_cuda(m.program);

    internal::NvrtcOptions no;
    no.cubin = true;
    no.arch = arch_name(m.program.arch);  // the device's digits, with the a suffix of sm_90a
    no.headers = internal::device_headers();
    for (const tir::Kernel &k : m.program.kernels) m.fns.push_back(m.cache.get(m.source, k.name, no));

    for (const TensorDesc &t : inst.inputs) m.bytes[t.name] = size_t(t.numel()) * size_t(dtype_bytes(t.dtype));
    for (const TensorDesc &t : inst.outputs) m.bytes[t.name] = size_t(t.numel()) * size_t(dtype_bytes(t.dtype));
    for (const tir::Workspace &w : m.program.workspaces) m.bytes[w.name] = size_t(eval_int(w.elements, m.ints)) * 4;
    for (auto &[n, b] : m.bytes) {
        void *p = nullptr;
        check(neptune_malloc(&p, std::max<size_t>(b, 16)), ("allocating " + n).c_str());
        m.dev[n] = p;
    }
    // Arrival counters start at zero; each launch leaves them zero.
    for (const tir::Workspace &w : m.program.workspaces)
        if (w.zeroed) check(neptune_memset_d8(m.dev.at(w.name), 0, m.bytes.at(w.name)), ("zeroing " + w.name).c_str());
    // TMA descriptors depend on the pointers, which stay for the operator's life: encode them once.
    for (const tir::Kernel &k : m.program.kernels) {
        std::vector<Impl::TensorMap> maps;
        for (const tir::TensorMap &tm : k.tensor_maps) {
            const tir::TensorView &v = k.views.at(tm.tensor);
            const unsigned long long dims[4] = {
                (unsigned long long)eval_int(v.cols, m.ints), (unsigned long long)eval_int(v.rows, m.ints),
                (unsigned long long)eval_int(v.heads, m.ints), (unsigned long long)eval_int(v.batch, m.ints)};
            const unsigned long long strides[3] = {2ull * (unsigned long long)eval_int(v.row_stride, m.ints),
                                                   2ull * (unsigned long long)eval_int(v.head_stride, m.ints),
                                                   2ull * (unsigned long long)eval_int(v.batch_stride, m.ints)};
            const unsigned box[2] = {64, unsigned(tm.box_rows)};
            maps.emplace_back();
            check(neptune_tensor_map_encode(maps.back().bytes, m.dev.at(tm.tensor), 2, 4, dims, strides, box,
                                            tm.l2_promotion),
                  ("encoding " + tm.name).c_str());
        }
        m.maps.push_back(std::move(maps));
    }
}

GpuOperator::~GpuOperator() = default;

void GpuOperator::set_inputs(const std::vector<HostTensor> &inputs) {
    for (const HostTensor &t : inputs) {
        std::vector<char> buf(impl_->bytes.at(t.desc.name));
        t.store(buf.data());
        check(neptune_memcpy_htod(impl_->dev.at(t.desc.name), buf.data(), buf.size()), "copying inputs");
    }
}

std::vector<HostTensor> GpuOperator::run() {
    Impl &m = *impl_;
    for (const TensorDesc &t : m.inst.outputs) check(neptune_memset_d8(m.dev[t.name], 0xff, m.bytes[t.name]), "poison");
    m.launch_all();
    check(neptune_synchronize(), "running the kernels");
    std::vector<HostTensor> out = make_outputs(m.inst);
    for (HostTensor &t : out) {
        std::vector<char> buf(m.bytes.at(t.desc.name));
        check(neptune_memcpy_dtoh(buf.data(), m.dev.at(t.desc.name), buf.size()), "copying outputs");
        t.load(buf.data());
    }
    return out;
}

GpuTiming GpuOperator::time(int repeats, int warmup) {
    Impl &m = *impl_;
    if (!m.flush) check(neptune_malloc(&m.flush, Impl::flush_bytes), "allocating the L2 flush buffer");
    for (int i = 0; i < warmup; i++) m.launch_all();
    void *start = nullptr, *stop = nullptr;
    check(neptune_event_create(&start), "event");
    check(neptune_event_create(&stop), "event");
    std::vector<double> ms;
    for (int i = 0; i < repeats; i++) {
        check(neptune_memset_d8(m.flush, uint8_t(i), Impl::flush_bytes), "L2 flush");
        check(neptune_event_record(start, nullptr), "event");
        m.launch_all();
        check(neptune_event_record(stop, nullptr), "event");
        float t = 0;
        check(neptune_event_elapsed_ms(start, stop, &t), "timing");
        ms.push_back(t);
    }
    neptune_event_destroy(start);
    neptune_event_destroy(stop);
    std::sort(ms.begin(), ms.end());
    return {ms[ms.size() / 2], ms.front(), ms.back(), repeats};
}

const std::string &GpuOperator::tile_program() const { return impl_->ir_text; }
const std::string &GpuOperator::cuda_source() const { return impl_->source; }

size_t GpuOperator::workspace_bytes() const {
    size_t n = 0;
    for (const tir::Workspace &w : impl_->program.workspaces) n += impl_->bytes.at(w.name);
    return n;
}

std::string GpuOperator::describe() const {
    std::ostringstream os;
    for (const tir::Kernel &k : impl_->program.kernels)
        os << k.name << ": grid (" << eval_int(k.grid_x, impl_->ints) << ", " << eval_int(k.grid_y, impl_->ints) << ", "
           << eval_int(k.grid_z, impl_->ints) << "), " << k.threads() << " threads"
           << (k.producer_warps ? " (" + std::to_string(32 * k.producer_warps) + " issuing TMA copies)" : std::string())
           << ", " << k.shared_bytes << " B shared, " << arch_name(impl_->program.arch) << "\n";
    if (impl_->ints.count("chunks")) {
        os << "split-K chunks: " << impl_->ints.at("chunks");
        if (impl_->ints.count("interleave"))
            os << (impl_->ints.at("interleave") ? ", tiles dealt round-robin" : ", a run of tiles each");
        const bool clustered = !impl_->program.kernels.empty() && impl_->program.kernels[0].cluster_x.defined();
        os << (clustered ? ", merged in thread block clusters (shared memory)" : "") << "\n";
    }
    return os.str();
}

}  // namespace neptune
