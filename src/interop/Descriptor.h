#ifndef NEPTUNE_INTEROP_DESCRIPTOR_H
#define NEPTUNE_INTEROP_DESCRIPTOR_H
/** \file
 * What a Neptune extern stage carries into a Halide pipeline: the kernels of one fused group, per GPU
 * family, with everything the launcher needs at run time and nothing that needs libHalide: buffer
 * shapes and launch shapes as small integer expressions over the extern stage's scalar arguments.
 *
 * The compiler (src/extern/) writes a GroupDescriptor as JSON text, images in base64, and hands it to
 * Halide as a string constant argument of the extern call, so an AOT library holds its kernels in
 * Halide's own object and a JIT pipeline in its own module; the launcher (ExternStage.cpp) parses it
 * once per pipeline and caches the loaded module.
 *
 * Integer expressions are prefix forms: an integer, a name, or "(op a b ...)" with op one of
 * + - * / % min max == != < <= && || ! and "?" (select: (? c a b)). Division and modulo are
 * Euclidean, as Halide's (x / 0 = 0, x % 0 = 0). */
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace neptune::interop {

/** A parsed integer expression. */
class IntExpr {
public:
    IntExpr() = default;
    /** Throws std::invalid_argument naming the expression when it does not parse. */
    static IntExpr parse(const std::string &text);
    /** Throws std::invalid_argument for a name missing from `vars`. */
    int64_t eval(const std::map<std::string, int64_t> &vars) const;
    const std::string &text() const { return text_; }
    struct Node;  // defined with the parser

private:
    std::shared_ptr<const Node> root_;
    std::string text_;
};

/** One buffer argument of the extern stage. `dims` are the extents, innermost first (Halide's order);
 * every dimension has min 0. A dense buffer has stride 1, then products of extents; a `strided` one
 * only stride 1 innermost: the kernels take its other strides as parameters (core/StrideParams.h),
 * which the launcher fills from the buffer, so views of other layouts run without a copy. */
struct TensorSpec {
    std::string name;
    bool output = false;
    int type_code = 2;  // halide_type_code_t: 0 int, 1 uint, 2 float, 4 bfloat
    int bits = 16;
    std::vector<std::string> dims;
    bool strided = false;
};

/** A TMA descriptor the launcher encodes per call: boxes of box_rows x 64 elements of a tensor
 * viewed as [batch, heads, rows, cols] (dims: cols, rows, heads, batch; strides in elements between
 * rows, heads and batches), 128-byte swizzle. */
struct TensorMapSpec {
    std::string tensor;
    std::string dims[4];
    std::string strides[3];
    int box_rows = 0;
    int l2_promotion = 256;  // bytes the L2 fetches per miss (neptune_tensor_map_encode)
};

struct KernelSpec {
    std::string name;
    std::string grid[3];
    int threads = 128;
    int shared_bytes = 0;
    std::vector<std::string> tensors;  // kernel pointer arguments: buffer or workspace names, in order
    std::vector<std::string> ints;  // its int arguments (after the TMA descriptors): scalar or derived names
    std::vector<TensorMapSpec> maps = {};  // its TMA descriptors, passed by value after the pointers
    std::string cluster = "";  // blocks per thread block cluster along x ("": no clusters)
};

/** Scratch shared by the kernels of a set: split-K's f32 partial states, or an output of the group
 * that a copy stage hands on (GroupDescriptor::copy_of_group). */
struct WorkspaceSpec {
    std::string name;
    std::string elements;
    bool zeroed = false;  // zero when allocated; the kernels leave it zero (arrival counters)
    int element_bytes = 4;
    /** One per stream and host thread: a secondary output, which the copy stage that runs next on
     * this thread reads (a pipeline runs its stages in order on the calling thread). */
    bool per_thread = false;
};

/** The kernels of one GPU family: an image (cubin, fatbin or PTX) the driver loads and the launches.
 * A set serves devices with compute capability (major * 10 + minor) in [min_cc, max_cc].
 *
 * Split-K groups may hold several sets per family, tuned for ranges of shapes as the JIT operator
 * tunes its kernel per shape: `tile_keys` keys per KV tile (the chunks split the keys by it) and
 * `stages` copies in flight. The launcher takes the set that core/SplitChunks.h's decode_block_n and
 * decode_stages pick for the call (the JIT's rule), else the one with those stages, else the first. */
struct KernelSet {
    std::string arch;  // "sm_80", "sm_90a": the lowering's family, for messages
    std::string codes;  // what the image holds, e.g. "sm_80,compute_90"
    int min_cc = 0, max_cc = 1000;
    int tile_keys = 0, stages = 0;  // split-K: the partial kernel's; 0 otherwise
    bool cluster = false;  // split-K: the cluster merge of the set of the same tuning without it (taken per call)
    /** An integer expression over the scalars: the set serves calls where it holds (non-zero); empty:
     * every call. Row chains compile a ladder of kernel shapes by row length, "(<= cols 4096)". */
    std::string when = "";
    std::string image;  // raw bytes; empty where image_of names the set whose image holds the kernels
    int image_of = -1;
    /** CUDA C++ of a set compiled on first use: where image is empty and image_of < 0, the launcher
     * compiles it through the registered kernel compiler (NeptuneHalide.h) the first time a call
     * takes the set. A just-in-time stage of several sets (a row chain's ladder of shapes, decode's
     * tunings) defers them so, since a call takes one: compiling all would cost each of them. */
    std::string source;
    std::vector<KernelSpec> kernels;
    std::vector<WorkspaceSpec> workspaces;
};

/** A condition the scalars must meet, and the message when they do not. One over `strides` also
 * reads the strided buffers' stride parameters: it is checked once the buffers are. */
struct Constraint {
    std::string expr, message;
    bool strides = false;
};

struct GroupDescriptor {
    std::string id;  // a content hash: identifies the blob in the launcher's cache
    std::string name;  // the fused group's output, for messages
    bool jit = false;  // errors go through a JIT user context rather than halide_error
    std::vector<std::string> scalars;  // the extern's int32 scalar arguments, in order
    std::vector<TensorSpec> buffers;  // the extern's buffer arguments, in order: inputs, then outputs
    std::vector<Constraint> constraints;
    /** Split-K chunks: 0 none; > 0 fixed; -1 chosen at run time from the SM count with split_blocks
     * blocks over split_keys keys in the set's KV tiles of tile_keys (core/SplitChunks.h). The kernels
     * read it as "chunks". */
    int chunks = 0;
    std::string split_blocks, split_keys;
    std::vector<KernelSet> sets;  // those whose capability range holds the device, chosen as above
    /** A copy stage (no sets): buffers are [the group's primary output, read only to order the stages;
     * this stage's output]; it copies the per-thread workspace copy_of_workspace of the group whose
     * descriptor id is copy_of_group, written by that group's last call on this stream and thread. A
     * group writes several outputs this way: one extern stage per output, Halide's Funcs being of one
     * shape each. */
    std::string copy_of_group, copy_of_workspace;
};

/** The set a call takes (KernelSet's rule) on a device of compute capability `cc` (major * 10 +
 * minor) with `sm_count` SMs; `split_blocks` is the call's split_blocks value (ignored without
 * split-K). -1 when no set serves the device. */
int choose_kernel_set(const GroupDescriptor &d, int cc, int sm_count, int64_t split_blocks);
/** As above among the sets for which `serves` holds (their `when` for the call), in order: the first
 * best. */
int choose_kernel_set(const GroupDescriptor &d, int cc, int sm_count, int64_t split_blocks,
                      const std::vector<bool> &serves);
/** Split-K, once the call's `chunks` are known for set `chosen`: the cluster-merge set of the same
 * tuning where core/SplitChunks.h's use_cluster_merge takes it, else `chosen`. */
int choose_cluster_set(const GroupDescriptor &d, int chosen, int cc, int64_t chunks);

/** JSON text with base64 images; `id` is filled with a hash of the rest. */
std::string write_descriptor(const GroupDescriptor &d);
/** Throws std::invalid_argument with what is wrong. */
GroupDescriptor read_descriptor(const std::string &text);

/** FNV-1a over 64 bits, as 16 hex digits: the identity of a descriptor or a kernel source in
 * caches, not a security measure. */
std::string content_hash(const std::string &text);

std::string base64_encode(const std::string &bytes);
/** Throws std::invalid_argument on a character outside the alphabet. */
std::string base64_decode(const std::string &text);

}  // namespace neptune::interop

#endif
