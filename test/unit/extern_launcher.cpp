// The run-time side of Neptune's extern stages, without Halide's pipelines around it: the integer
// expressions of the descriptor against Halide's own arithmetic, base64, the descriptor format, and
// the entry point called on hand-made buffers: bounds queries, every refusal with its error code and
// message, and (where there is no GPU) the missing driver reported rather than a crash.
#include <doctest/doctest.h>

#include <HalideRuntime.h>

#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "GpuProbe.h"
#include "Halide.h"
#include "core/SplitChunks.h"
#include "extern/DescribeKernels.h"
#include "interop/Descriptor.h"
#include "interop/ExternEntry.h"
#include "neptune/runtime/NeptuneHalide.h"

using namespace neptune;
using interop::IntExpr;

namespace {

std::vector<std::string> &messages() {
    static std::vector<std::string> m;
    return m;
}
void record(void *, const char *m) { messages().push_back(m); }

std::vector<neptune_halide_trace_event> &events() {
    static std::vector<neptune_halide_trace_event> e;
    return e;
}
void trace(const neptune_halide_trace_event *e) { events().push_back(*e); }

int64_t eval(const std::string &text, const std::map<std::string, int64_t> &vars = {}) {
    return IntExpr::parse(text).eval(vars);
}

// A stage with inputs x [4, n] (f16) and y [n] (f32) and output out [4, n] (f16).
interop::GroupDescriptor small_stage() {
    interop::GroupDescriptor d;
    d.name = "small";
    d.jit = true;  // errors go to the reporter this test installs
    d.scalars = {"n"};
    d.buffers = {{"x", false, halide_type_float, 16, {"4", "n"}},
                 {"y", false, halide_type_float, 32, {"n"}},
                 {"out", true, halide_type_float, 16, {"4", "n"}}};
    d.constraints = {{"(< 0 n)", "n must be positive"}};
    interop::KernelSet s;
    s.arch = "sm_80";
    s.codes = "sm_80";
    s.min_cc = 80;
    s.image = "not a cubin";
    s.tile_keys = 64;  // as a split-K set's (the launcher ignores them without split_blocks)
    s.stages = 2;
    s.kernels = {{"k", {"n", "1", "1"}, 128, 0, {"x", "y", "out"}, {"n"}}};
    d.sets = {s};
    return d;
}

struct Buf {
    halide_buffer_t b{};
    std::vector<halide_dimension_t> dims;
    Buf(halide_type_code_t code, int bits, std::vector<int> extents, bool query = false) {
        int stride = 1;
        for (int e : extents) {
            dims.push_back({0, e, stride, 0});
            stride *= e;
        }
        b.type = halide_type_t(code, uint8_t(bits));
        b.dimensions = int(dims.size());
        b.dim = dims.data();
        static uint8_t storage[4096];
        b.host = query ? nullptr : storage;
    }
};

using Entry3 = int (*)(void *, const char *, const halide_device_interface_t *, int32_t, int32_t, int32_t, int32_t,
                       int32_t, int32_t, int32_t, int32_t, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

int call(const std::string &blob, int32_t n, halide_buffer_t *x, halide_buffer_t *y, halide_buffer_t *out) {
    messages().clear();
    auto f = reinterpret_cast<Entry3>(interop::extern_function_address(3));
    return f(nullptr, blob.c_str(), nullptr, n, 0, 0, 0, 0, 0, 0, 0, x, y, out);
}

bool has(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("extern launcher: integer expressions parse and evaluate as Halide's, Euclidean division included") {
    CHECK(eval("(+ 1 (* 2 3))") == 7);
    CHECK(eval("(/ -7 2)") == -4);
    CHECK(eval("(% -7 2)") == 1);
    CHECK(eval("(/ 7 -2)") == -3);
    CHECK(eval("(% 7 -2)") == 1);
    CHECK(eval("(/ 5 0)") == 0);
    CHECK(eval("(? (< a b) a b)", {{"a", 3}, {"b", 9}}) == 3);
    CHECK(eval("(&& (<= 1 1) (! (== 1 2)))") == 1);
    CHECK_THROWS_WITH_AS(IntExpr::parse("(+ 1)"), doctest::Contains("takes 2 operands"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(IntExpr::parse("(pow 1 2)"), doctest::Contains("unknown operator 'pow'"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(IntExpr::parse("(+ 1 2"), doctest::Contains("unexpected end"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(eval("(+ seq 1)"), doctest::Contains("no value for seq"), std::invalid_argument);

    // Random launch-shaped expressions: printed from Halide, evaluated here, against Halide's simplifier.
    std::mt19937 rng(7);
    const Halide::Expr a = Halide::Internal::Variable::make(Halide::Int(32), "a");
    const Halide::Expr b = Halide::Internal::Variable::make(Halide::Int(32), "b");
    for (int trial = 0; trial < 300; trial++) {
        std::uniform_int_distribution<int> op(0, 6), small(-9, 9);
        Halide::Expr e = a;
        for (int depth = 0; depth < 4; depth++) {
            const Halide::Expr o = (trial + depth) % 3 ? b : Halide::Expr(small(rng));
            switch (op(rng)) {
            case 0: e = e + o; break;
            case 1: e = e - o; break;
            case 2: e = e * o; break;
            case 3: e = e / o; break;
            case 4: e = e % o; break;
            case 5: e = Halide::min(e, o); break;
            default: e = Halide::max(e, o); break;
            }
        }
        const std::string text = internal::int_expr_text(e);
        const int va = small(rng) * 7, vb = small(rng);
        const Halide::Expr folded = Halide::Internal::simplify(
            Halide::Internal::substitute({{"a", Halide::Expr(va)}, {"b", Halide::Expr(vb)}}, e));
        const std::optional<int64_t> want = Halide::Internal::as_const_int(folded);
        REQUIRE(want.has_value());
        INFO(text << " at a = " << va << ", b = " << vb);
        CHECK(eval(text, {{"a", va}, {"b", vb}}) == *want);
    }
}

TEST_CASE("extern launcher: base64 round-trips every byte and rejects other characters") {
    CHECK(interop::base64_encode("Man") == "TWFu");
    CHECK(interop::base64_encode("Ma") == "TWE=");
    CHECK(interop::base64_encode("M") == "TQ==");
    std::mt19937 rng(3);
    for (size_t n = 0; n < 70; n++) {
        std::string bytes;
        for (size_t i = 0; i < n; i++) bytes += char(rng() & 0xff);
        CHECK(interop::base64_decode(interop::base64_encode(bytes)) == bytes);
    }
    CHECK_THROWS_AS(interop::base64_decode("TW!u"), std::invalid_argument);
}

TEST_CASE("extern launcher: the descriptor round-trips, and its id leads the text and follows the content") {
    const interop::GroupDescriptor d = small_stage();
    const std::string text = interop::write_descriptor(d);
    CHECK(text.rfind("{\"id\":\"", 0) == 0);
    const interop::GroupDescriptor back = interop::read_descriptor(text);
    CHECK(back.name == "small");
    CHECK(back.scalars == d.scalars);
    REQUIRE(back.buffers.size() == 3);
    CHECK(back.buffers[1].bits == 32);
    CHECK(back.buffers[2].output);
    CHECK(back.buffers[0].dims == std::vector<std::string>{"4", "n"});
    REQUIRE(back.sets.size() == 1);
    CHECK(back.sets[0].image == "not a cubin");
    CHECK(back.sets[0].tile_keys == 64);
    CHECK(back.sets[0].stages == 2);
    CHECK(back.sets[0].kernels[0].grid[0] == "n");
    CHECK(back.sets[0].source.empty());
    interop::GroupDescriptor changed = d;
    changed.sets[0].kernels[0].threads = 64;
    CHECK(interop::read_descriptor(interop::write_descriptor(changed)).id != back.id);
    // A set compiled on first use carries its source and no image.
    interop::GroupDescriptor deferred = d;
    deferred.sets[0].image.clear();
    deferred.sets[0].source = "extern \"C\" __global__ void k() {}\n";
    const interop::GroupDescriptor deferred_back = interop::read_descriptor(interop::write_descriptor(deferred));
    CHECK(deferred_back.sets[0].image.empty());
    CHECK(deferred_back.sets[0].source == deferred.sets[0].source);
    CHECK(deferred_back.id != back.id);
    CHECK_THROWS_WITH_AS(interop::read_descriptor("{\"format\": 2}"), doctest::Contains("Neptune extern descriptor"),
                         std::invalid_argument);
}

TEST_CASE("extern launcher: a split-K call takes the set tuned as the JIT would tune its shape, else the closest") {
    interop::GroupDescriptor d;
    d.split_blocks = "(* batch kv_heads)";
    auto add = [&](const char *arch, int min_cc, int max_cc, int keys, int stages) {
        interop::KernelSet s;
        s.arch = arch;
        s.min_cc = min_cc;
        s.max_cc = max_cc;
        s.tile_keys = keys;
        s.stages = stages;
        d.sets.push_back(s);
    };
    add("sm_90a", 90, 90, 32, 3);  // 0
    add("sm_90a", 90, 90, 32, 2);  // 1
    add("sm_90a", 90, 90, 64, 3);  // 2
    add("sm_80", 80, 1000, 32, 3);  // 3
    add("sm_80", 80, 1000, 32, 2);  // 4
    auto on = [&](int cc, int sms, int batch, int kv_heads) {
        return interop::choose_kernel_set(d, cc, sms, int64_t(batch) * kv_heads);  // split_blocks
    };
    CHECK(on(90, 132, 1, 8) == 2);  // 8 groups: one block per SM after 16 chunks, 64 keys, 3 stages
    CHECK(on(90, 132, 1, 32) == 0);  // 32 groups: 32 keys, 3 stages
    CHECK(on(90, 132, 8, 32) == 1);  // 256 groups: every SM has one, 2 stages
    CHECK(on(90, 132, 33, 4) == 1);  // 132 groups
    CHECK(on(90, 132, 131, 1) == 0);
    CHECK(on(80, 108, 1, 8) == 3);  // no 64-key set: the one with the stages
    CHECK(on(80, 108, 8, 32) == 4);
    CHECK(on(120, 170, 8, 32) == 4);  // newer GPUs: the sm_80 sets (compute_90 PTX)
    CHECK(on(75, 40, 1, 8) == -1);
    interop::GroupDescriptor prefill = d;  // no split-K: the first set of the family
    prefill.split_blocks.clear();
    CHECK(interop::choose_kernel_set(prefill, 90, 132, 8) == 0);
    CHECK(interop::choose_kernel_set(prefill, 86, 84, 8) == 3);
    // Cluster-merge twins: never chosen by the tuning, taken once the call's chunks are 2 to 8 on sm_90.
    add("sm_90a", 90, 90, 32, 2);  // 5
    d.sets.back().cluster = true;
    CHECK(on(90, 132, 8, 32) == 1);
    CHECK(interop::choose_cluster_set(d, 1, 90, 2) == 5);
    CHECK(interop::choose_cluster_set(d, 1, 90, 8) == 5);
    CHECK(interop::choose_cluster_set(d, 1, 90, 1) == 1);  // one chunk: no cluster
    CHECK(interop::choose_cluster_set(d, 1, 90, 16) == 1);  // past the portable cluster size
    CHECK(interop::choose_cluster_set(d, 0, 90, 2) == 0);  // no twin of the 3-stage tuning
    const interop::GroupDescriptor back = interop::read_descriptor(interop::write_descriptor(d));
    REQUIRE(back.sets.size() == d.sets.size());
    CHECK(back.sets[5].cluster);
    CHECK_FALSE(back.sets[1].cluster);
}

TEST_CASE("decode stages: 3 while split-K chunks fill the machine, 2 once every SM has a (batch, KV head) group") {
    CHECK(internal::decode_stages(8 * 8, 132) == 3);  // decode_gqa 8,8192: 4 chunks per group
    CHECK(internal::decode_stages(32, 132) == 3);  // decode_causal 1,8192
    CHECK(internal::decode_stages(131, 132) == 3);
    CHECK(internal::decode_stages(132, 132) == 2);
    CHECK(internal::decode_stages(8 * 32, 132) == 2);  // decode_causal 8,8192
    CHECK(internal::decode_stages(8 * 32, 264) == 3);  // the same shape on twice the SMs
}

TEST_CASE("extern launcher: decode's tiles are 64 keys only at one block per SM and head dims up to 128") {
    CHECK(internal::decode_block_n(8, 132, 128) == 64);  // decode_gqa 1,8192: 8 groups x 16 chunks
    CHECK(internal::decode_block_n(8, 132, 64) == 64);
    CHECK(internal::decode_block_n(8, 132, 256) == 32);  // its 64-key kernel spills
    CHECK(internal::decode_block_n(8, 128, 128) == 64);  // 16 x 8 = 128 SMs: still one block each
    CHECK(internal::decode_block_n(9, 132, 128) == 32);  // 144 > 132
    CHECK(internal::decode_block_n(16, 132, 128) == 32);  // decode_gqa 2,8192
    CHECK(internal::decode_block_n(32, 132, 128) == 32);  // decode_causal 1,8192
}

TEST_CASE("extern launcher: decode's chunks take tiles round-robin where they are 4 or fewer") {
    for (int64_t chunks = 1; chunks <= 4; chunks++) CHECK(internal::decode_interleave_chunks(chunks));
    CHECK_FALSE(internal::decode_interleave_chunks(5));
    CHECK_FALSE(internal::decode_interleave_chunks(8));  // decode_causal 1,8192, decode_gqa 4,8192
    CHECK_FALSE(internal::decode_interleave_chunks(16));  // decode_gqa 1,8192
    // On the H200's 132 SMs at 8192 keys (6 blocks per SM): decode_causal 8,8192 (256 groups) and
    // decode_gqa 8,8192 (64) interleave, decode_gqa 1,8192 (8 groups) takes runs.
    CHECK(internal::decode_interleave_chunks(internal::split_k_chunks(256, 8192, 32, 132, 6)));
    CHECK(internal::decode_interleave_chunks(internal::split_k_chunks(64, 8192, 32, 132, 6)));
    CHECK_FALSE(internal::decode_interleave_chunks(internal::split_k_chunks(8, 8192, 32, 132, 6)));
    // The launch parameters as the JIT operator and the AOT launcher set them: the order by the rule,
    // and neither is a shape scalar of an extern stage.
    std::map<std::string, int64_t> ints = {{"batch", 8}};
    internal::set_split_k_params(ints, 16);
    CHECK(ints == std::map<std::string, int64_t>{{"batch", 8}, {"chunks", 16}, {"interleave", 0}, {"chunk_tiles", 0}});
    internal::set_split_k_params(ints, 2);
    CHECK(ints.at("interleave") == 1);
    internal::set_split_k_params(ints, 5, 16);  // batch-invariant: runs of 16 tiles
    CHECK(ints.at("chunk_tiles") == 16);
    CHECK(internal::is_split_k_launch_param("chunks"));
    CHECK(internal::is_split_k_launch_param("interleave"));
    CHECK(internal::is_split_k_launch_param("chunk_tiles"));
    CHECK_FALSE(internal::is_split_k_launch_param("seq_kv"));
}

TEST_CASE("extern launcher: split-K chunks fill about two blocks per SM, at most sqrt(tiles), then whole waves") {
    // Few blocks: ceil(2 * 132 / blocks) chunks, capped at ceil(sqrt(tiles)), then up to a quarter
    // fewer where the busiest SM's tiles, ceil(c * blocks / 132) * ceil(tiles / c), drop.
    CHECK(internal::split_k_chunks(8 * 8, 256 * 32, 32, 132, 6) ==
          4);  // decode_gqa 8,8192: 5 -> 3 x 52 tiles, 4 -> 2 x 64
    CHECK(internal::split_k_chunks(8, 256 * 32, 32, 132, 6) ==
          16);  // decode_gqa 1,8192: sqrt(256); 12..15 give more tiles
    CHECK(internal::split_k_chunks(32, 256 * 32, 32, 132, 6) ==
          8);  // decode_causal 1,8192: 9 -> 3 x 29, 8 -> 2 x 32, 7 -> 2 x 37
    CHECK(internal::split_k_chunks(32, 256 * 32, 32, 132, 4) == 8);  // decode_gqa 4,8192 (3 stages: 4 per SM)
    CHECK(internal::split_k_chunks(16, 256 * 32, 32, 132, 4) == 16);  // decode_gqa 2,8192: 12 -> 2 x 22, 16 -> 2 x 16
    CHECK(internal::split_k_chunks(128, 256 * 32, 32, 132, 4) == 3);  // decode_causal 4,8192: only 3 -> 3 x 86 to try
    CHECK(internal::split_k_chunks(256, 256 * 32, 32, 132, 6) == 2);  // decode_causal 8,8192
    CHECK(internal::split_k_chunks(140, 256 * 32, 32, 132, 6) == 2);
    CHECK(internal::split_k_chunks(1, 3 * 32, 32, 132, 6) == 2);  // ceil(sqrt(3)); never more chunks than tiles
    CHECK(internal::split_k_chunks(1, 1 * 32, 32, 132, 6) == 1);
    CHECK(internal::split_k_chunks(1, 33, 32, 132, 6) == 2);  // a partial last tile is a tile
    CHECK(internal::split_k_chunks(1, 0, 32, 132, 6) == 1);  // nor fewer than one (no keys)
    CHECK(internal::split_k_chunks(1, 1000000 * 32, 32, 132, 6) == 64);  // at most 64
    // ... and one wave at most: 4-warp key-split blocks, 3 per SM (396 slots).
    CHECK(internal::split_k_chunks(256, 128 * 32, 32, 132, 3) == 1);  // decode_causal 8,8192: cuDNN's 256 blocks
    CHECK(internal::split_k_chunks(64, 128 * 32, 32, 132, 3) ==
          4);  // decode_gqa 8,8192: 5 (3 x 26 tiles) -> 4 (2 x 32)
    CHECK(internal::split_k_chunks(200, 128 * 32, 32, 132, 1) == 1);
    // 64-key tiles: the sqrt cap counts 32-key tiles, so a chunk keeps its keys (decode_gqa 1,8192).
    CHECK(internal::split_k_chunks(8, 128 * 64, 64, 132, 2) == 16);  // sqrt(256), not sqrt(128) = 12
    CHECK(internal::split_k_chunks(8, 128 * 32, 32, 132, 2) == 12);
    CHECK(internal::split_k_chunks(1, 2 * 64, 64, 132, 2) == 2);  // sqrt(4); never more chunks than tiles
    // Many blocks: the fewest of 1..4 chunks that fill the last wave of 6 x 132 = 792 blocks best.
    CHECK(internal::split_k_chunks(512, 256 * 32, 32, 132, 6) == 1);  // decode_causal 16,8192: one wave
    CHECK(internal::split_k_chunks(1024, 256 * 32, 32, 132, 6) == 3);  // decode_causal 32,8192: 3072 of 3168 slots
    CHECK(internal::split_k_chunks(1024, 2 * 32, 32, 132, 6) == 2);  // whole tiles: 2 at most
    CHECK(internal::split_k_chunks(1024, 256 * 32, 32, 132, 8) == 1);  // 1056 slots hold one wave
    // An H200 lets a block opt in to 227 KB: 6 decode blocks at head dim 128 (34,816 B); an A100 163 KB: 4.
    CHECK(internal::resident_blocks(34816, 227 * 1024) == 6);
    CHECK(internal::resident_blocks(34816, 163 * 1024) == 4);
    CHECK(internal::resident_blocks(0, 227 * 1024) == 228);
    CHECK(internal::resident_blocks(34816, 0) == 1);  // unknown: at least one
}

TEST_CASE("extern launcher: a bounds query gets every input whole and does no work") {
    neptune_halide_set_jit_error_reporter(record);
    neptune_halide_set_trace(trace);
    events().clear();
    const std::string blob = interop::write_descriptor(small_stage());
    Buf x(halide_type_float, 16, {0, 0}, true), y(halide_type_float, 32, {0}, true),
        out(halide_type_float, 16, {4, 5}, true);
    CHECK(call(blob, 5, &x.b, &y.b, &out.b) == 0);
    CHECK(messages().empty());
    CHECK(x.b.dim[0].min == 0);
    CHECK(x.b.dim[0].extent == 4);
    CHECK(x.b.dim[1].extent == 5);
    CHECK(x.b.dim[1].stride == 4);
    CHECK(y.b.dim[0].extent == 5);
    REQUIRE(events().size() == 1);
    CHECK(events()[0].bounds_query == 1);
    CHECK(std::string(events()[0].stage) == "small");
    CHECK(events()[0].num_scalars == 1);
    // An input with data and a query output still make a query: validated, no work.
    Buf xr(halide_type_float, 16, {4, 5});
    CHECK(call(blob, 5, &xr.b, &y.b, &out.b) == 0);
    neptune_halide_set_trace(nullptr);
}

TEST_CASE("extern launcher: wrong buffers are refused with Halide's error codes and a message naming them") {
    neptune_halide_set_jit_error_reporter(record);
    const std::string blob = interop::write_descriptor(small_stage());
    Buf x(halide_type_float, 16, {4, 5}), y(halide_type_float, 32, {5}), out(halide_type_float, 16, {4, 5});
    auto last = [] { return messages().empty() ? std::string() : messages().back(); };

    CHECK(call(blob, 5, &x.b, nullptr, &out.b) == halide_error_code_buffer_argument_is_null);
    CHECK(has(last(), "buffer y is NULL"));

    Buf y32(halide_type_float, 16, {5});
    CHECK(call(blob, 5, &x.b, &y32.b, &out.b) == halide_error_code_bad_type);
    CHECK(has(last(), "buffer y has type f16, expected f32"));

    Buf x3(halide_type_float, 16, {4, 5, 1});
    CHECK(call(blob, 5, &x3.b, &y.b, &out.b) == halide_error_code_bad_dimensions);
    CHECK(has(last(), "buffer x has 3 dimensions, expected 2 [4, n]"));

    Buf x6(halide_type_float, 16, {4, 6});
    CHECK(call(blob, 5, &x6.b, &y.b, &out.b) == halide_error_code_constraint_violated);
    CHECK(has(last(), "buffer x covers [0, 6) in dimension 1 (n), expected [0, 5)"));

    Buf out3(halide_type_float, 16, {4, 3});
    CHECK(call(blob, 5, &x.b, &y.b, &out3.b) == halide_error_code_constraint_violated);
    CHECK(has(
        last(),
        "output buffer out covers [0, 3) in dimension 1 (n), expected [0, 5): Neptune's kernels write whole outputs"));

    Buf strided(halide_type_float, 16, {4, 5});
    strided.dims[1].stride = 8;
    CHECK(call(blob, 5, &strided.b, &y.b, &out.b) == halide_error_code_constraint_violated);
    CHECK(has(last(), "buffer x has stride 8 in dimension 1, expected 4"));

    Buf shifted(halide_type_float, 16, {4, 5});
    shifted.dims[0].min = 1;
    CHECK(call(blob, 5, &shifted.b, &y.b, &out.b) == halide_error_code_constraint_violated);
    CHECK(has(last(), "covers [1, 5) in dimension 0"));

    CHECK(call(blob, 0, &x.b, &y.b, &out.b) == halide_error_code_constraint_violated);
    CHECK(has(last(), "n must be positive (n = 0)"));

    // (Its message goes to halide_error or stderr: an unreadable descriptor cannot say it is a JIT's.)
    CHECK(call("{\"id\": 1}", 5, &x.b, &y.b, &out.b) == halide_error_code_internal_error);

    // Two buffers where the descriptor lists three.
    messages().clear();
    using Entry2 = int (*)(void *, const char *, const halide_device_interface_t *, int32_t, int32_t, int32_t, int32_t,
                           int32_t, int32_t, int32_t, int32_t, halide_buffer_t *, halide_buffer_t *);
    auto two = reinterpret_cast<Entry2>(interop::extern_function_address(2));
    CHECK(two(nullptr, blob.c_str(), nullptr, 5, 0, 0, 0, 0, 0, 0, 0, &x.b, &out.b) ==
          halide_error_code_internal_error);
    CHECK(has(last(), "called with 2 buffers; its descriptor has 3"));
    CHECK(interop::extern_function_address(0) == nullptr);
    CHECK(interop::extern_function_address(interop::max_extern_buffers + 1) == nullptr);
}

TEST_CASE("extern launcher: without a GPU a run reports the missing driver; the context handler does too") {
    if (neptune::testing::cuda_device_present()) return;  // the GPU suite runs the kernels there
    neptune_halide_set_jit_error_reporter(record);
    const std::string blob = interop::write_descriptor(small_stage());
    Buf x(halide_type_float, 16, {4, 5}), y(halide_type_float, 32, {5}), out(halide_type_float, 16, {4, 5});
    CHECK(call(blob, 5, &x.b, &y.b, &out.b) == halide_error_code_gpu_device_error);
    CHECK(has(messages().back(), "libcuda.so.1"));
    // Remembered: the second run says the same without retrying the load.
    CHECK(call(blob, 5, &x.b, &y.b, &out.b) == halide_error_code_gpu_device_error);
    CHECK(has(messages().back(), "libcuda.so.1"));
    void *context = reinterpret_cast<void *>(1);
    CHECK(neptune_halide_acquire_context(nullptr, &context, true) == halide_error_code_gpu_device_error);
    CHECK(context == nullptr);
    void *stream = reinterpret_cast<void *>(1);
    CHECK(neptune_halide_get_stream(nullptr, nullptr, &stream) == 0);
    CHECK(stream == nullptr);
}

TEST_CASE("extern launcher: the stream Halide's stages and Neptune's use is the calling thread's") {
    void *s1 = reinterpret_cast<void *>(0x1000), *s2 = reinterpret_cast<void *>(0x2000), *got = nullptr;
    CHECK(neptune_halide_set_stream(s1) == nullptr);  // the legacy default stream until set
    CHECK(neptune_halide_get_stream(nullptr, nullptr, &got) == 0);
    CHECK(got == s1);
    std::thread([&] {
        void *other = s2;
        CHECK(neptune_halide_get_stream(nullptr, nullptr, &other) == 0);
        CHECK(other == nullptr);  // another thread keeps its own
        CHECK(neptune_halide_set_stream(s2) == nullptr);
    }).join();
    CHECK(neptune_halide_set_stream(nullptr) == s1);
    CHECK(neptune_halide_get_stream(nullptr, nullptr, &got) == 0);
    CHECK(got == nullptr);
}
