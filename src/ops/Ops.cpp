// libneptune_ops.so (neptune/NeptuneOps.h): the variant table built from the linked AOT libraries
// (ops/Libraries.h), the checks of a call's tensors against the operator's instance at their extents
// (neptune/Operators.h computes the expected shapes, as everywhere else), and the call itself: the
// tensors wrapped as halide_buffer_ts (device pointers through halide_cuda_wrap_device_ptr, so Halide's
// stages and Neptune's extern stages use them in place) and the library's argv entry point. Nothing
// throws across the ABI: failures become a status and the thread's last-error message.
#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "neptune/NeptuneOps.h"
#include "neptune/Operators.h"
#include "neptune/runtime/HalideBuffers.h"
#include "neptune/runtime/NeptuneHalide.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "interop/Descriptor.h"
#include "interop/ExternEntry.h"
#include "ops/FirstUse.h"
#include "ops/Libraries.h"
#include "ops/OpsDType.h"

#ifndef NEPTUNE_VERSION
#define NEPTUNE_VERSION "unknown"
#endif

namespace neptune::ops {

namespace {

thread_local std::string last_error;

/** A refused or failed call, thrown inside this file only and turned into a status at the ABI. */
struct Failure {
    int status;
    std::string message;
};

[[noreturn]] void fail(int status, const std::string &message) { throw Failure{status, message}; }

// What the libraries report through halide_error during a call. The host libraries' parallel loops
// run on Halide's worker threads, and the AOT functions carry no user context, so a message raised
// there cannot name its call: it goes to `stray`, which the next failing call takes. (Two calls
// failing at once in parallel loops may thus swap their messages; their statuses stay right.)
thread_local bool in_call = false;
thread_local std::string own_messages;
std::mutex stray_lock;
std::string stray;

void on_halide_error(void *, const char *message) {
    std::string m = message ? message : "";
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    if (in_call) {
        own_messages += (own_messages.empty() ? "" : "; ") + m;
        return;
    }
    std::lock_guard<std::mutex> hold(stray_lock);
    if (stray.size() < 4096) stray += (stray.empty() ? "" : "; ") + m;
}

/** Marks the calling thread as inside a library call, from a clean slate. */
struct CallMessages {
    CallMessages() {
        in_call = true;
        own_messages.clear();
    }
    ~CallMessages() { in_call = false; }
    /** Everything reported during the call, the workers' messages included. */
    std::string take() const {
        std::string m = own_messages;
        std::lock_guard<std::mutex> hold(stray_lock);
        if (!stray.empty()) m += (m.empty() ? "" : "; ") + stray;
        stray.clear();
        return m.empty() ? "no message" : m;
    }
};

const char *family_name(Family f) {
    switch (f) {
    case Family::Attention: return "attention";
    case Family::Softmax: return "softmax";
    case Family::LogSumExp: return "logsumexp";
    case Family::CrossEntropy: return "cross_entropy";
    case Family::LayerNorm: return "layernorm";
    case Family::LayerNormMatmul: return "layernorm_matmul";
    case Family::RmsNorm: return "rmsnorm";
    case Family::RmsNormMatmul: return "rmsnorm_matmul";
    case Family::Performer: return "performer";
    case Family::LinearCrossEntropy: return "linear_cross_entropy";
    }
    return "?";
}

const char *device_name(int d) {
    return d == NEPTUNE_OPS_CUDA ? "GPU" : d == NEPTUNE_OPS_HOST ? "host" : "unknown device";
}

const char *abi_dtype_name(int t) {
    switch (t) {
    case NEPTUNE_OPS_F16: return "f16";
    case NEPTUNE_OPS_BF16: return "bf16";
    case NEPTUNE_OPS_F32: return "f32";
    case NEPTUNE_OPS_I32: return "i32";
    }
    return "an unknown dtype";
}

std::string shape_text(const int64_t *shape, int ndim) {
    std::string s = "[";
    for (int i = 0; i < ndim; i++) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string shape_text(const std::vector<int64_t> &shape) { return shape_text(shape.data(), int(shape.size())); }

/** One entry of the table: a library, its operator's spec with the library's element type, and the
 * texts neptune_ops_variant points to. */
struct Variant {
    std::string name;  // the AOT library, or the name of a variant compiled on first use
    int device = NEPTUNE_OPS_CUDA;
    const Library *library = nullptr;  // null for a variant compiled on first use
    /** A variant compiled on first use: the extern stage's descriptor (JSON, run as the AOT stages
     * are) and where each of its buffers and scalars comes from in the call's tensors, inputs then
     * outputs (scalars: the tensor and its dimension, outermost first). */
    std::string descriptor;
    std::vector<int> buffer_tensor;
    std::vector<std::pair<int, int>> scalar_source;
    std::string cache_file;
    OperatorSpec spec;
    int group = 0;
    std::vector<std::string> input_names, output_names;
    std::string inputs, outputs, signature, kernels;
    std::string broken;  // non-empty: the library does not match its operator (a bug in the table)

    const AttentionSpec &attention() const { return spec.attention; }
    bool is_attention() const { return spec.family == Family::Attention; }

    std::string describe() const {
        std::string s = name + " (" + device_name(device) + ", " + dtype_name(spec.dtype);
        if (is_attention()) {
            s += ", head dim " + std::to_string(attention().head_dim_qk);
            if (attention().head_dim_v != attention().head_dim_qk) s += "/" + std::to_string(attention().head_dim_v);
            if (group) s += ", " + std::to_string(group) + " query heads per KV head";
        }
        return s + ")";
    }
};

// Extents that stand for the named run-time dimensions in signatures: an instance at these extents
// has them in its shapes, and each is replaced by its name (no compiled extent equals one of them).
const std::vector<std::pair<int64_t, std::string>> placeholders = {
    {1001, "B"},  {1003, "Hq"}, {17, "Hkv"}, {1007, "Sq"},    {1009, "Skv"},      {1013, "D"},
    {1019, "Dv"}, {1021, "F"},  {1031, "P"}, {1033, "pages"}, {1039, "max_pages"}};

std::string signature_of(const Variant &v, const OperatorInstance &inst) {
    const bool attention = v.is_attention(), performer = v.spec.family == Family::Performer;
    auto dim = [&](int64_t e) -> std::string {
        for (const auto &[value, name] : placeholders)
            if (e == value) {
                if (performer && name == "Hq") return "H";
                if (performer && name == "Skv") return "S";
                if (!attention && !performer) return name == "B" ? "rows" : "cols";
                return name;
            }
        return std::to_string(e);
    };
    auto tensors = [&](const std::vector<TensorDesc> &ts) {
        std::string s;
        for (const TensorDesc &t : ts) {
            s += (s.empty() ? "" : ", ") + t.name + "[";
            for (size_t i = 0; i < t.shape.size(); i++) s += (i ? "," : "") + dim(t.shape[i]);
            s += std::string("] ") + dtype_name(t.dtype);
        }
        return s;
    };
    return tensors(inst.inputs) + " -> " + tensors(inst.outputs);
}

OperatorInstance placeholder_instance(const Variant &v) {
    OperatorSpec s = v.spec;
    switch (s.family) {
    case Family::Attention:
        s.attention.q_heads = 1003;
        s.attention.kv_heads = 17;  // 1003 = 17 * 59
        s.attention.seq_q = 1007;
        if (s.attention.page_size > 0) {  // the table's 1039 pages of 1031 keys
            s.attention.page_size = 1031;
            s.attention.pages = 1033;
            return instantiate(s, 1001, int64_t(1031) * 1039);
        }
        return instantiate(s, 1001, 1009);
    case Family::Performer:
        s.attention.q_heads = s.attention.kv_heads = 1003;
        s.attention.head_dim_qk = 1013;
        s.attention.head_dim_v = 1019;
        s.features = 1021;
        return instantiate(s, 1001, 1009);
    default: return instantiate(s, 1001, 1009);
    }
}

/** The variant's tensors as its instance names them: names in call order, and the signature. */
void name_tensors(Variant &v, const OperatorInstance &inst) {
    for (const TensorDesc &t : inst.inputs) v.input_names.push_back(t.name);
    for (const TensorDesc &t : inst.outputs) v.output_names.push_back(t.name);
    for (const std::string &n : v.input_names) v.inputs += (v.inputs.empty() ? "" : ",") + n;
    for (const std::string &n : v.output_names) v.outputs += (v.outputs.empty() ? "" : ",") + n;
    v.signature = signature_of(v, inst);
}

/** Reads the library's metadata into a variant; a mismatch with the operator marks it broken. */
Variant make_variant(const Library &lib) {
    Variant v;
    v.library = &lib;
    v.name = lib.name;
    v.device = lib.device;
    const std::optional<OperatorSpec> spec = find_operator(lib.op);
    if (!spec) {
        v.broken = std::string(lib.name) + " is listed for the unknown operator " + lib.op;
        v.spec.name = lib.op;
        return v;
    }
    v.spec = *spec;
    const halide_filter_metadata_t *md = lib.metadata();
    std::vector<const halide_filter_argument_t *> ins, outs;
    for (int i = 0; i < md->num_arguments; i++) {
        const halide_filter_argument_t &a = md->arguments[i];
        (a.kind == halide_argument_kind_output_buffer ? outs : ins).push_back(&a);
    }
    if (!ins.empty() && !dtype_of_runtime_type(ins[0]->type, v.spec.dtype))
        v.broken = std::string(lib.name) + ": its first input has an element type the ABI does not know";
    if (v.is_attention() && v.attention().decode) v.group = v.attention().q_heads / v.attention().kv_heads;
    const OperatorInstance inst = placeholder_instance(v);
    name_tensors(v, inst);
    // The library's arguments must be the instance's tensors, in order, with their ranks and types.
    auto matches = [](const std::vector<const halide_filter_argument_t *> &args, const std::vector<TensorDesc> &ts,
                      bool inputs) {
        if (args.size() != ts.size()) return false;
        for (size_t i = 0; i < ts.size(); i++) {
            DType t;
            if (args[i]->kind == halide_argument_kind_input_scalar || args[i]->dimensions != int(ts[i].shape.size()) ||
                !dtype_of_runtime_type(args[i]->type, t) || t != ts[i].dtype || (inputs && ts[i].name != args[i]->name))
                return false;
        }
        return true;
    };
    if (v.broken.empty() && (!matches(ins, inst.inputs, true) || !matches(outs, inst.outputs, false)))
        v.broken = std::string(lib.name) + "'s arguments are not the tensors of " + lib.op;
    // Performer's groups are not a pattern of the tile backend: its GPU library is Halide's CUDA form.
    v.kernels = lib.device == NEPTUNE_OPS_HOST       ? "host"
                : v.spec.family == Family::Performer ? "halide_cuda"
                                                     : "neptune";
    return v;
}

/** An operator that only compiles on first use, as listed before its first call. */
Variant first_use_template(const OperatorSpec &op) {
    Variant v;
    v.name = op.name + "_on_first_use";
    v.device = NEPTUNE_OPS_CUDA;
    v.spec = op;
    v.kernels = "neptune, compiled on first use";
    const OperatorInstance inst = placeholder_instance(v);
    name_tensors(v, inst);
    return v;
}

bool is_template(const Variant &v) { return !v.library && v.descriptor.empty(); }

const std::vector<Variant> &variants() {
    static const std::vector<Variant> table = [] {
        halide_set_error_handler(on_halide_error);
        std::vector<Variant> t;
        for (const Library &lib : libraries()) {
            try {
                t.push_back(make_variant(lib));
            } catch (const std::exception &e) {
                Variant broken{};
                broken.library = &lib;
                broken.name = lib.name;
                broken.device = lib.device;
                broken.spec.name = lib.op;
                broken.broken = std::string(lib.name) + ": " + e.what();
                t.push_back(broken);
            }
        }
        // Operators with no AOT library that the tile backend lowers: a template each, which names
        // the tensors and is compiled on first use for the call's (mismatch says so).
        for (const OperatorSpec &op : operator_suite()) {
            if (op.family != Family::Attention || op.attention.page_size == 0) continue;
            if (std::any_of(t.begin(), t.end(), [&](const Variant &v) { return v.spec.name == op.name; })) continue;
            t.push_back(first_use_template(op));
        }
        return t;
    }();
    return table;
}

// Variants compiled on first use follow the AOT ones, in the order they were made; a deque keeps
// the references handed out valid as it grows.
std::mutex first_use_lock;
std::deque<Variant> first_use_table;

int num_variants() {
    std::lock_guard<std::mutex> hold(first_use_lock);
    return int(variants().size() + first_use_table.size());
}

const Variant &variant_at(int index) {
    const std::vector<Variant> &t = variants();
    const int count = num_variants();
    if (index < 0 || index >= count)
        fail(NEPTUNE_OPS_ERROR_ARGUMENT,
             "variant index " + std::to_string(index) + " is out of range [0, " + std::to_string(count) + ")");
    if (size_t(index) >= t.size()) {
        std::lock_guard<std::mutex> hold(first_use_lock);
        return first_use_table[size_t(index) - t.size()];
    }
    if (!t[size_t(index)].broken.empty())
        fail(NEPTUNE_OPS_ERROR_INTERNAL, "Neptune internal error: " + t[size_t(index)].broken);
    return t[size_t(index)];
}

/** The operators of the table, in table order: "prefill_global, prefill_causal, ...". */
std::string op_names() {
    std::vector<std::string> seen;
    for (const Variant &v : variants())
        if (std::find(seen.begin(), seen.end(), v.spec.name) == seen.end()) seen.push_back(v.spec.name);
    std::string s;
    for (const std::string &n : seen) s += (s.empty() ? "" : ", ") + n;
    return s;
}

/** The variants of `op`, in table order; an unknown operator is an argument error. */
std::vector<int> variants_of(const char *op) {
    if (!op) fail(NEPTUNE_OPS_ERROR_ARGUMENT, "the operator name is NULL");
    std::vector<int> found;
    const std::vector<Variant> &t = variants();
    for (size_t i = 0; i < t.size(); i++)
        if (t[i].spec.name == op) found.push_back(int(i));
    if (found.empty())
        fail(NEPTUNE_OPS_ERROR_ARGUMENT, std::string("unknown operator '") + op + "'; this library has " + op_names());
    std::lock_guard<std::mutex> hold(first_use_lock);
    for (size_t i = 0; i < first_use_table.size(); i++)
        if (first_use_table[i].spec.name == op) found.push_back(int(t.size() + i));
    return found;
}

// ---- Checking a call's tensors -----------------------------------------------------------------

bool dense(const neptune_ops_tensor &t) {
    for (int d = 0; d < t.ndim; d++)
        if (t.strides[d] != 0) return false;
    return true;
}

std::string strides_text(const neptune_ops_tensor &t) {
    std::string s = "[";
    for (int i = 0; i < t.ndim; i++) s += (i ? ", " : "") + std::to_string(t.strides[i]);
    return s + "]";
}

/** Strides (unless all 0, dense): positive where the extent is above 1, the innermost 1, and every
 * element within 32-bit offsets (the libraries' and kernels' indexing). */
void check_strides(const std::string &name, const neptune_ops_tensor &t) {
    if (dense(t)) return;
    int64_t last = 0;
    for (int d = 0; d < t.ndim; d++) {
        if (t.shape[d] == 1) continue;  // never stepped over
        if (t.strides[d] < 1)
            fail(NEPTUNE_OPS_ERROR_SHAPE,
                 name + " has strides " + strides_text(t) + ": strides must be positive (or all 0 for a dense tensor)");
        if (d == t.ndim - 1 && t.strides[d] != 1)
            fail(NEPTUNE_OPS_ERROR_SHAPE, name + " has strides " + strides_text(t) +
                                              ": its innermost dimension must be contiguous (stride 1); pass a "
                                              "copy that is (torch: .contiguous())");
        if (t.strides[d] > std::numeric_limits<int32_t>::max() / std::max<int64_t>(1, t.shape[d] - 1))
            last = std::numeric_limits<int64_t>::max() / 2;
        else
            last += (t.shape[d] - 1) * t.strides[d];
    }
    if (last >= std::numeric_limits<int32_t>::max())
        fail(NEPTUNE_OPS_ERROR_UNSUPPORTED, name + " has strides " + strides_text(t) +
                                                ": its last element lies beyond 2^31 - 1 elements from its first, "
                                                "past the libraries' 32-bit offsets");
}

/** Checks the tensor array and each tensor's header (not its extents against the operator). */
void check_tensors(const std::string &who, const neptune_ops_tensor *ts, int n, const std::vector<std::string> &names,
                   const char *what, bool need_data) {
    if (n != int(names.size()))
        fail(
            NEPTUNE_OPS_ERROR_ARGUMENT, who + ": " + std::to_string(n) + " " + what + " given, expected " +
                                            std::to_string(names.size()) + " (" +
                                            [&] {
                                                std::string s;
                                                for (const std::string &x : names) s += (s.empty() ? "" : ", ") + x;
                                                return s;
                                            }() +
                                            ")");
    if (n > 0 && !ts) fail(NEPTUNE_OPS_ERROR_ARGUMENT, who + ": the " + what + " array is NULL");
    for (int i = 0; i < n; i++) {
        const neptune_ops_tensor &t = ts[i];
        const std::string name = who + ": " + names[size_t(i)];
        // Checked first: a caller of another version lays its array out differently.
        if (t.abi != NEPTUNE_OPS_ABI_VERSION)
            fail(NEPTUNE_OPS_ERROR_ARGUMENT,
                 name + " has abi " + std::to_string(t.abi) + ", expected " + std::to_string(NEPTUNE_OPS_ABI_VERSION) +
                     ": the caller was built against another NeptuneOps.h (version 1 tensors had no strides); "
                     "rebuild it against this library's header and set each tensor's abi to "
                     "NEPTUNE_OPS_ABI_VERSION");
        if (need_data && !t.data) fail(NEPTUNE_OPS_ERROR_ARGUMENT, name + " is NULL (its data pointer)");
        if (t.ndim < 1 || t.ndim > NEPTUNE_OPS_MAX_DIMS)
            fail(NEPTUNE_OPS_ERROR_SHAPE, name + " has ndim " + std::to_string(t.ndim) + ", expected 1 to " +
                                              std::to_string(NEPTUNE_OPS_MAX_DIMS));
        for (int d = 0; d < t.ndim; d++)
            if (t.shape[d] < 1)
                fail(NEPTUNE_OPS_ERROR_SHAPE,
                     name + " has shape " + shape_text(t.shape, t.ndim) + ": extents must be positive");
        if (t.dtype < NEPTUNE_OPS_F16 || t.dtype > NEPTUNE_OPS_I32)
            fail(NEPTUNE_OPS_ERROR_DTYPE,
                 name + " has dtype code " + std::to_string(t.dtype) + ", not a neptune_ops_dtype");
        if (t.device != NEPTUNE_OPS_CUDA && t.device != NEPTUNE_OPS_HOST)
            fail(NEPTUNE_OPS_ERROR_ARGUMENT,
                 name + " has device code " + std::to_string(t.device) + ", not a neptune_ops_device");
        check_strides(name, t);
    }
}

/** The ranks every variant of the operator expects of its inputs, checked before reading extents. */
void check_ranks(const Variant &v, const neptune_ops_tensor *in) {
    const OperatorInstance inst = placeholder_instance(v);
    for (size_t i = 0; i < inst.inputs.size(); i++)
        if (in[i].ndim != int(inst.inputs[i].shape.size()))
            fail(NEPTUNE_OPS_ERROR_SHAPE,
                 v.spec.name + ": " + inst.inputs[i].name + " has shape " + shape_text(in[i].shape, in[i].ndim) +
                     ", expected " + std::to_string(inst.inputs[i].shape.size()) + " dimensions (" + v.signature + ")");
}

int32_t int_extent(const std::string &who, const char *what, int64_t e) {
    if (e > std::numeric_limits<int32_t>::max())
        fail(NEPTUNE_OPS_ERROR_UNSUPPORTED, who + ": " + what + " " + std::to_string(e) + " does not fit 32 bits");
    return int32_t(e);
}

/** The operator's instance at the extents the inputs carry (ranks already checked). */
OperatorInstance instance_for(const Variant &v, const neptune_ops_tensor *in) {
    OperatorSpec s = v.spec;
    const std::string &who = s.name;
    try {
        switch (s.family) {
        case Family::Attention:
            s.attention.q_heads = int_extent(who, "q_heads", in[0].shape[1]);
            s.attention.kv_heads = int_extent(who, "kv_heads", in[1].shape[1]);
            if (!s.attention.decode) s.attention.seq_q = in[0].shape[2];
            if (s.attention.page_size > 0) {  // k_cache [pages, Hkv, P, D], page_table [B, max_pages]
                s.attention.page_size = int_extent(who, "page size", in[1].shape[2]);
                s.attention.pages = in[1].shape[0];
                return instantiate(s, in[0].shape[0], in[3].shape[1] * in[1].shape[2]);
            }
            return instantiate(s, in[0].shape[0], in[1].shape[2]);
        case Family::Performer:
            s.attention.q_heads = s.attention.kv_heads = int_extent(who, "heads", in[0].shape[1]);
            s.attention.head_dim_qk = int_extent(who, "head dim", in[0].shape[3]);
            s.attention.head_dim_v = int_extent(who, "head dim of v", in[2].shape[3]);
            s.features = int_extent(who, "features", in[3].shape[0]);
            return instantiate(s, in[0].shape[0], in[0].shape[2]);
        default: return instantiate(s, in[0].shape[0], in[0].shape[1]);
        }
    } catch (const std::invalid_argument &e) { fail(NEPTUNE_OPS_ERROR_SHAPE, e.what()); }
}

/** Checks one tensor against what the instance expects of it. */
void check_tensor(const Variant &v, const neptune_ops_tensor &t, const TensorDesc &want, bool output) {
    const std::string name = v.spec.name + ": " + (output ? "output " : "") + want.name;
    if (t.dtype != ops_dtype(want.dtype))
        fail(NEPTUNE_OPS_ERROR_DTYPE, name + " is " + abi_dtype_name(t.dtype) + ", expected " + dtype_name(want.dtype) +
                                          " (" + v.describe() + ")");
    if (t.device != v.device)
        fail(NEPTUNE_OPS_ERROR_ARGUMENT, name + " is on the " + device_name(t.device) +
                                             ", the variant's tensors on the " + device_name(v.device) + " (" +
                                             v.describe() + ")");
    bool same = t.ndim == int(want.shape.size());
    for (int d = 0; same && d < t.ndim; d++) same = t.shape[d] == want.shape[size_t(d)];
    if (!same)
        fail(NEPTUNE_OPS_ERROR_SHAPE, name + " has shape " + shape_text(t.shape, t.ndim) + ", expected " +
                                          shape_text(want.shape) + " (" + v.signature + ")");
    // The libraries index with 32 bits (Halide's buffers without large_buffers, the kernels' extents).
    if (want.numel() > std::numeric_limits<int32_t>::max())
        fail(NEPTUNE_OPS_ERROR_UNSUPPORTED, name + " has " + std::to_string(want.numel()) +
                                                " elements; the AOT libraries take at most 2^31 - 1 per tensor");
}

/** Every check of a call but the device's: returns the instance, whose outputs the call must match. */
OperatorInstance check_call(const Variant &v, const neptune_ops_tensor *in, int n_in, bool need_data) {
    check_tensors(v.spec.name, in, n_in, v.input_names, "inputs", need_data);
    check_ranks(v, in);
    const OperatorInstance inst = instance_for(v, in);
    for (size_t i = 0; i < inst.inputs.size(); i++) check_tensor(v, in[i], inst.inputs[i], false);
    return inst;
}

/** Why variant v does not take these inputs ("" if it does), beyond their shapes. */
std::string mismatch(const Variant &v, const neptune_ops_tensor *in) {
    if (in[0].device != v.device) return std::string("its tensors are on the ") + device_name(v.device);
    if (is_template(v)) return "it is compiled for the tensors of a first call";
    if (in[0].dtype != ops_dtype(v.spec.dtype)) return std::string("it takes ") + dtype_name(v.spec.dtype);
    if (v.is_attention()) {
        if (in[0].shape[3] != v.attention().head_dim_qk || in[2].shape[3] != v.attention().head_dim_v)
            return "it is compiled for head dim " + std::to_string(v.attention().head_dim_qk) +
                   (v.attention().head_dim_v != v.attention().head_dim_qk
                        ? "/" + std::to_string(v.attention().head_dim_v)
                        : "");
        if (v.group && in[1].shape[1] * v.group != in[0].shape[1])
            return "it is compiled for " + std::to_string(v.group) + " query heads per KV head";
    }
    return "";
}

/** Whether a GPU call that no AOT variant takes gets one compiled on first use: the operators the
 * tile backend lowers, at the suite's element types. */
bool compiles_on_first_use(const Variant &like, const neptune_ops_tensor *in) {
    return in[0].device == NEPTUNE_OPS_CUDA && (in[0].dtype == NEPTUNE_OPS_F16 || in[0].dtype == NEPTUNE_OPS_BF16) &&
           (like.spec.family == Family::Attention || row_wise(like.spec.family));
}

/** The GPU family NVRTC compiles for: Hopper's own instructions on compute capability 9.0. */
std::string device_arch() {
    neptune_device_info info{};
    if (neptune_get_device_info(&info) != NEPTUNE_OK)
        fail(NEPTUNE_OPS_ERROR_DEVICE,
             std::string("compiling a variant needs the GPU, and there is none: ") + neptune_last_error());
    const int cc = info.cc_major * 10 + info.cc_minor;
    if (cc < 80)
        fail(NEPTUNE_OPS_ERROR_UNSUPPORTED,
             std::string("Neptune's kernels need compute capability 8.0 or later; the GPU ") + info.name + " has " +
                 std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor));
    return cc == 90 ? "sm_90a" : "sm_" + std::to_string(cc);
}

/** Compiles (or finds in the cache) the variant of `like`'s operator for these inputs and appends it
 * to the table; returns its index. */
int add_first_use_variant(const Variant &like, const neptune_ops_tensor *in) {
    const std::string &op = like.spec.name;
    const DType dtype = in[0].dtype == NEPTUNE_OPS_BF16 ? DType::BF16 : DType::F16;
    FirstUseRequest r;
    r.op = op;
    r.dtype = in[0].dtype;
    Variant v;
    v.device = NEPTUNE_OPS_CUDA;
    v.spec = like.spec;
    v.spec.dtype = dtype;
    v.name = op + "_" + dtype_name(dtype);
    if (like.is_attention()) {
        AttentionSpec &a = v.spec.attention;
        r.head_dim_qk = a.head_dim_qk = int_extent(op, "head dim", in[0].shape[3]);
        r.head_dim_v = a.head_dim_v = int_extent(op, "head dim of v", in[2].shape[3]);
        v.name += "_d" + std::to_string(a.head_dim_qk);
        if (a.head_dim_v != a.head_dim_qk) v.name += "x" + std::to_string(a.head_dim_v);
        if (a.decode) {
            if (in[1].shape[1] < 1 || in[0].shape[1] % in[1].shape[1] != 0)
                fail(NEPTUNE_OPS_ERROR_SHAPE, op + ": q has " + std::to_string(in[0].shape[1]) + " heads, k " +
                                                  std::to_string(in[1].shape[1]) +
                                                  "; q's heads must be a multiple of k's");
            r.group = v.group = int_extent(op, "query heads per KV head", in[0].shape[1] / in[1].shape[1]);
            a.q_heads = v.group;
            a.kv_heads = 1;
            v.name += "_g" + std::to_string(v.group);
        }
    }
    r.arch = device_arch();
    {
        // Made already by another thread meanwhile: take it.
        std::lock_guard<std::mutex> hold(first_use_lock);
        for (size_t i = 0; i < first_use_table.size(); i++)
            if (first_use_table[i].name == v.name) return int(variants().size() + i);
    }
    FirstUseVariant f;
    try {
        f = first_use_variant(r);
    } catch (const FirstUseError &e) { fail(e.status, e.message); }
    v.descriptor = f.descriptor;
    v.cache_file = f.cache_file;
    v.kernels = "neptune";
    const OperatorInstance inst = placeholder_instance(v);
    name_tensors(v, inst);
    // Where the stage's buffers and scalars come from; a descriptor that does not fit the operator's
    // tensors is a stale or damaged cache file, or a bug in the compiler library.
    auto bad = [&](const std::string &why) {
        fail(NEPTUNE_OPS_ERROR_INTERNAL, "Neptune internal error: " + op + ": the variant in " + v.cache_file + " " +
                                             why + " (delete the file to compile it anew)");
    };
    interop::GroupDescriptor d;
    try {
        d = interop::read_descriptor(v.descriptor);
    } catch (const std::exception &e) { bad(std::string("is unreadable: ") + e.what()); }
    std::vector<std::string> names = v.input_names;
    names.insert(names.end(), v.output_names.begin(), v.output_names.end());
    if (d.buffers.size() != names.size()) bad("has " + std::to_string(d.buffers.size()) + " buffers");
    for (const interop::TensorSpec &t : d.buffers) {
        const auto at = std::find(names.begin(), names.end(), t.name);
        if (at == names.end()) bad("reads or writes " + t.name + ", not a tensor of the operator");
        v.buffer_tensor.push_back(int(at - names.begin()));
    }
    const std::vector<TensorDesc> &ins = inst.inputs, &outs = inst.outputs;
    for (const std::string &s : d.scalars) {
        bool found = false;
        for (size_t b = 0; b < d.buffers.size() && !found; b++)
            for (size_t k = 0; k < d.buffers[b].dims.size() && !found; k++)
                if (d.buffers[b].dims[k] == s) {
                    const int t = v.buffer_tensor[b];
                    const size_t rank = size_t(t) < ins.size() ? ins[size_t(t)].shape.size()
                                                               : outs[size_t(t) - ins.size()].shape.size();
                    if (d.buffers[b].dims.size() != rank) bad("gives " + d.buffers[b].name + " another rank");
                    v.scalar_source.emplace_back(t, int(rank - 1 - k));
                    found = true;
                }
        if (!found) bad("has the scalar " + s + ", the extent of none of its buffers");
    }
    if (d.scalars.size() > size_t(interop::extern_scalars)) bad("has too many scalars");
    std::lock_guard<std::mutex> hold(first_use_lock);
    first_use_table.push_back(std::move(v));
    return int(variants().size() + first_use_table.size() - 1);
}

int select_variant(const char *op, const neptune_ops_tensor *in, int n_in) {
    const std::vector<int> candidates = variants_of(op);
    const Variant &first = variant_at(candidates[0]);
    check_tensors(op, in, n_in, first.input_names, "inputs", false);
    check_ranks(first, in);
    for (int i = 1; i < n_in; i++)
        if (in[i].device != in[0].device)
            fail(NEPTUNE_OPS_ERROR_ARGUMENT, std::string(op) + ": " + first.input_names[size_t(i)] + " is on the " +
                                                 device_name(in[i].device) + ", " + first.input_names[0] + " on the " +
                                                 device_name(in[0].device));
    std::string why;
    bool device_found = false, dtype_found = false;
    for (int c : candidates) {
        const Variant &v = variant_at(c);
        const std::string m = mismatch(v, in);
        if (m.empty()) {
            check_call(v, in, n_in, false);
            return c;
        }
        device_found = device_found || in[0].device == v.device;
        dtype_found = dtype_found || (in[0].device == v.device && in[0].dtype == ops_dtype(v.spec.dtype));
        why += (why.empty() ? "" : "; ") + v.describe() + ": " + m;
    }
    const std::string none = std::string(op) + ": no compiled variant takes " + first.input_names[0] + " " +
                             shape_text(in[0].shape, in[0].ndim) + " " + abi_dtype_name(in[0].dtype) + " on the " +
                             device_name(in[0].device) + " (" + why + ")";
    if (compiles_on_first_use(first, in)) {
        try {
            return add_first_use_variant(first, in);
        } catch (const Failure &f) { fail(f.status, none + "; " + f.message); }
    }
    // A dtype that no variant on the tensors' device takes is the dtype's fault; the rest is unsupported.
    fail(device_found && !dtype_found ? NEPTUNE_OPS_ERROR_DTYPE : NEPTUNE_OPS_ERROR_UNSUPPORTED, none);
}

// ---- Running a variant -------------------------------------------------------------------------

int status_of_halide(int code) {
    switch (code) {
    case halide_error_code_bad_type: return NEPTUNE_OPS_ERROR_DTYPE;
    case halide_error_code_bad_dimensions:
    case halide_error_code_constraint_violated:
    case halide_error_code_access_out_of_bounds:
    case halide_error_code_buffer_extents_too_large:
    case halide_error_code_buffer_allocation_too_large:
    case halide_error_code_buffer_extents_negative: return NEPTUNE_OPS_ERROR_SHAPE;
    default: return NEPTUNE_OPS_ERROR_LIBRARY;
    }
}

/** A tensor as a halide_buffer_t (dimensions innermost first), host or wrapped device memory. */
struct WrappedBuffer {
    halide_buffer_t buffer{};
    std::array<halide_dimension_t, NEPTUNE_OPS_MAX_DIMS> dims{};
    bool wrapped = false;
    ~WrappedBuffer() {
        if (wrapped) halide_cuda_detach_device_ptr(nullptr, &buffer);
    }
};

void wrap(const Variant &v, const std::string &name, const neptune_ops_tensor &t, const TensorDesc &d, bool input,
          WrappedBuffer &w) {
    w.buffer.type = halide_runtime_type(d.dtype);
    w.buffer.dimensions = t.ndim;
    w.buffer.dim = w.dims.data();
    // Halide's dimensions are innermost first; strides as given (check_strides), else dense.
    int32_t stride = 1;
    const bool given = !dense(t);
    for (int k = 0; k < t.ndim; k++) {
        const int64_t extent = t.shape[t.ndim - 1 - k];
        const int32_t s = given ? int32_t(t.strides[t.ndim - 1 - k]) : stride;
        w.dims[size_t(k)] = halide_dimension_t(0, int32_t(extent), s);
        stride = int32_t(stride * extent);  // numel fits 32 bits (check_tensor)
    }
    if (v.device == NEPTUNE_OPS_HOST) {
        w.buffer.host = static_cast<uint8_t *>(t.data);
        if (input) w.buffer.set_host_dirty(true);
        return;
    }
    if (halide_cuda_wrap_device_ptr(nullptr, &w.buffer, uint64_t(reinterpret_cast<uintptr_t>(t.data))) != 0)
        fail(NEPTUNE_OPS_ERROR_DEVICE, v.spec.name + ": " + name + ": Halide cannot wrap the device pointer");
    w.wrapped = true;
    // Inputs live on the device only: a host read would fail on the missing host copy, not read garbage.
    if (input) w.buffer.set_device_dirty(true);
}

void check_device(const Variant &v, const std::vector<std::pair<std::string, const neptune_ops_tensor *>> &tensors) {
    if (!neptune_cuda_available())
        fail(NEPTUNE_OPS_ERROR_DEVICE,
             v.spec.name + ": " + v.name + " runs on the GPU, and there is none: " + neptune_last_error());
    for (const auto &[name, t] : tensors)
        if (neptune_check_device_pointer(t->data) != NEPTUNE_OK)
            fail(NEPTUNE_OPS_ERROR_DEVICE, v.spec.name + ": " + name + ": " + neptune_last_error());
}

/** The launcher's compiler of deferred kernel sets (NeptuneHalide.h): the cache's image, else the
 * compiler library's (FirstUse.h). */
int compile_deferred_kernels(const char *source, const char *arch, const char *name, char **image, size_t *size,
                             char **message) {
    auto copy_out = [](const std::string &s) {
        char *p = static_cast<char *>(std::malloc(s.size() + 1));
        if (p) std::memcpy(p, s.data(), s.size() + 1);
        return p;
    };
    *image = *message = nullptr;
    *size = 0;
    try {
        const std::string bytes = first_use_kernels(source, arch, name);
        *image = static_cast<char *>(std::malloc(bytes.size()));
        if (!*image) throw std::bad_alloc();
        std::memcpy(*image, bytes.data(), bytes.size());
        *size = bytes.size();
        return 0;
    } catch (const FirstUseError &e) { *message = copy_out(e.message); } catch (const std::exception &e) {
        *message = copy_out(e.what());
    }
    return 1;
}

/** A variant compiled on first use: its extern stage, called as a pipeline would, with the call's
 * buffers (inputs, then outputs) in the descriptor's order and its scalars read from their extents. */
int run_first_use(const Variant &v, std::vector<WrappedBuffer> &tensors) {
    static std::once_flag installed;
    std::call_once(installed, [] { neptune_halide_set_kernel_compiler(compile_deferred_kernels); });
    std::vector<halide_buffer_t *> buffers;
    for (int t : v.buffer_tensor) buffers.push_back(&tensors[size_t(t)].buffer);
    std::array<int32_t, interop::extern_scalars> scalars{};
    for (size_t i = 0; i < v.scalar_source.size(); i++) {
        const halide_buffer_t &b = tensors[size_t(v.scalar_source[i].first)].buffer;
        scalars[i] = b.dim[b.dimensions - 1 - v.scalar_source[i].second].extent;
    }
    return interop::run_extern_stage(nullptr, v.descriptor.c_str(), halide_cuda_device_interface(), scalars.data(),
                                     buffers.data(), int(buffers.size()));
}

void run_variant(int index, const neptune_ops_tensor *in, int n_in, const neptune_ops_tensor *out, int n_out,
                 void *stream) {
    const Variant &v = variant_at(index);
    if (is_template(v))
        fail(NEPTUNE_OPS_ERROR_ARGUMENT, v.spec.name + ": " + v.name +
                                             " lists the operator; neptune_ops_select (or neptune_ops_call) compiles "
                                             "the variant that runs the tensors");
    const OperatorInstance inst = check_call(v, in, n_in, true);
    check_tensors(v.spec.name, out, n_out, v.output_names, "outputs", true);
    for (size_t i = 0; i < inst.outputs.size(); i++) check_tensor(v, out[i], inst.outputs[i], true);
    std::vector<std::pair<std::string, const neptune_ops_tensor *>> all;
    for (int i = 0; i < n_in; i++) all.emplace_back(v.input_names[size_t(i)], &in[i]);
    for (int i = 0; i < n_out; i++) all.emplace_back("output " + v.output_names[size_t(i)], &out[i]);
    if (v.device == NEPTUNE_OPS_CUDA) check_device(v, all);

    const CallMessages messages;
    std::vector<WrappedBuffer> buffers(all.size());
    std::vector<void *> args;
    for (size_t i = 0; i < all.size(); i++) {
        const bool input = i < size_t(n_in);
        wrap(v, all[i].first, *all[i].second, input ? inst.inputs[i] : inst.outputs[i - size_t(n_in)], input,
             buffers[i]);
        args.push_back(&buffers[i].buffer);
    }
    void *previous = nullptr;
    if (v.device == NEPTUNE_OPS_CUDA) previous = neptune_halide_set_stream(stream);
    const int rc = v.library ? v.library->argv(args.data()) : run_first_use(v, buffers);
    if (v.device == NEPTUNE_OPS_CUDA) neptune_halide_set_stream(previous);
    if (rc != 0)
        fail(status_of_halide(rc), v.spec.name + ": " + (v.library ? "the AOT library " : "the variant ") + v.name +
                                       " failed (Halide error " + std::to_string(rc) + "): " + messages.take());
}

/** Runs `body` as an ABI call: its status, and the message of a failure in last_error. */
template <typename F>
int guarded(F &&body) {
    try {
        return body();
    } catch (const Failure &f) {
        last_error = f.message;
        return f.status;
    } catch (const std::exception &e) {
        last_error = std::string("Neptune internal error: ") + e.what();
        return NEPTUNE_OPS_ERROR_INTERNAL;
    } catch (...) {
        last_error = "Neptune internal error: an unknown exception";
        return NEPTUNE_OPS_ERROR_INTERNAL;
    }
}

/** A per-operator entry: its tensors, each checked for NULL, to neptune_ops_call. */
int call_op(const char *op, std::initializer_list<const neptune_ops_tensor *> ins,
            std::initializer_list<const neptune_ops_tensor *> outs, void *stream) {
    return guarded([&] {
        const Variant &first = variant_at(variants_of(op)[0]);
        std::vector<neptune_ops_tensor> in, out;
        auto take = [&](std::initializer_list<const neptune_ops_tensor *> ts, const std::vector<std::string> &names,
                        std::vector<neptune_ops_tensor> &into) {
            for (const neptune_ops_tensor *t : ts) {
                if (!t)
                    fail(NEPTUNE_OPS_ERROR_ARGUMENT,
                         std::string(op) + ": " + names[into.size()] + " is NULL (the tensor)");
                into.push_back(*t);
            }
        };
        take(ins, first.input_names, in);
        take(outs, first.output_names, out);
        const int index = select_variant(op, in.data(), int(in.size()));
        run_variant(index, in.data(), int(in.size()), out.data(), int(out.size()), stream);
        return int(NEPTUNE_OPS_OK);
    });
}

}  // namespace

}  // namespace neptune::ops

using namespace neptune::ops;

extern "C" {

const char *neptune_ops_last_error(void) { return last_error.c_str(); }

int neptune_ops_abi_version(void) { return NEPTUNE_OPS_ABI_VERSION; }

const char *neptune_ops_version(void) { return NEPTUNE_VERSION; }

int neptune_ops_num_variants(void) { return num_variants(); }

int neptune_ops_get_variant(int index, neptune_ops_variant *out) {
    return guarded([&] {
        if (!out) fail(NEPTUNE_OPS_ERROR_ARGUMENT, "neptune_ops_get_variant: out is NULL");
        const Variant &v = variant_at(index);
        const bool attention = v.is_attention();
        const neptune::AttentionSpec &a = v.attention();
        *out = neptune_ops_variant{};
        out->name = v.name.c_str();
        out->op = v.spec.name.c_str();
        out->family = family_name(v.spec.family);
        out->kernels = v.kernels.c_str();
        out->inputs = v.inputs.c_str();
        out->outputs = v.outputs.c_str();
        out->signature = v.signature.c_str();
        out->device = v.device;
        out->dtype = ops_dtype(v.spec.dtype);
        out->head_dim_qk = attention ? a.head_dim_qk : 0;
        out->head_dim_v = attention ? a.head_dim_v : 0;
        out->group = v.group;
        out->decode = attention && a.decode ? 1 : 0;
        out->mask = attention ? mask_name(a.mask) : "";
        out->window = attention ? a.window : 0;
        out->score_mod = attention ? score_mod_name(a.mod) : "";
        out->softcap = attention ? a.softcap : 0.0;
        out->scale = attention ? a.score_scale() : 0.0;
        const bool norm = v.spec.family == neptune::Family::LayerNorm || v.spec.family == neptune::Family::RmsNorm;
        out->eps = norm ? v.spec.eps : 0.0;
        return int(NEPTUNE_OPS_OK);
    });
}

int neptune_ops_select(const char *op, const neptune_ops_tensor *inputs, int num_inputs, int *index) {
    return guarded([&] {
        if (!index) fail(NEPTUNE_OPS_ERROR_ARGUMENT, "neptune_ops_select: index is NULL");
        *index = select_variant(op, inputs, num_inputs);
        return int(NEPTUNE_OPS_OK);
    });
}

int neptune_ops_output_shapes(int index, const neptune_ops_tensor *inputs, int num_inputs, neptune_ops_tensor *outputs,
                              int num_outputs) {
    return guarded([&] {
        const Variant &v = variant_at(index);
        const neptune::OperatorInstance inst = check_call(v, inputs, num_inputs, false);
        if (num_outputs != int(inst.outputs.size()) || (num_outputs > 0 && !outputs))
            fail(NEPTUNE_OPS_ERROR_ARGUMENT, v.spec.name + ": room for " + std::to_string(num_outputs) +
                                                 " outputs given, " + std::to_string(inst.outputs.size()) +
                                                 " needed (" + v.outputs + ")");
        for (size_t i = 0; i < inst.outputs.size(); i++) {
            neptune_ops_tensor &o = outputs[i];
            const neptune::TensorDesc &d = inst.outputs[i];
            o.dtype = ops_dtype(d.dtype);
            o.device = v.device;
            o.ndim = int32_t(d.shape.size());
            o.abi = NEPTUNE_OPS_ABI_VERSION;
            std::fill(std::begin(o.shape), std::end(o.shape), int64_t(0));
            std::fill(std::begin(o.strides), std::end(o.strides), int64_t(0));  // dense
            std::copy(d.shape.begin(), d.shape.end(), o.shape);
        }
        return int(NEPTUNE_OPS_OK);
    });
}

int neptune_ops_run(int index, const neptune_ops_tensor *inputs, int num_inputs, const neptune_ops_tensor *outputs,
                    int num_outputs, void *stream) {
    return guarded([&] {
        run_variant(index, inputs, num_inputs, outputs, num_outputs, stream);
        return int(NEPTUNE_OPS_OK);
    });
}

int neptune_ops_call(const char *op, const neptune_ops_tensor *inputs, int num_inputs,
                     const neptune_ops_tensor *outputs, int num_outputs, void *stream) {
    return guarded([&] {
        run_variant(select_variant(op, inputs, num_inputs), inputs, num_inputs, outputs, num_outputs, stream);
        return int(NEPTUNE_OPS_OK);
    });
}

#define NEPTUNE_OPS_DEFINE_ATTENTION(op)                                                                        \
    int neptune_ops_##op(const neptune_ops_tensor *q, const neptune_ops_tensor *k, const neptune_ops_tensor *v, \
                         const neptune_ops_tensor *out, void *stream) {                                         \
        return call_op(#op, {q, k, v}, {out}, stream);                                                          \
    }
#define NEPTUNE_OPS_DEFINE_ATTENTION_ALIBI(op)                                                                  \
    int neptune_ops_##op(const neptune_ops_tensor *q, const neptune_ops_tensor *k, const neptune_ops_tensor *v, \
                         const neptune_ops_tensor *slopes, const neptune_ops_tensor *out, void *stream) {       \
        return call_op(#op, {q, k, v, slopes}, {out}, stream);                                                  \
    }
NEPTUNE_OPS_DEFINE_ATTENTION(prefill_global)
NEPTUNE_OPS_DEFINE_ATTENTION(prefill_causal)
NEPTUNE_OPS_DEFINE_ATTENTION_ALIBI(prefill_alibi)
NEPTUNE_OPS_DEFINE_ATTENTION(prefill_gqa)
NEPTUNE_OPS_DEFINE_ATTENTION(prefill_softcap)
NEPTUNE_OPS_DEFINE_ATTENTION(prefill_windowed)
NEPTUNE_OPS_DEFINE_ATTENTION(decode_causal)
NEPTUNE_OPS_DEFINE_ATTENTION_ALIBI(decode_alibi)
NEPTUNE_OPS_DEFINE_ATTENTION(decode_gqa)
NEPTUNE_OPS_DEFINE_ATTENTION(decode_softcap)
#define NEPTUNE_OPS_DEFINE_PAGED(op)                                                                        \
    int neptune_ops_##op(const neptune_ops_tensor *q, const neptune_ops_tensor *k_cache,                    \
                         const neptune_ops_tensor *v_cache, const neptune_ops_tensor *page_table,           \
                         const neptune_ops_tensor *seq_lens, const neptune_ops_tensor *out, void *stream) { \
        return call_op(#op, {q, k_cache, v_cache, page_table, seq_lens}, {out}, stream);                    \
    }
NEPTUNE_OPS_DEFINE_PAGED(decode_paged)
NEPTUNE_OPS_DEFINE_PAGED(prefill_paged)

int neptune_ops_softmax(const neptune_ops_tensor *x, const neptune_ops_tensor *y, void *stream) {
    return call_op("softmax", {x}, {y}, stream);
}
int neptune_ops_logsumexp(const neptune_ops_tensor *x, const neptune_ops_tensor *lse, void *stream) {
    return call_op("logsumexp", {x}, {lse}, stream);
}
int neptune_ops_cross_entropy(const neptune_ops_tensor *x, const neptune_ops_tensor *labels,
                              const neptune_ops_tensor *loss, void *stream) {
    return call_op("cross_entropy", {x, labels}, {loss}, stream);
}
int neptune_ops_layernorm(const neptune_ops_tensor *x, const neptune_ops_tensor *gamma, const neptune_ops_tensor *beta,
                          const neptune_ops_tensor *y, void *stream) {
    return call_op("layernorm", {x, gamma, beta}, {y}, stream);
}
int neptune_ops_rmsnorm(const neptune_ops_tensor *x, const neptune_ops_tensor *gamma, const neptune_ops_tensor *y,
                        void *stream) {
    return call_op("rmsnorm", {x, gamma}, {y}, stream);
}
int neptune_ops_performer(const neptune_ops_tensor *q, const neptune_ops_tensor *k, const neptune_ops_tensor *v,
                          const neptune_ops_tensor *features, const neptune_ops_tensor *out, void *stream) {
    return call_op("performer", {q, k, v, features}, {out}, stream);
}

int neptune_ops_get_device_info(neptune_ops_device_info *out) {
    return guarded([&] {
        if (!out) fail(NEPTUNE_OPS_ERROR_ARGUMENT, "neptune_ops_get_device_info: out is NULL");
        neptune_device_info info{};
        if (neptune_get_device_info(&info) != NEPTUNE_OK)
            fail(NEPTUNE_OPS_ERROR_DEVICE, std::string("no GPU: ") + neptune_last_error());
        *out = neptune_ops_device_info{};
        static_assert(sizeof(out->name) == sizeof(info.name), "the device name is copied whole");
        std::memcpy(out->name, info.name, sizeof(out->name));
        out->name[sizeof(out->name) - 1] = '\0';
        out->cc_major = info.cc_major;
        out->cc_minor = info.cc_minor;
        out->sm_count = info.sm_count;
        out->l2_bytes = info.l2_bytes;
        out->total_memory = int64_t(info.total_memory);
        return int(NEPTUNE_OPS_OK);
    });
}

int neptune_ops_synchronize(void) {
    return guarded([] {
        if (neptune_synchronize() != NEPTUNE_OK) fail(NEPTUNE_OPS_ERROR_DEVICE, neptune_last_error());
        return int(NEPTUNE_OPS_OK);
    });
}

}  // extern "C"
