// The run-time side of a Neptune extern stage in a Halide pipeline (interop/ExternEntry.h): bounds
// queries, buffer validation, kernel-set choice, launches; plus the overrides that put Halide's CUDA
// runtime on Neptune's context (NeptuneHalide.h). The overrides live in this object on purpose:
// linking any entry point links them too.
#include <HalideRuntime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/SplitChunks.h"
#include "core/StrideParams.h"
#include "interop/Descriptor.h"
#include "interop/ExternEntry.h"
#include "neptune/runtime/NeptuneHalide.h"
#include "neptune/runtime/NeptuneRuntime.h"

// Defined by Halide's runtime in AOT programs; absent in JIT processes (libHalide exports no runtime
// symbols), where errors go through the JIT reporter instead.
#pragma weak halide_error

namespace neptune::interop {

int choose_kernel_set(const GroupDescriptor &d, int cc, int sm_count, int64_t split_blocks) {
    return choose_kernel_set(d, cc, sm_count, split_blocks, std::vector<bool>(d.sets.size(), true));
}

int choose_kernel_set(const GroupDescriptor &d, int cc, int sm_count, int64_t split_blocks,
                      const std::vector<bool> &serves) {
    int want_keys = 0, want_stages = 0;
    if (!d.split_blocks.empty()) {  // split-K: the JIT's tuning for this shape
        want_keys = internal::decode_block_n(split_blocks, sm_count, 0);
        want_stages = internal::decode_stages(split_blocks, sm_count);
    }
    int best = -1, best_score = -1;
    for (size_t i = 0; i < d.sets.size(); i++) {
        const KernelSet &s = d.sets[i];
        if (cc < s.min_cc || cc > s.max_cc || !serves.at(i)) continue;
        if (s.cluster) continue;  // taken per call, once the chunks are known (choose_cluster_set)
        const int score = (s.stages == want_stages ? 2 : 0) + (s.tile_keys == want_keys ? 1 : 0);
        if (score > best_score) best = int(i), best_score = score;
    }
    return best;
}

int choose_cluster_set(const GroupDescriptor &d, int chosen, int cc, int64_t chunks) {
    const KernelSet &c = d.sets.at(size_t(chosen));
    for (size_t i = 0; i < d.sets.size(); i++) {
        const KernelSet &s = d.sets[i];
        if (!s.cluster || s.min_cc != c.min_cc || s.max_cc != c.max_cc || s.tile_keys != c.tile_keys ||
            s.stages != c.stages)
            continue;
        // The AOT stage builds cluster sets only where the JIT's other conditions hold (one-warp blocks, sm_90a).
        if (internal::use_cluster_merge(-1, chunks, cc == 90, 1, 1)) return int(i);
    }
    return chosen;
}

namespace {

/** A descriptor, parsed once, and the device state of its kernels (loaded on the first run). */
struct Group {
    GroupDescriptor desc;
    std::string prefix;  // the blob's leading bytes, up to and including its id
    std::vector<std::vector<IntExpr>> dims;
    std::vector<IntExpr> constraints;
    IntExpr split_blocks, split_keys;
    std::vector<IntExpr> whens;  // per set: its `when` ("1" where it has none)

    std::mutex lock;  // held for a whole run: the workspaces are shared
    bool probed = false;  // the device, once
    int probe_code = 0;
    std::string probe_error;
    int sm_count = 0, max_shared_per_block = 0, cc = 0;  // the device's, for the set and the split-K rules
    /** A kernel set's module, loaded on the first call that takes it. */
    struct Loaded {
        int code = 0;  // a failure to load, remembered
        std::string error;
        neptune_module *module = nullptr;
        std::vector<neptune_function *> functions;
        std::vector<std::array<IntExpr, 3>> grids;
        std::vector<IntExpr> clusters;  // per kernel: blocks per cluster along x (1 without clusters)
        /** Per kernel, per TMA descriptor: cols, rows, heads, batch, then the row, head and batch strides. */
        std::vector<std::vector<std::array<IntExpr, 7>>> map_dims;
        std::vector<IntExpr> workspace_elements;
    };
    std::map<int, Loaded> loaded;  // by index in desc.sets
    // (stream, name) -> (device memory, bytes): runs on different streams may overlap on the GPU.
    std::map<std::pair<void *, std::string>, std::pair<void *, size_t>> workspaces;
};

std::mutex cache_lock;
std::unordered_map<const char *, std::shared_ptr<Group>> cache;
std::vector<std::shared_ptr<Group>> replaced;  // kept alive: another thread may still run them

std::atomic<neptune_halide_trace_fn> trace_fn{nullptr};
// The stream this thread's stages launch on (neptune_halide_set_stream); Halide's kernels follow it
// through halide_cuda_get_stream.
thread_local void *current_stream = nullptr;
std::atomic<neptune_halide_error_fn> jit_reporter{nullptr};
std::atomic<neptune_halide_kernel_compiler_fn> kernel_compiler{nullptr};
std::atomic<bool> exiting{false};  // set by an atexit handler: the process is ending

std::string type_name(int code, int bits) {
    const char *c = code == halide_type_int     ? "i"
                    : code == halide_type_uint  ? "u"
                    : code == halide_type_float ? "f"
                                                : "bf";
    return c + std::to_string(bits);
}

std::string dims_text(const TensorSpec &t) {
    std::string s = "[";
    for (size_t k = 0; k < t.dims.size(); k++) s += (k ? ", " : "") + t.dims[k];
    return s + "]";
}

int report(void *user_context, const std::string &stage, bool jit, int code, const std::string &message) {
    const std::string text =
        (stage.empty() ? std::string("Neptune: ") : "Neptune extern stage " + stage + ": ") + message;
    const neptune_halide_error_fn jit_report = jit_reporter.load();
    if (jit && jit_report) {
        jit_report(user_context, text.c_str());
    } else if (&halide_error) {
        halide_error(user_context, text.c_str());
    } else {
        std::fprintf(stderr, "%s\n", text.c_str());
    }
    return code;
}

/** Parses the blob on first sight; a different blob at a reused address is parsed anew. */
std::shared_ptr<Group> find_group(const char *blob, std::string &error) {
    std::lock_guard<std::mutex> hold(cache_lock);
    auto it = cache.find(blob);
    if (it != cache.end() && std::strncmp(blob, it->second->prefix.c_str(), it->second->prefix.size()) == 0)
        return it->second;
    auto g = std::make_shared<Group>();
    try {
        g->desc = read_descriptor(blob);
        const char *end = std::strchr(blob, ',');
        g->prefix = end ? std::string(blob, end) : std::string(blob);
        for (const TensorSpec &t : g->desc.buffers) {
            std::vector<IntExpr> d;
            for (const std::string &e : t.dims) d.push_back(IntExpr::parse(e));
            g->dims.push_back(d);
        }
        for (const Constraint &c : g->desc.constraints) g->constraints.push_back(IntExpr::parse(c.expr));
        for (const KernelSet &k : g->desc.sets) g->whens.push_back(IntExpr::parse(k.when.empty() ? "1" : k.when));
        if (!g->desc.split_blocks.empty()) {
            g->split_blocks = IntExpr::parse(g->desc.split_blocks);
            g->split_keys = IntExpr::parse(g->desc.split_keys);
        }
    } catch (const std::exception &e) {
        error = std::string("unreadable descriptor (was the library built by another Neptune?): ") + e.what();
        return nullptr;
    }
    if (it != cache.end()) replaced.push_back(it->second);
    cache[blob] = g;
    return g;
}

std::string scalar_values(const GroupDescriptor &d, const std::map<std::string, int64_t> &v) {
    std::string s;
    for (const std::string &n : d.scalars) s += (s.empty() ? "" : ", ") + n + " = " + std::to_string(v.at(n));
    return s;
}

/** Checks a buffer that holds data (or an output's region) against its spec; 0 or an error code.
 * A strided buffer's stride parameters go into `vars`. */
int validate(void *uc, const Group &g, size_t i, const halide_buffer_t *b, const std::vector<int64_t> &extents,
             std::map<std::string, int64_t> &vars) {
    const TensorSpec &t = g.desc.buffers[i];
    const std::string what = (t.output ? "output buffer " : "buffer ") + t.name;
    auto fail = [&](int code, const std::string &m) {
        return report(uc, g.desc.name, g.desc.jit, code, what + " " + m);
    };
    if (b->dimensions != int(t.dims.size()))
        return fail(halide_error_code_bad_dimensions, "has " + std::to_string(b->dimensions) +
                                                          " dimensions, expected " + std::to_string(t.dims.size()) +
                                                          " " + dims_text(t));
    if (b->type.code != t.type_code || b->type.bits != t.bits || b->type.lanes != 1)
        return fail(halide_error_code_bad_type, "has type " + type_name(b->type.code, b->type.bits) + ", expected " +
                                                    type_name(t.type_code, t.bits));
    int64_t stride = 1;
    int64_t below = 1;  // a strided buffer: the stride taken for dimension k - 1 times its extent
    for (size_t k = 0; k < t.dims.size(); k++) {
        const halide_dimension_t &d = b->dim[k];
        if (d.min != 0 || d.extent != extents[k]) {
            std::string m = "covers [" + std::to_string(d.min) + ", " + std::to_string(int64_t(d.min) + d.extent) +
                            ") in dimension " + std::to_string(k) + " (" + t.dims[k] + "), expected [0, " +
                            std::to_string(extents[k]) + ")";
            m += t.output ? ": Neptune's kernels write whole outputs"
                          : " from the extents " + scalar_values(g.desc, vars);
            return fail(halide_error_code_constraint_violated, m);
        }
        // Strides matter only for data: a query's output region has none.
        const bool data = !b->is_bounds_query() && extents[k] > 1;
        if (t.strided && k > 0) {
            // A stride where the extent is 1 is never used to address: the one right past the
            // dimension below stands in, so relations between strides hold as if it were dense
            // there (a decode output of one batch with padded heads has no batch stride to check).
            const int64_t given = data ? int64_t(d.stride) : below;
            if (given <= 0 || given % internal::kStrideUnit)
                return fail(halide_error_code_constraint_violated,
                            "has stride " + std::to_string(given) + " in dimension " + std::to_string(k) +
                                ": Neptune's kernels take strides that are positive multiples of " +
                                std::to_string(internal::kStrideUnit) + " elements (16 bytes)");
            vars[internal::stride_param(t.name, int(k))] = given / internal::kStrideUnit;
            below = given * extents[k];
        } else if (data && d.stride != stride) {
            return fail(halide_error_code_constraint_violated,
                        "has stride " + std::to_string(d.stride) + " in dimension " + std::to_string(k) +
                            ", expected " + std::to_string(stride) +
                            (t.strided ? ": the innermost dimension must be contiguous"
                                       : ": Neptune's kernels read and write this tensor dense"));
        }
        if (k == 0) below = extents[0];  // the innermost dimension is contiguous
        stride *= extents[k];
    }
    return 0;
}

/** The device's figures, once; remembers a failure for later calls. */
int probe(void *uc, Group &g) {
    if (g.probed) return g.probe_code ? report(uc, g.desc.name, g.desc.jit, g.probe_code, g.probe_error) : 0;
    g.probed = true;
    neptune_device_info info{};
    if (neptune_get_device_info(&info) != NEPTUNE_OK) {
        g.probe_code = halide_error_code_gpu_device_error;
        g.probe_error = neptune_last_error();
    } else {
        g.sm_count = info.sm_count;
        g.max_shared_per_block = info.max_shared_per_block_optin;
        g.cc = info.cc_major * 10 + info.cc_minor;
        bool any = false;
        std::string have;
        for (const KernelSet &s : g.desc.sets) {
            any = any || (g.cc >= s.min_cc && g.cc <= s.max_cc);
            if (have.find(s.codes) == std::string::npos) have += (have.empty() ? "" : ", ") + s.codes;
        }
        if (!any) {
            g.probe_code = halide_error_code_gpu_device_error;
            g.probe_error = std::string("no kernels for ") + info.name + " (compute capability " +
                            std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor) +
                            "); the library holds " + have;
        }
    }
    return g.probe_code ? report(uc, g.desc.name, g.desc.jit, g.probe_code, g.probe_error) : 0;
}

/** Loads set `index`'s module and functions on its first use; remembers a failure. */
int load(void *uc, Group &g, int index) {
    auto [it, fresh] = g.loaded.try_emplace(index);
    Group::Loaded &l = it->second;
    auto fail = [&](int code, const std::string &m) {
        l.code = code;
        l.error = m;
        return report(uc, g.desc.name, g.desc.jit, code, m);
    };
    if (!fresh) return l.code ? report(uc, g.desc.name, g.desc.jit, l.code, l.error) : 0;
    const KernelSet &set = g.desc.sets[size_t(index)];
    const KernelSet &holder = set.image_of >= 0 ? g.desc.sets.at(size_t(set.image_of)) : set;
    const std::string *image = &holder.image;
    std::string compiled;
    if (image->empty() && !holder.source.empty()) {
        // A set compiled on first use (Descriptor.h): this call is its first. Just in time a set's
        // codes are the one GPU family it was lowered for ("sm_90a", "sm_86").
        const neptune_halide_kernel_compiler_fn compile = kernel_compiler.load();
        const std::string what = "the " + set.codes + " kernels" + (set.when.empty() ? "" : " for " + set.when);
        if (!compile) {
            g.loaded.erase(it);  // not remembered: a later call may find a compiler installed
            return report(uc, g.desc.name, g.desc.jit, halide_error_code_gpu_device_error,
                          what +
                              " are compiled on first use, and no kernel compiler is installed "
                              "(neptune::compile_gpu and libneptune_ops install one)");
        }
        char *bytes = nullptr, *message = nullptr;
        size_t size = 0;
        const int rc = compile(holder.source.c_str(), set.codes.c_str(), (g.desc.name + "_" + set.arch).c_str(), &bytes,
                               &size, &message);
        if (rc == 0 && bytes) compiled.assign(bytes, size);
        const std::string why = message ? message : "no message";
        std::free(bytes);
        std::free(message);
        if (compiled.empty()) return fail(halide_error_code_gpu_device_error, "compiling " + what + ": " + why);
        image = &compiled;
    }
    if (image->empty())
        return fail(halide_error_code_gpu_device_error, "the " + set.codes + " kernel set holds no image");
    if (neptune_module_load(image->data(), &l.module) != NEPTUNE_OK)
        return fail(halide_error_code_gpu_device_error,
                    "loading the " + set.codes + " kernels: " + neptune_last_error());
    for (const KernelSpec &k : set.kernels) {
        neptune_function *f = nullptr;
        if (neptune_module_get_function(l.module, k.name.c_str(), &f) != NEPTUNE_OK)
            return fail(halide_error_code_gpu_device_error, neptune_last_error());
        l.functions.push_back(f);
        l.grids.push_back({IntExpr::parse(k.grid[0]), IntExpr::parse(k.grid[1]), IntExpr::parse(k.grid[2])});
        l.clusters.push_back(IntExpr::parse(k.cluster.empty() ? "1" : k.cluster));
        l.map_dims.emplace_back();
        for (const TensorMapSpec &m : k.maps)
            l.map_dims.back().push_back({IntExpr::parse(m.dims[0]), IntExpr::parse(m.dims[1]),
                                         IntExpr::parse(m.dims[2]), IntExpr::parse(m.dims[3]),
                                         IntExpr::parse(m.strides[0]), IntExpr::parse(m.strides[1]),
                                         IntExpr::parse(m.strides[2])});
    }
    for (const WorkspaceSpec &w : set.workspaces) l.workspace_elements.push_back(IntExpr::parse(w.elements));
    return 0;
}

/** The device address of buffer i's data, moving it to the device through Halide's runtime when it
 * lives on the host only (or is newer there). */
int device_address(void *uc, const Group &g, size_t i, halide_buffer_t *b, const halide_device_interface_t *cuda,
                   void **out, bool *allocated) {
    const TensorSpec &t = g.desc.buffers[i];
    auto fail = [&](int code, const std::string &m) {
        return report(uc, g.desc.name, g.desc.jit, code, "buffer " + t.name + ": " + m);
    };
    if (t.output) {
        *allocated = !b->device;
        if (!b->device && cuda->device_malloc(uc, b, cuda) != 0)
            return fail(halide_error_code_device_malloc_failed, "cannot allocate it on the GPU");
        // The kernels write all of it on the device: what the host held is stale (both flags set at
        // once would be an error at the next copy); launch() marks it device-dirty once they ran.
        b->set_host_dirty(false);
    } else if (!b->device || b->host_dirty() || b->device_interface != cuda) {
        if (!b->host && !b->device) return fail(halide_error_code_host_is_null, "has neither host nor device memory");
        // Without device memory the host holds the only values, dirty flag or not (a buffer filled
        // through data() has none): Halide's copy_to_device copies only a dirty host.
        if (!b->device) b->set_host_dirty(true);
        if (cuda->copy_to_device(uc, b, cuda) != 0)
            return fail(halide_error_code_copy_to_device_failed, "copying it to the GPU failed");
    }
    *out = reinterpret_cast<void *>(static_cast<uintptr_t>(b->device));
    if (neptune_check_device_pointer(*out) != NEPTUNE_OK)
        return fail(
            halide_error_code_gpu_device_error,
            std::string(neptune_last_error()) +
                "; Halide's CUDA runtime must share Neptune's context (NeptuneHalide.h: link the extern stage's "
                "library, or neptune::share_cuda_context for JIT pipelines)");
    return 0;
}

/** Where a workspace lives in Group::workspaces (beside the stream): per-thread ones by thread too. */
std::string workspace_key(const WorkspaceSpec &w) {
    if (!w.per_thread) return w.name;
    std::ostringstream os;
    os << w.name << '@' << std::this_thread::get_id();
    return os.str();
}

/** Runs the kernels of the set chosen for this call; `*set_index` is its index (-1 before one is chosen). */
int launch(void *uc, Group &g, halide_buffer_t **bufs, const halide_device_interface_t *cuda,
           std::map<std::string, int64_t> &vars, int *set_index) {
    if (int rc = probe(uc, g)) return rc;
    const int64_t split_blocks = g.desc.split_blocks.empty() ? 0 : g.split_blocks.eval(vars);
    std::vector<bool> serves;
    for (const IntExpr &w : g.whens) serves.push_back(w.eval(vars) != 0);
    int index = choose_kernel_set(g.desc, g.cc, g.sm_count, split_blocks, serves);
    if (index >= 0 && g.desc.chunks) {  // split-K: the chunk count is fixed (> 0) or picked for this shape (< 0)
        const KernelSet &tuned = g.desc.sets[size_t(index)];
        const int64_t chunks =
            g.desc.chunks > 0
                ? g.desc.chunks
                : internal::split_k_chunks(
                      split_blocks, g.split_keys.eval(vars), tuned.tile_keys, g.sm_count,
                      internal::resident_blocks(tuned.kernels.at(0).shared_bytes, g.max_shared_per_block));
        internal::set_split_k_params(vars, chunks);
        // Its cluster-merge twin has the same tile and shared memory, so the same chunks.
        index = choose_cluster_set(g.desc, index, g.cc, chunks);
    }
    if (index < 0)
        return report(uc, g.desc.name, g.desc.jit, halide_error_code_device_run_failed,
                      "no kernel set of the library serves this call (" + scalar_values(g.desc, vars) + ")");
    if (int rc = load(uc, g, index)) return rc;
    *set_index = index;
    const KernelSet &set = g.desc.sets[size_t(index)];
    const Group::Loaded &l = g.loaded.at(index);
    auto fail = [&](int code, const std::string &m) { return report(uc, g.desc.name, g.desc.jit, code, m); };
    std::map<std::string, void *> address;
    std::vector<char> allocated(g.desc.buffers.size(), 0);
    for (size_t i = 0; i < g.desc.buffers.size(); i++) {
        bool a = false;
        if (int rc = device_address(uc, g, i, bufs[i], cuda, &address[g.desc.buffers[i].name], &a)) return rc;
        allocated[i] = a;
        // Vector copies and TMA read 16-byte units from the start of a row; a dense buffer's allocation
        // is aligned, a view into another tensor need not be.
        if (g.desc.buffers[i].strided && reinterpret_cast<uintptr_t>(address[g.desc.buffers[i].name]) % 16)
            return fail(
                halide_error_code_constraint_violated,
                "buffer " + g.desc.buffers[i].name +
                    "'s data does not start on 16 bytes: Neptune's kernels read and write rows of 16-byte units");
    }
    for (size_t w = 0; w < set.workspaces.size(); w++) {
        const WorkspaceSpec &ws = set.workspaces[w];
        const size_t bytes =
            size_t(std::max<int64_t>(l.workspace_elements[w].eval(vars), 4)) * size_t(ws.element_bytes);
        auto &[ptr, size] = g.workspaces[{current_stream, workspace_key(ws)}];
        if (size < bytes) {
            neptune_free(ptr);
            ptr = nullptr;
            size = 0;
            if (neptune_malloc(&ptr, bytes) != NEPTUNE_OK)
                return fail(halide_error_code_device_malloc_failed,
                            "workspace " + set.workspaces[w].name + ": " + neptune_last_error());
            size = bytes;
            // Arrival counters start at zero (each launch leaves them zero); synchronous, before any
            // launch on this stream can count in them.
            if (set.workspaces[w].zeroed &&
                (neptune_memset_d8(ptr, 0, bytes) != NEPTUNE_OK || neptune_synchronize() != NEPTUNE_OK))
                return fail(halide_error_code_device_malloc_failed,
                            "zeroing workspace " + set.workspaces[w].name + ": " + neptune_last_error());
        }
        address[set.workspaces[w].name] = ptr;
    }
    for (size_t k = 0; k < set.kernels.size(); k++) {
        const KernelSpec &ks = set.kernels[k];
        unsigned grid[3];
        bool empty = false;
        for (int d = 0; d < 3; d++) {
            const int64_t n = l.grids[k][size_t(d)].eval(vars);
            empty = empty || n <= 0;
            grid[d] = unsigned(n);
        }
        if (empty) continue;  // nothing to compute (a zero extent)
        std::vector<void *> pointers, args;
        std::vector<int32_t> ints;
        for (const std::string &t : ks.tensors) pointers.push_back(address.at(t));
        for (const std::string &n : ks.ints) ints.push_back(int32_t(vars.at(n)));
        for (void *&p : pointers) args.push_back(&p);
        // TMA descriptors depend on the buffers' addresses: encoded for every call (a few microseconds).
        struct alignas(64) Map {
            unsigned char bytes[128];
        };
        std::vector<Map> maps(ks.maps.size());
        for (size_t m = 0; m < ks.maps.size(); m++) {
            const std::array<IntExpr, 7> &d = l.map_dims[k][m];
            unsigned long long dims[4], strides[3];
            for (int i = 0; i < 4; i++) dims[i] = (unsigned long long)d[size_t(i)].eval(vars);
            for (int i = 0; i < 3; i++) strides[i] = 2ull * (unsigned long long)d[size_t(4 + i)].eval(vars);
            const unsigned box[2] = {64, unsigned(ks.maps[m].box_rows)};
            if (neptune_tensor_map_encode(maps[m].bytes, address.at(ks.maps[m].tensor), 2, 4, dims, strides, box,
                                          ks.maps[m].l2_promotion) != NEPTUNE_OK)
                return fail(halide_error_code_device_run_failed,
                            std::string("the TMA descriptor of ") + ks.maps[m].tensor + ": " + neptune_last_error());
            args.push_back(maps[m].bytes);
        }
        for (int32_t &v : ints) args.push_back(&v);
        const unsigned block[3] = {unsigned(ks.threads), 1, 1};
        const unsigned cluster[3] = {unsigned(l.clusters[k].eval(vars)), 1, 1};
        if (neptune_launch_cluster(l.functions[k], grid, block, cluster, unsigned(ks.shared_bytes), current_stream,
                                   args.data()) != NEPTUNE_OK)
            return fail(halide_error_code_device_run_failed, neptune_last_error());
        // NEPTUNE_SYNC_LAUNCHES=1: wait for each kernel, so an error in it is reported here, naming it,
        // rather than at Halide's next copy.
        static const bool sync_each = std::getenv("NEPTUNE_SYNC_LAUNCHES") != nullptr;
        if (sync_each && neptune_synchronize() != NEPTUNE_OK)
            return fail(halide_error_code_device_run_failed,
                        ks.name + " (grid " + std::to_string(grid[0]) + "x" + std::to_string(grid[1]) + "x" +
                            std::to_string(grid[2]) + "): " + neptune_last_error());
    }
    // Mark what the kernels wrote. An output that came with device memory keeps the results there
    // (device-dirty); one that came with host memory only gets them back in it, and the device memory
    // allocated here is freed, so no allocation outlives the call on a buffer its caller does not track.
    for (size_t i = 0; i < g.desc.buffers.size(); i++) {
        if (!g.desc.buffers[i].output) continue;
        halide_buffer_t *b = bufs[i];
        b->set_device_dirty(true);
        if (!allocated[i] || !b->host) continue;
        if (cuda->copy_to_host(uc, b) != 0)
            return fail(halide_error_code_copy_to_host_failed,
                        "copying " + g.desc.buffers[i].name + " back to the host failed");
        b->set_host_dirty(true);
        if (cuda->device_free(uc, b) != 0)
            return fail(halide_error_code_device_free_failed,
                        "freeing the device copy of " + g.desc.buffers[i].name + " failed");
    }
    return 0;
}

/** A copy stage's run: its output from the per-thread workspace of the group that wrote it. */
int copy_out(void *uc, const Group &g, halide_buffer_t **bufs, const halide_device_interface_t *cuda) {
    const GroupDescriptor &d = g.desc;
    auto fail = [&](int code, const std::string &m) { return report(uc, d.name, d.jit, code, m); };
    std::shared_ptr<Group> source;
    {
        std::lock_guard<std::mutex> hold(cache_lock);
        for (auto &[blob, grp] : cache)
            if (grp->desc.id == d.copy_of_group) source = grp;
    }
    const std::string missing = "the stage that computes it did not run before on this thread and stream";
    if (!source) return fail(halide_error_code_device_run_failed, missing);
    void *dst = nullptr;
    bool allocated = false;
    if (int rc = device_address(uc, g, 1, bufs[1], cuda, &dst, &allocated)) return rc;
    size_t bytes = size_t(bufs[1]->type.bytes());
    for (int k = 0; k < bufs[1]->dimensions; k++) bytes *= size_t(bufs[1]->dim[k].extent);
    {
        std::lock_guard<std::mutex> hold(source->lock);
        WorkspaceSpec w;
        w.name = d.copy_of_workspace;
        w.per_thread = true;
        auto it = source->workspaces.find({current_stream, workspace_key(w)});
        if (it == source->workspaces.end()) return fail(halide_error_code_device_run_failed, missing);
        if (it->second.second < bytes)
            return fail(halide_error_code_device_run_failed, "the stage that computes it wrote " +
                                                                 std::to_string(it->second.second) + " bytes, not " +
                                                                 std::to_string(bytes));
        if (neptune_memcpy_dtod_async(dst, it->second.first, bytes, current_stream) != NEPTUNE_OK)
            return fail(halide_error_code_device_run_failed, neptune_last_error());
    }
    bufs[1]->set_device_dirty(true);
    if (allocated && bufs[1]->host) {
        if (cuda->copy_to_host(uc, bufs[1]) != 0)
            return fail(halide_error_code_copy_to_host_failed, "copying " + d.buffers[1].name + " back failed");
        bufs[1]->set_host_dirty(true);
        if (cuda->device_free(uc, bufs[1]) != 0)
            return fail(halide_error_code_device_free_failed, "freeing the device copy failed");
    }
    return 0;
}

void trace(const Group &g, bool query, int result, halide_buffer_t **bufs, const int32_t *scalars, int set_index = -1) {
    const neptune_halide_trace_fn fn = trace_fn.load();
    if (!fn) return;
    std::vector<const char *> names, scalar_names;
    for (const TensorSpec &t : g.desc.buffers) names.push_back(t.name.c_str());
    for (const std::string &s : g.desc.scalars) scalar_names.push_back(s.c_str());
    std::string set;
    if (!query && set_index >= 0) {
        const KernelSet &k = g.desc.sets[size_t(set_index)];
        set = k.arch + " (" + k.codes + ")";
        if (k.stages) set += ", " + std::to_string(k.tile_keys) + "-key tiles, " + std::to_string(k.stages) + " stages";
    }
    const neptune_halide_trace_event e = {g.desc.name.c_str(),
                                          query ? 1 : 0,
                                          result,
                                          int(g.desc.buffers.size()),
                                          bufs,
                                          names.data(),
                                          scalars,
                                          scalar_names.data(),
                                          int(g.desc.scalars.size()),
                                          set.c_str()};
    fn(&e);
}

}  // namespace

int run_extern_stage(void *uc, const char *blob, const halide_device_interface_t *cuda, const int32_t *scalars,
                     halide_buffer_t **bufs, int n) {
    if (!blob) return report(uc, "?", false, halide_error_code_internal_error, "no descriptor");
    std::string error;
    std::shared_ptr<Group> gp = find_group(blob, error);
    if (!gp) return report(uc, "?", false, halide_error_code_internal_error, error);
    Group &g = *gp;
    const GroupDescriptor &d = g.desc;
    auto fail = [&](int code, const std::string &m) { return report(uc, d.name, d.jit, code, m); };
    if (n != int(d.buffers.size()) || d.scalars.size() > size_t(extern_scalars))
        return fail(
            halide_error_code_internal_error,
            "called with " + std::to_string(n) + " buffers; its descriptor has " + std::to_string(d.buffers.size()));
    std::map<std::string, int64_t> vars;
    for (size_t s = 0; s < d.scalars.size(); s++) vars[d.scalars[s]] = scalars[s];
    for (size_t c = 0; c < g.constraints.size(); c++)
        if (!d.constraints[c].strides && !g.constraints[c].eval(vars))
            return fail(halide_error_code_constraint_violated,
                        d.constraints[c].message + " (" + scalar_values(d, vars) + ")");

    bool query = false;
    for (int i = 0; i < n; i++) {
        if (!bufs[i])
            return fail(halide_error_code_buffer_argument_is_null, "buffer " + d.buffers[size_t(i)].name + " is NULL");
        // Halide's bounds queries pass query buffers for the inputs that are Funcs, and for the
        // output always (its region); a real output has host or device memory.
        query = query || bufs[i]->is_bounds_query();
    }
    // Every buffer is needed whole (the kernels read whole inputs and write whole outputs): a query
    // gets [0, extent) in every dimension; a buffer with data must be exactly that, dense (or strided
    // where its spec says so).
    for (int i = 0; i < n; i++) {
        std::vector<int64_t> ext;
        for (const IntExpr &e : g.dims[size_t(i)]) ext.push_back(e.eval(vars));
        halide_buffer_t *b = bufs[i];
        if (!d.buffers[size_t(i)].output && b->is_bounds_query()) {
            if (b->dimensions != int(ext.size()))
                return fail(halide_error_code_bad_dimensions,
                            "buffer " + d.buffers[size_t(i)].name + " has " + std::to_string(b->dimensions) +
                                " dimensions, expected " + std::to_string(ext.size()));
            int64_t stride = 1;
            for (size_t k = 0; k < ext.size(); k++) {
                b->dim[k].min = 0;
                b->dim[k].extent = int32_t(ext[k]);
                b->dim[k].stride = int32_t(stride);
                stride *= ext[k];
            }
            continue;
        }
        if (int rc = validate(uc, g, size_t(i), b, ext, vars)) {
            trace(g, query, rc, bufs, scalars);
            return rc;
        }
    }
    if (query) {
        trace(g, true, 0, bufs, scalars);
        return 0;
    }
    for (size_t c = 0; c < g.constraints.size(); c++)
        if (d.constraints[c].strides && !g.constraints[c].eval(vars)) {
            trace(g, false, halide_error_code_constraint_violated, bufs, scalars);
            return fail(halide_error_code_constraint_violated, d.constraints[c].message);
        }
    int rc = 0, set_index = -1;
    if (!d.copy_of_group.empty()) {
        rc = copy_out(uc, g, bufs, cuda);
    } else {
        std::lock_guard<std::mutex> hold(g.lock);
        rc = launch(uc, g, bufs, cuda, vars, &set_index);
    }
    trace(g, false, rc, bufs, scalars, set_index);
    return rc;
}

}  // namespace neptune::interop

// ---- The entry points: one per buffer count, all the same launcher. ----------------------------

#define NEPTUNE_SCALAR_PARAMS \
    int32_t s0, int32_t s1, int32_t s2, int32_t s3, int32_t s4, int32_t s5, int32_t s6, int32_t s7
#define NEPTUNE_P1 halide_buffer_t *b0
#define NEPTUNE_P2 NEPTUNE_P1, halide_buffer_t *b1
#define NEPTUNE_P3 NEPTUNE_P2, halide_buffer_t *b2
#define NEPTUNE_P4 NEPTUNE_P3, halide_buffer_t *b3
#define NEPTUNE_P5 NEPTUNE_P4, halide_buffer_t *b4
#define NEPTUNE_P6 NEPTUNE_P5, halide_buffer_t *b5
#define NEPTUNE_P7 NEPTUNE_P6, halide_buffer_t *b6
#define NEPTUNE_P8 NEPTUNE_P7, halide_buffer_t *b7
#define NEPTUNE_P9 NEPTUNE_P8, halide_buffer_t *b8
#define NEPTUNE_P10 NEPTUNE_P9, halide_buffer_t *b9
#define NEPTUNE_P11 NEPTUNE_P10, halide_buffer_t *b10
#define NEPTUNE_P12 NEPTUNE_P11, halide_buffer_t *b11
#define NEPTUNE_A1 b0
#define NEPTUNE_A2 NEPTUNE_A1, b1
#define NEPTUNE_A3 NEPTUNE_A2, b2
#define NEPTUNE_A4 NEPTUNE_A3, b3
#define NEPTUNE_A5 NEPTUNE_A4, b4
#define NEPTUNE_A6 NEPTUNE_A5, b5
#define NEPTUNE_A7 NEPTUNE_A6, b6
#define NEPTUNE_A8 NEPTUNE_A7, b7
#define NEPTUNE_A9 NEPTUNE_A8, b8
#define NEPTUNE_A10 NEPTUNE_A9, b9
#define NEPTUNE_A11 NEPTUNE_A10, b10
#define NEPTUNE_A12 NEPTUNE_A11, b11
#define NEPTUNE_EXTERN(N)                                                                                  \
    extern "C" int neptune_halide_extern_##N(void *user_context, const char *descriptor,                   \
                                             const halide_device_interface_t *cuda, NEPTUNE_SCALAR_PARAMS, \
                                             NEPTUNE_P##N) {                                               \
        const int32_t s[] = {s0, s1, s2, s3, s4, s5, s6, s7};                                              \
        halide_buffer_t *b[] = {NEPTUNE_A##N};                                                             \
        return neptune::interop::run_extern_stage(user_context, descriptor, cuda, s, b, N);                \
    }
NEPTUNE_EXTERN(1)
NEPTUNE_EXTERN(2)
NEPTUNE_EXTERN(3)
NEPTUNE_EXTERN(4)
NEPTUNE_EXTERN(5)
NEPTUNE_EXTERN(6)
NEPTUNE_EXTERN(7)
NEPTUNE_EXTERN(8)
NEPTUNE_EXTERN(9)
NEPTUNE_EXTERN(10)
NEPTUNE_EXTERN(11)
NEPTUNE_EXTERN(12)

namespace neptune::interop {

std::string extern_function_name(int num_buffers) { return "neptune_halide_extern_" + std::to_string(num_buffers); }

void *extern_function_address(int num_buffers) {
    static void *const table[] = {nullptr,
                                  reinterpret_cast<void *>(&neptune_halide_extern_1),
                                  reinterpret_cast<void *>(&neptune_halide_extern_2),
                                  reinterpret_cast<void *>(&neptune_halide_extern_3),
                                  reinterpret_cast<void *>(&neptune_halide_extern_4),
                                  reinterpret_cast<void *>(&neptune_halide_extern_5),
                                  reinterpret_cast<void *>(&neptune_halide_extern_6),
                                  reinterpret_cast<void *>(&neptune_halide_extern_7),
                                  reinterpret_cast<void *>(&neptune_halide_extern_8),
                                  reinterpret_cast<void *>(&neptune_halide_extern_9),
                                  reinterpret_cast<void *>(&neptune_halide_extern_10),
                                  reinterpret_cast<void *>(&neptune_halide_extern_11),
                                  reinterpret_cast<void *>(&neptune_halide_extern_12)};
    return num_buffers >= 1 && num_buffers <= max_extern_buffers ? table[num_buffers] : nullptr;
}

}  // namespace neptune::interop

// ---- One context for Halide's CUDA runtime and Neptune's. -------------------------------------

extern "C" {

int neptune_halide_acquire_context(void *user_context, void **cuda_context, bool create) {
    // create == false is Halide's teardown (halide_cuda_device_release, also run from a destructor at
    // exit): hand over the context if there is one and touch nothing else. At exit hand over none,
    // so Halide releases nothing: its cuCtxPushCurrent may fail there and report through the
    // application's error handler, whose objects are destroyed by then (a double free was the
    // result); the process's end frees the device anyway.
    if (!create) {
        *cuda_context = neptune::interop::exiting.load() ? nullptr : neptune_context_if_initialized();
        return 0;
    }
    // Registered at the first use, so it runs before the destructors of everything constructed
    // earlier (the application's globals) and before Halide's own destructor.
    static const bool watch_exit = [] { return std::atexit([] { neptune::interop::exiting = true; }) == 0; }();
    (void)watch_exit;
    *cuda_context = nullptr;
    const int rc = neptune_get_context(cuda_context);
    // After the driver shut down (at exit), Halide's destructors have nothing left to free: no report.
    if (rc == NEPTUNE_ERROR_SHUT_DOWN) return halide_error_code_gpu_device_error;
    if (rc != NEPTUNE_OK) {
        return neptune::interop::report(
            user_context, "", false, halide_error_code_gpu_device_error,
            std::string("Halide's CUDA runtime cannot use Neptune's context: ") + neptune_last_error());
    }
    return 0;
}

int neptune_halide_release_context(void *) { return 0; }

int neptune_halide_get_stream(void *, void *, void **stream) {
    *stream = neptune::interop::current_stream;
    return 0;
}

void *neptune_halide_set_stream(void *stream) {
    void *previous = neptune::interop::current_stream;
    neptune::interop::current_stream = stream;
    return previous;
}

// The Halide runtime's definitions are weak; these win when this object is linked (AOT).
int halide_cuda_acquire_context(void *user_context, void **cuda_context, bool create) {
    return neptune_halide_acquire_context(user_context, cuda_context, create);
}
int halide_cuda_release_context(void *user_context) { return neptune_halide_release_context(user_context); }
int halide_cuda_get_stream(void *user_context, void *cuda_context, void **stream) {
    return neptune_halide_get_stream(user_context, cuda_context, stream);
}

neptune_halide_trace_fn neptune_halide_set_trace(neptune_halide_trace_fn fn) {
    return neptune::interop::trace_fn.exchange(fn);
}

void neptune_halide_set_jit_error_reporter(neptune_halide_error_fn fn) { neptune::interop::jit_reporter = fn; }

neptune_halide_kernel_compiler_fn neptune_halide_set_kernel_compiler(neptune_halide_kernel_compiler_fn fn) {
    return neptune::interop::kernel_compiler.exchange(fn);
}

}  // extern "C"
