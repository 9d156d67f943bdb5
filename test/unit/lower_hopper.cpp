// The Hopper passes one at a time on the flagship prefill program (sm_90a): select_mma, specialize_warps,
// overlap_dots and defer_score_scale, each against what its header promises, and the verifier's rule
// for asynchronous dots on hand-made kernels. Their numerics are checked elsewhere (the interpreter
// against fp64 in correctness/interpret_attention, the GPU in correctness/gpu_attention).
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "codegen/CodeGenCuda.h"
#include "suite/LowerOperator.h"
#include "lower/PlanSharedMemory.h"
#include "tir/SharedLayout.h"
#include "neptune/Error.h"
#include "neptune/CompileCuda.h"
#include "tir/IR.h"

using namespace neptune;
using namespace neptune::tir;

namespace neptune::internal {
const std::vector<std::pair<std::string, std::string>> &device_headers();
}

namespace {

Kernel lower(const char *op, int overlap = -1, GpuArch arch = GpuArch::Sm90a, int head_dim = 128) {
    OperatorSpec spec = *find_operator(op);
    spec.attention.head_dim_qk = spec.attention.head_dim_v = head_dim;
    internal::LoweringChoices c;
    c.arch = arch;
    c.overlap = overlap;
    return internal::lower_operator(instantiate(spec, 1, 1024), c).program.kernels.at(0);
}

template <typename F>
int count(const Block &b, F pred) {
    int n = 0;
    for (const Stmt &s : b) n += (pred(*s) ? 1 : 0) + count(s->body, pred);
    return n;
}

std::vector<const Node *> loops(const Kernel &k) {
    std::vector<const Node *> l;
    for (const Stmt &s : k.body)
        if (s->kind == NodeKind::CarriedLoop) l.push_back(s.get());
    return l;
}

bool contains(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("select_mma: wgmma dots read Q from shared memory, swizzled tiles, the zero fill folded") {
    const Kernel k = lower("prefill_global", 0);
    CHECK(count(k.body, [](const Node &n) { return n.kind == NodeKind::TileDot && n.mma == MmaKind::Wgmma; }) == 2);
    CHECK(count(k.body, [](const Node &n) { return n.kind == NodeKind::TileDot && n.mma == MmaKind::MmaSync; }) == 0);
    CHECK(count(k.body, [](const Node &n) { return n.kind == NodeKind::Convert && n.src == "q_s"; }) == 0);
    CHECK(k.values.count("q_a") == 0);
    CHECK(count(k.body, [](const Node &n) { return n.kind == NodeKind::TileDot && n.a == "q_s" && !n.accumulate; }) ==
          1);
    CHECK(count(k.body, [](const Node &n) { return n.kind == NodeKind::Fill && n.dst == "s"; }) == 0);
    for (const char *t : {"q_s", "k_s", "v_s"}) CHECK(k.values.at(t).layout == Layout::SharedSwizzled128);
    // Head dims that are not whole 64-column swizzle blocks keep mma.sync, on sm_90a too.
    const Kernel narrow = lower("prefill_global", -1, GpuArch::Sm90a, 80);
    CHECK(narrow.producer_warps == 0);
    CHECK(count(narrow.body, [](const Node &n) { return n.kind == NodeKind::TileDot && n.mma == MmaKind::MmaSync; }) ==
          2);
}

TEST_CASE("select_mma: forcing wgmma on a shape it cannot run is a CompileError that says why") {
    OperatorSpec spec = *find_operator("prefill_causal");
    spec.attention.head_dim_qk = spec.attention.head_dim_v = 80;
    internal::LoweringChoices c;
    c.arch = GpuArch::Sm90a;
    c.wgmma = 1;
    c.warps = 8;
    CHECK_THROWS_WITH_AS(internal::lower_operator(instantiate(spec, 1, 256), c),
                         doctest::Contains("not a multiple of the swizzle's 64"), CompileError);
}

// A change detector: it pins the measured default tile sizes of the wgmma path. A failure means the
// defaults changed (default_lower_options): intended only with a measurement that supports the new
// sizes (docs/engineering-log.md), which this test's figures should then follow.
TEST_CASE("change detector: the wgmma path's KV tiles: 192 keys up to head dim 128, 128 under a window, 64 above 128") {
    // Shared memory: Q 32 KB + 2 stages of K and V, 4 x 48 KB at 192 keys, within the 227 KB a block
    // may take on sm_90 (docs/engineering-log.md, 2026-12-03, KV tiles of 128 to 192 keys on the sm_90a
    // prefill path).
    const Kernel g = lower("prefill_global");
    CHECK(g.values.at("k_s").rows == 192);
    CHECK(g.values.at("v_s").rows == 192);
    CHECK(g.shared_bytes <= 227 * 1024);
    CHECK(g.shared_bytes >= 32 * 1024 + 4 * 192 * 128 * 2);
    CHECK(lower("prefill_causal").values.at("k_s").rows == 192);
    CHECK(lower("prefill_windowed").values.at("k_s").rows == 128);
    CHECK(lower("prefill_global", -1, GpuArch::Sm90a, 256).values.at("k_s").rows == 64);
    CHECK(lower("prefill_global", -1, GpuArch::Sm90a, 64).values.at("k_s").rows == 192);
}

TEST_CASE("specialize_warps: TMA loads by (batch, head, row), a producer warpgroup, releases after the last reader") {
    const Kernel k = lower("prefill_gqa", 0);
    CHECK(k.producer_warps == 4);
    CHECK(k.threads() == 384);
    CHECK(k.producer_registers == 24);
    CHECK(k.consumer_registers == 240);
    REQUIRE(k.tensor_maps.size() == 3);
    for (const TensorMap &m : k.tensor_maps) CHECK(m.l2_promotion == 256);  // prefill reuses K and V across blocks
    CHECK(count(k.body, [](const Node &n) { return n.kind == NodeKind::TileLoad && n.copy == CopyKind::Tma; }) == 3);
    CHECK(count(k.body, [](const Node &n) { return n.kind == NodeKind::Barrier; }) == 0);  // each TMA load is waited on
    const std::vector<const Node *> l = loops(k);
    REQUIRE(l.size() == 1);
    const Block &b = l[0]->body;
    // Each ring tile is released right after the dot that reads it.
    for (size_t i = 0; i + 1 < b.size(); i++)
        if (b[i]->kind == NodeKind::TileDot) CHECK((b[i + 1]->kind == NodeKind::Release && b[i + 1]->src == b[i]->b));
    const std::string listing = to_string(k);
    CHECK(contains(listing, "k[batch b, head h / (q_heads / kv_heads), row j * 192]  // tma stage 0; ring j"));
    CHECK(contains(listing, "roles: 4 producer warps (TMA, 24 registers), 8 compute warps (240 registers)"));
    // The decode kernels (one warp of query heads) have no producer warps: their own loop issues
    // TMA copies (pipeline_loads), with 128-byte L2 promotion by default.
    const Kernel d = lower("decode_gqa");
    CHECK(d.producer_warps == 0);
    CHECK(count(d.body, [](const Node &n) { return n.kind == NodeKind::TileLoad && n.copy == CopyKind::Tma; }) == 2);
    REQUIRE(d.tensor_maps.size() == 2);
    for (const TensorMap &m : d.tensor_maps) CHECK(m.l2_promotion == 128);
    // On sm_80 they keep cp.async.
    const Kernel d80 = lower("decode_gqa", -1, GpuArch::Sm80);
    CHECK(count(d80.body, [](const Node &n) { return n.kind == NodeKind::TileLoad && n.copy == CopyKind::CpAsync; }) ==
          2);
    CHECK(d80.tensor_maps.empty());
}

TEST_CASE("pipeline_loads: TMA copies in a one-warp decode kernel, issued by its own thread 0 (sm_90a)") {
    for (const char *op : {"decode_causal", "decode_gqa"}) {
        INFO(op);
        internal::LoweringChoices c;
        c.arch = GpuArch::Sm90a;
        c.tma_loads = 1;
        const Program p = internal::lower_operator(instantiate(*find_operator(op), 2, 1000), c).program;
        const Kernel &k = p.kernels.at(0);
        CHECK(k.producer_warps == 0);
        CHECK(k.pipeline_stages == 3);
        REQUIRE(k.tensor_maps.size() == 2);
        for (const TensorMap &m : k.tensor_maps) {
            CHECK(m.box_rows == 32);  // decode's 32-key tiles
            CHECK(m.l2_promotion == 128);  // decode's default (docs/design/options.md)
        }
        // K and V in the loop by TMA, with no ring position (the loop rotates the buffers) and no
        // releases; Q before the loop stays a plain load.
        CHECK(count(k.body, [](const Node &n) {
                  return n.kind == NodeKind::TileLoad && n.copy == CopyKind::Tma && !n.ring.defined();
              }) == 2);
        CHECK(count(k.body,
                    [](const Node &n) { return n.kind == NodeKind::TileLoad && n.copy == CopyKind::CpAsync; }) == 0);
        CHECK(count(k.body, [](const Node &n) { return n.kind == NodeKind::Release; }) == 0);
        CHECK(count(k.body, [](const Node &n) {
                  return n.kind == NodeKind::TileLoad && n.dst == "q_s" && n.copy == CopyKind::Sync;
              }) == 1);
        // One full barrier per buffer, no empty ones; TMA's swizzle needs 1024-byte aligned tiles.
        const tir::SharedLayout l = tir::shared_layout(k);
        CHECK(l.full_barrier.size() == 2);
        CHECK(l.empty_barrier.empty());
        CHECK(l.alignment_slack == 1024);
        for (const char *t : {"k_s", "v_s"}) CHECK(l.offset.at(t) % 1024 == 0);
        const std::string listing = to_string(k);
        CHECK(contains(listing, "k_s = load k[batch b, head hkv, row (j_first + j_step * t) * 32]  // tma stage 0\n"));
        CHECK(contains(listing, "tensor map v_map: v, boxes of 32 x 64, L2 promotion 128 B"));
        // The emitted loop waits for this iteration's copy, then thread 0 refills the previous buffer.
        const std::string src = internal::emit_cuda(p);
        INFO(src);
        CHECK(contains(src, "nd::mbarrier_wait(k_s_full + stage_t, phase_t);"));
        CHECK(contains(src,
                       "nd::tma_load_tile(v_s_buf((stage_t + 2) % 3), v_map, ((j_first + (j_step * (t + 2))) * 32)"));
        CHECK_FALSE(contains(src, "load_tile_async"));
        internal::NvrtcOptions no;
        no.cubin = true;
        no.headers = internal::device_headers();
        no.arch = "sm_90a";
        CHECK_NOTHROW(internal::nvrtc_compile(src, std::string(op) + ".cu", no));
    }
    // TMA exists from sm_90 on: asking for it on sm_80 says so.
    internal::LoweringChoices c;
    c.arch = GpuArch::Sm80;
    c.tma_loads = 1;
    CHECK_THROWS_WITH_AS(internal::lower_operator(instantiate(*find_operator("decode_gqa"), 1, 256), c),
                         doctest::Contains("TMA copies need sm_90a, not sm_80"), CompileError);
}

TEST_CASE("verify: a TMA load without producer warps belongs to a pipelined loop, with no ring position") {
    internal::LoweringChoices c;
    c.arch = GpuArch::Sm90a;
    c.tma_loads = 1;
    const Kernel k =
        internal::lower_operator(instantiate(*find_operator("decode_causal"), 1, 256), c).program.kernels.at(0);
    CHECK_NOTHROW(verify(k));
    const char *rule = "a TMA load without producer warps is a pipelined load";
    // `k` with each TMA load directly in a loop's body replaced by f(loop variable, load).
    auto edit_tma_loads = [&](const std::function<Stmt(const Halide::Expr &, const Stmt &)> &f) {
        Kernel out = k;
        for (Stmt &s : out.body)
            if (s->kind == NodeKind::CarriedLoop)
                s = with(s, [&](Node &n) {
                    for (Stmt &b : n.body)
                        if (b->kind == NodeKind::TileLoad && b->copy == CopyKind::Tma)
                            b = f(Halide::Internal::Variable::make(Halide::Int(32), n.var), b);
                });
        return out;
    };
    // Under a condition in the loop: the emitter's wait and refill are the loop body's, not a branch's.
    const Kernel guarded = edit_tma_loads([](const Halide::Expr &j, const Stmt &b) { return make_if(j >= 0, {b}); });
    CHECK_THROWS_WITH_AS(verify(guarded), doctest::Contains(rule), InternalError);
    // A ring position is the producer warps' protocol.
    const Kernel ringed =
        edit_tma_loads([](const Halide::Expr &j, const Stmt &b) { return with(b, [&](Node &l) { l.ring = j; }); });
    CHECK_THROWS_WITH_AS(verify(ringed), doctest::Contains(rule), InternalError);
    // One buffer is no pipeline.
    Kernel single = k;
    single.pipeline_stages = 1;
    CHECK_THROWS_WITH_AS(verify(single), doctest::Contains(rule), InternalError);
}

TEST_CASE("overlap_dots: the first tile, the steady loop with two dots in flight, the last PV") {
    const Kernel k = lower("prefill_causal", 1);
    const std::vector<const Node *> l = loops(k);
    REQUIRE(l.size() == 3);
    // Steady loop: S_j and PV_(j-1) issued asynchronously, retired by waits for 1 and 0 pending.
    const Block &steady = l[1]->body;
    CHECK(count(steady, [](const Node &n) { return n.kind == NodeKind::TileDot && n.async; }) == 2);
    std::vector<int> waits;
    for (const Stmt &s : steady)
        if (s->kind == NodeKind::DotWait) waits.push_back(s->pending);
    CHECK(waits == std::vector<int>{1, 0});
    const std::string listing = to_string(k);
    CHECK(contains(listing, "v_s = load v[batch b, head h / (q_heads / kv_heads), row j * 192 + -192]"));
    CHECK(contains(listing, "wait_dots(pending 0: acc, s_a)"));
    // The first loop runs one tile and no PV; the last runs the PV of the last tile only.
    CHECK(count(l[0]->body, [](const Node &n) { return n.kind == NodeKind::TileDot; }) == 1);
    CHECK(count(l[2]->body, [](const Node &n) { return n.kind == NodeKind::TileDot && !n.async; }) == 1);
    CHECK(count(k.body, [](const Node &n) { return n.kind == NodeKind::WarpgroupTurn; }) == 0);
    // Level 2 adds the warpgroups' turns: take before the score dot, pass after the PV dot, begin and end.
    const Kernel t = lower("prefill_causal", 2);
    CHECK(count(t.body, [](const Node &n) { return n.kind == NodeKind::WarpgroupTurn; }) == 4);
    CHECK(contains(to_string(t), "warpgroup_turn take"));
    // Level 0 leaves the single loop.
    CHECK(loops(lower("prefill_causal", 0)).size() == 1);
}

TEST_CASE("defer_score_scale: the scale moves into the row max and the exponential's FFMA") {
    const std::string global = to_string(lower("prefill_global", 0));
    CHECK_FALSE(contains(global, "score modifier"));
    CHECK(contains(global, "s_max_raw = max(s_max_raw, row_max(s))"));
    CHECK(contains(global, "fast_exp2(s * 0.127517 - s_r0)"));  // (1 / sqrt(128)) log2 e in one constant
    // ALiBi's modifier is not a pure scale: it stays, and the scores are scaled before the mask.
    const std::string alibi = to_string(lower("prefill_alibi", 0));
    CHECK(contains(alibi, "score modifier"));
    CHECK_FALSE(contains(alibi, "s_max_raw"));
}

TEST_CASE("verify: an asynchronous dot's accumulator and operands are untouched until it is retired") {
    Kernel k = lower("prefill_global", 1);
    tir::verify(k);
    // Read the PV accumulator while its dot is in flight: move the rescale before the wait.
    std::vector<const Node *> l = loops(k);
    Block steady = l[1]->body;
    size_t wait0 = 0, rescale = 0;
    for (size_t i = 0; i < steady.size(); i++) {
        if (steady[i]->kind == NodeKind::DotWait && steady[i]->pending == 0) wait0 = i;
        if (steady[i]->kind == NodeKind::TileMap && steady[i]->dst == "acc") rescale = i;
    }
    REQUIRE((wait0 > 0 && rescale > wait0));
    std::swap(steady[wait0], steady[rescale]);
    Kernel bad = k;
    for (Stmt &s : bad.body)
        if (s.get() == l[1]) s = with(s, [&](Node &n) { n.body = steady; });
    CHECK_THROWS_WITH_AS(tir::verify(bad), doctest::Contains("while the asynchronous dot writing it is in flight"),
                         InternalError);
    // A dot never retired in its block.
    Block unretired = l[1]->body;
    for (auto it = unretired.begin(); it != unretired.end();)
        it = (*it)->kind == NodeKind::DotWait ? unretired.erase(it) : it + 1;
    Kernel bad2 = k;
    for (Stmt &s : bad2.body)
        if (s.get() == l[1]) s = with(s, [&](Node &n) { n.body = unretired; });
    CHECK_THROWS_AS(tir::verify(bad2), InternalError);
}
