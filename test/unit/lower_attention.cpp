// Every attention operator lowers to a verified tile program whose emitted CUDA compiles with NVRTC
// for sm_80 and sm_90 (no GPU needed).
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "InOrder.h"
#include "codegen/CodeGenCuda.h"
#include "core/SplitChunks.h"
#include "neptune/GpuOperator.h"
#include "lower/LayOutCombine.h"
#include "suite/LowerOperator.h"
#include "lower/PlanSharedMemory.h"
#include "tir/SharedLayout.h"
#include "lower/UnrollChunkLoops.h"
#include "neptune/Error.h"
#include "neptune/CompileCuda.h"
#include "tir/IR.h"
#include "tir/Interpreter.h"

using namespace neptune;
using neptune::testing::check_in_order;

namespace neptune::internal {
const std::vector<std::pair<std::string, std::string>> &device_headers();
}

namespace {

tir::Program lower(const OperatorSpec &spec, GpuArch arch = GpuArch::Sm80, int fold_combine = -1) {
    internal::LoweringChoices c;
    c.arch = arch;
    c.fold_combine = fold_combine;
    return internal::lower_operator(instantiate(spec, 1, 256), c).program;
}

/** NVRTC's cubin of `src` for sm_90a, over the device library. */
void compile_sm90a(const std::string &src, const std::string &name) {
    internal::NvrtcOptions no;
    no.cubin = true;
    no.headers = internal::device_headers();
    no.arch = "sm_90a";
    internal::nvrtc_compile(src, name, no);
}

}  // namespace

TEST_CASE("lower: every attention operator gives a verified tile program and CUDA that NVRTC compiles") {
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention) continue;
        INFO(op.name);
        // Decode folds its combine into the partial kernel by default; sm_90a also builds the two kernels.
        for (const auto &[target, fold] : {std::pair{GpuArch::Sm80, -1}, {GpuArch::Sm90a, -1}, {GpuArch::Sm90a, 0}}) {
            if (!op.attention.decode && fold == 0) continue;
            const tir::Program p = lower(op, target, fold);
            tir::verify(p);
            CHECK(p.kernels.size() == (op.attention.decode && fold == 0 ? 2u : 1u));
            const std::string src = internal::emit_cuda(p);
            internal::NvrtcOptions no;
            no.cubin = true;
            no.headers = internal::device_headers();
            for (const char *arch : target == GpuArch::Sm90a ? std::vector<const char *>{"sm_90a"}
                                                             : std::vector<const char *>{"sm_80", "sm_90"}) {
                no.arch = arch;
                INFO(arch << "\n" << tir::to_string(p) << "\n" << src);
                CHECK_NOTHROW(internal::nvrtc_compile(src, op.name + ".cu", no));
            }
        }
    }
}

TEST_CASE("lower: share_tile_terms evaluates attention's exponential once per element, however many terms read it") {
    // attention_row_stats: the output's P, the entropy's P * s and the largest probability's P / l
    // share exp(s - m); each KV loop computes it in one map, and the other terms read that tile.
    for (GpuArch arch : {GpuArch::Sm80, GpuArch::Sm90a}) {
        INFO(arch_name(arch));
        const tir::Program p = lower(*find_operator("attention_row_stats"), arch);
        int loops = 0;
        std::function<void(const tir::Block &)> walk = [&](const tir::Block &b) {
            for (const tir::Stmt &s : b) {
                if (s->kind == tir::NodeKind::CarriedLoop) {
                    int exps = 0, reads_p = 0;
                    for (const tir::Stmt &t : s->body)
                        if (t->kind == tir::NodeKind::TileMap) {
                            std::ostringstream os;
                            os << t->value;
                            exps += os.str().find("fast_exp2") != std::string::npos;
                            reads_p += os.str().find("p0") != std::string::npos;
                        }
                    if (exps > 0) {
                        loops++;
                        CHECK(exps == 1);
                        CHECK(reads_p == 3);  // p0's own map, the entropy's term and the largest probability's
                    }
                }
                walk(s->body);
            }
        };
        walk(p.kernels.at(0).body);
        CHECK(loops >= 1);
    }
}

TEST_CASE("lower: causal and windowed masks narrow the KV loop and mask only partial tiles") {
    // The window bounds the loop from below and the causal mask from above; no mask, no bound.
    const std::string window = tir::to_string(lower(*find_operator("prefill_windowed")));
    INFO(window);
    CHECK(window.find("for j in [max(") != std::string::npos);
    CHECK(window.find("if (") != std::string::npos);
    const std::string causal = tir::to_string(lower(*find_operator("prefill_causal")));
    CHECK(causal.find("q0") != causal.find("for j in [0, min("));
    CHECK(causal.find("for j in [0, min(") != std::string::npos);
    const std::string global = tir::to_string(lower(*find_operator("prefill_global")));
    CHECK(global.find("for j in [0, ") != std::string::npos);
}

TEST_CASE("lower: deal_chunk_tiles gives decode's chunks the visible tiles round-robin or in runs, each exactly once") {
    // Causal decode sees every key; with a window of 100 keys (q - 100 < kv <= q, the query the last
    // position) only the tiles from floor((seq_kv - 100) / 32) on, so the dealt range starts past 0.
    for (const int window : {0, 100}) {
        OperatorSpec spec = *find_operator("decode_causal");
        if (window) spec.attention.mask = Mask::Window, spec.attention.window = window;
        const tir::Program p = internal::lower_operator(instantiate(spec, 1, 256)).program;
        const tir::Kernel &k = p.kernels.at(0);
        INFO(tir::to_string(p));
        CHECK(std::find(k.int_params.begin(), k.int_params.end(), "interleave") != k.int_params.end());
        CHECK(tir::to_string(p).find("for t in [0, n_own)") != std::string::npos);
        // Which tiles each chunk's block takes, from the kernel's own scalars, in both orders (a launch-time
        // parameter), for sequences ending inside a tile and on its edge, with more chunks than tiles:
        // together every visible tile once and no other; interleaved, chunk c's tiles are c modulo chunks;
        // in runs, each chunk's tiles follow each other and come after the previous chunk's.
        for (const int interleave : {1, 0})
            for (const int seq_kv : {1, 31, 32, 33, 256, 1000})
                for (const int chunks : {1, 2, 3, 7, 40}) {
                    std::vector<int> seen((seq_kv + 31) / 32, 0);
                    const int first = window ? std::max(0, seq_kv - window) / 32 : 0;
                    int last = first - 1;
                    for (int chunk = 0; chunk < chunks; chunk++) {
                        std::map<std::string, Halide::Expr> env = {{"block_x", chunk},
                                                                   {"block_y", 0},
                                                                   {"block_z", 0},
                                                                   {"chunks", chunks},
                                                                   {"interleave", interleave},
                                                                   {"chunk_tiles", 0},
                                                                   {"seq_kv", seq_kv},
                                                                   {"seq_q", 1},
                                                                   {"batch", 1},
                                                                   {"q_heads", 32},
                                                                   {"kv_heads", 32}};
                        auto eval = [&](const Halide::Expr &e) {
                            const Halide::Expr v = Halide::Internal::simplify(Halide::Internal::substitute(env, e));
                            REQUIRE(v.as<Halide::Internal::IntImm>());
                            return int(v.as<Halide::Internal::IntImm>()->value);
                        };
                        for (const tir::ScalarDef &d : k.scalars) env[d.name] = eval(d.value);
                        for (const tir::Stmt &s : k.body) {
                            if (s->kind != tir::NodeKind::CarriedLoop) continue;
                            // The K load's row names the tile: row = tile * 32.
                            const tir::Stmt &load = s->body.at(0);
                            REQUIRE(load->kind == tir::NodeKind::TileLoad);
                            for (int it = eval(s->begin); it < eval(s->end); it++) {
                                env[s->var] = it;
                                const int tile = eval(load->row) / 32;
                                INFO("interleave " << interleave << " S=" << seq_kv << " chunks " << chunks << " chunk "
                                                   << chunk << " tile " << tile);
                                REQUIRE(tile >= 0);
                                REQUIRE(tile < int(seen.size()));
                                if (interleave) CHECK(tile % chunks == chunk);
                                if (!interleave) CHECK(tile == last + 1);
                                last = tile;
                                seen[tile]++;
                            }
                        }
                    }
                    INFO("window " << window << " interleave " << interleave << " S=" << seq_kv << " chunks "
                                   << chunks);
                    for (int j = 0; j < int(seen.size()); j++) CHECK(seen[j] == (j >= first ? 1 : 0));
                }
    }
}

// A change detector: it pins ptxas's register allocation (no spills at the default tiles). A failure
// means a change to the lowering, the device library or the toolkit moved the kernels' register use
// past the budget: measure the kernels again (docs/performance.md) before accepting or fixing it; the
// results stay correct either way (the GPU suites check them).
TEST_CASE(
    "change detector: the flagship kernels compile with nvcc for sm_80, sm_90 and sm_90a without spills "
    "(ptxas report)") {
    for (const char *name : {"prefill_causal", "decode_gqa"})
        for (const char *arch : {"sm_80", "sm_90", "sm_90a"}) {
            const EmittedOperator e = emit_operator(instantiate(*find_operator(name), 1, 4096), GpuOptions{}, arch);
            INFO(std::string(name) << " " << std::string(arch) << "\n" << e.ptxas_log);
            CHECK(e.ptx.find(".entry") != std::string::npos);
            REQUIRE(!e.resources.empty());
            for (const KernelResources &r : e.resources) {
                MESSAGE(std::string(name)
                        << " " << std::string(arch) << " " << r.kernel << ": " << r.registers << " registers, "
                        << r.spill_stores << " B spill stores, " << r.stack_bytes << " B stack");
                CHECK(r.registers > 0);
                CHECK(r.spill_stores == 0);
                CHECK(r.spill_loads == 0);
            }
        }
}

TEST_CASE("lower: unroll_chunk_loops puts several chunks' loads in flight in the combine only, and the CUDA compiles") {
    internal::LoweringChoices c;
    c.arch = GpuArch::Sm90a;
    c.unroll_chunks = 4;
    c.fold_combine = 0;
    const tir::Program p = internal::lower_operator(instantiate(*find_operator("decode_gqa"), 1, 1000), c).program;
    tir::verify(p);
    REQUIRE(p.kernels.size() == 2u);
    // The partial kernel's KV loop reads shared tiles: left alone. The combine (in strips of 4 warp rows
    // by lay_out_combine, whose strip loop holds a loop) loads a 16-register strip of acc per chunk: the
    // factor, 4, fits the 128-register budget.
    std::vector<int> partial, combine;
    for (const tir::Stmt &s : p.kernels[0].body)
        if (s->kind == tir::NodeKind::CarriedLoop) partial.push_back(s->unroll);
    const tir::Node *chunk_loop = nullptr;
    const std::function<void(const tir::Block &)> chunk_loops = [&](const tir::Block &b) {
        for (const tir::Stmt &s : b) {
            if (s->kind == tir::NodeKind::CarriedLoop) {
                combine.push_back(s->var == "p" ? s->unroll : -s->unroll);
                if (s->var == "p") chunk_loop = s.get();
            }
            chunk_loops(s->body);
        }
    };
    chunk_loops(p.kernels[1].body);
    INFO(tir::to_string(p));
    CHECK(partial == std::vector<int>{1});
    CHECK(combine == std::vector<int>{-1, 4});
    // Padded to a multiple of 4 chunks: the loads lead, masked past the last chunk; the maps that write
    // carried state keep it there (a select), the others are as they were.
    REQUIRE(chunk_loop);
    const Halide::Expr chunks = Halide::Internal::Variable::make(Halide::Int(32), "chunks");
    CHECK(Halide::Internal::can_prove(chunk_loop->end == (chunks + 3) / 4 * 4));
    int loads = 0, guarded = 0;
    bool merging = false;
    for (const tir::Stmt &s : chunk_loop->body) {
        if (s->kind == tir::NodeKind::TileLoad || s->kind == tir::NodeKind::RowLoad) {
            CHECK(!merging);  // loads first
            loads++;
            CHECK(s->valid_rows.as<Halide::Internal::Select>() != nullptr);
        } else {
            const bool carried = std::count(chunk_loop->carried.begin(), chunk_loop->carried.end(), s->dst) > 0;
            const auto *sel = s->value.as<Halide::Internal::Select>();
            CHECK(carried == (sel != nullptr && Halide::Internal::expr_uses_var(sel->condition, "p")));
            guarded += carried;
            merging = true;
        }
    }
    CHECK(loads == 3);
    CHECK(guarded == 3);
    const std::string src = internal::emit_cuda(p);
    CHECK(src.find("#pragma unroll 4\n") != std::string::npos);
    CHECK_NOTHROW(compile_sm90a(src, "decode_gqa_unrolled.cu"));
    // A factor of 1 leaves every loop as it was; 8 is what the 128-register budget allows, the default 4.
    c.unroll_chunks = 1;
    const tir::Program off = internal::lower_operator(instantiate(*find_operator("decode_gqa"), 1, 1000), c).program;
    for (const tir::Kernel &k : off.kernels)
        for (const tir::Stmt &s : k.body)
            if (s->kind == tir::NodeKind::CarriedLoop) CHECK(s->unroll == 1);
    for (const int factor : {8, 16, 0}) {
        c.unroll_chunks = factor;
        const tir::Program d = internal::lower_operator(instantiate(*find_operator("decode_gqa"), 1, 1000), c).program;
        combine.clear();
        chunk_loops(d.kernels.at(1).body);
        CHECK(combine == std::vector<int>{-1, factor ? 8 : 4});
    }
}

TEST_CASE(
    "lower: unroll_chunk_loops keeps U iterations' register tiles within 128 registers, leaves shared tiles alone") {
    const auto f32 = [](int rows, int cols, tir::Layout l) {
        return tir::TileType{DType::F32, rows, cols, tir::Scope::Register, l};
    };
    const Halide::Expr p = Halide::Internal::Variable::make(Halide::Int(32), "p");
    tir::Kernel k;
    k.name = "loops";
    k.warps = 1;
    k.tensors = {{"w", DType::F32, false}, {"x", DType::F16, false}};
    k.values = {{"r", f32(16, 1, tir::Layout::RowVector)},
                {"t", f32(16, 128, tir::Layout::MmaAccumulator)},
                {"u", f32(4, 128, tir::Layout::WarpRows)},
                {"x_s", {DType::F16, 16, 64, tir::Scope::Shared, tir::Layout::SharedRowMajor}}};
    k.body = {tir::make_loop("p", 0, 5, {}, {tir::make_row_load("r", "w", p * 16, 1, 16, 0.0f)}),
              tir::make_loop("p", 0, 5, {}, {tir::make_load("t", "w", p * 2048, 128, 16, 128)}),
              tir::make_loop("p", 0, 5, {}, {tir::make_load("u", "w", p * 512, 128, 4, 128)}),
              tir::make_loop("p", 0, 5, {}, {tir::make_load("x_s", "x", p * 1024, 64, 16, 64)})};
    tir::verify(k);
    tir::Program prog;
    prog.kernels = {k};
    const tir::Kernel u = internal::unroll_chunk_loops(prog, 8).kernels.at(0);
    tir::verify(u);
    CHECK(u.body[0]->unroll == 16);  // row vectors only: 4 times the factor, at most 16
    CHECK(u.body[1]->unroll == 2);  // 64 registers of fragments per iteration
    CHECK(u.body[2]->unroll == 8);  // 16 registers of warp rows per iteration
    CHECK(u.body[3]->unroll == 1);  // shared tiles: the pipelined loops' business
    // Padded: 5 iterations become 16 (and 6 for U = 2); the loads past the fifth have no valid rows.
    CHECK(Halide::Internal::can_prove(u.body[0]->end == 16));
    CHECK(Halide::Internal::can_prove(u.body[1]->end == 6));
    CHECK(Halide::Internal::can_prove(u.body[3]->end == 5));
    CHECK(Halide::Internal::can_prove(Halide::Internal::substitute("p", 5, u.body[2]->body[0]->valid_rows) == 0));
    CHECK(Halide::Internal::can_prove(Halide::Internal::substitute("p", 4, u.body[2]->body[0]->valid_rows) == 4));
    CHECK(internal::unroll_chunk_loops(prog, 1).kernels.at(0).body[0]->unroll == 1);
    CHECK(internal::unroll_chunk_loops(prog, 2).kernels.at(0).body[0]->unroll == 8);
    CHECK(internal::unroll_chunk_loops(prog, 32).kernels.at(0).body[0]->unroll == 32);  // a factor above 16 stays
}

TEST_CASE("lower: fold_combine runs the combine in the last chunk block of each (batch, KV head) group") {
    internal::LoweringChoices c;
    c.arch = GpuArch::Sm90a;
    c.fold_combine = 0;
    const OperatorInstance inst = instantiate(*find_operator("decode_gqa"), 3, 1000);
    const tir::Program two = internal::lower_operator(inst, c).program;
    c.fold_combine = -1;
    const tir::Program one = internal::lower_operator(inst, c).program;
    REQUIRE(two.kernels.size() == 2u);
    REQUIRE(one.kernels.size() == 1u);
    const tir::Kernel &k = one.kernels[0];
    INFO(tir::to_string(one));
    // The partial's body up to its three workspace stores, then two conditions on the chunk count:
    // one chunk writes the output from the block's own state (the combine's epilogue: its final map
    // and store); several store the state and arrive, and the arrival's body is the combine's.
    const tir::Block &partial = two.kernels[0].body;
    REQUIRE(k.body.size() == partial.size() - 3 + 2);
    const tir::Stmt &direct = k.body[k.body.size() - 2], &several = k.body.back();
    REQUIRE(direct->kind == tir::NodeKind::IfThen);
    REQUIRE(several->kind == tir::NodeKind::IfThen);
    CHECK(tir::to_string(direct, false).find("if (chunks == 1)") == 0);
    REQUIRE(direct->body.size() == 2u);
    CHECK(direct->body[0]->kind == tir::NodeKind::TileMap);
    CHECK(direct->body[1]->kind == tir::NodeKind::TileStore);
    CHECK(direct->body[1]->tensor == "out");
    REQUIRE(several->body.size() == 4u);
    for (int i = 0; i < 3; i++)
        CHECK(tir::to_string(several->body[i], false) == tir::to_string(partial[partial.size() - 3 + i], false));
    const tir::Stmt &last = several->body.back();
    REQUIRE(last->kind == tir::NodeKind::LastArrival);
    CHECK(last->tensor == "ws_arrivals");
    CHECK(last->body.size() == two.kernels[1].body.size());
    CHECK(tir::to_string(last, false).find("if last of chunks arrivals at ws_arrivals[b * kv_heads + hkv]") == 0);
    const tir::Workspace &w = one.workspaces.back();
    CHECK(w.name == "ws_arrivals");
    CHECK(w.zeroed);
    CHECK(tir::to_string(one).find("workspace ws_arrivals: f32[batch * kv_heads], zeroed") != std::string::npos);
    // The combine's rows are the block's group: r0 = b * q_heads + h0, r_valid = group.
    std::map<std::string, std::string> scalars;
    for (const tir::ScalarDef &d : k.scalars) {
        std::ostringstream os;
        os << d.value;
        scalars[d.name] = os.str();
    }
    CHECK(scalars["r0"] == "((b*q_heads) + h0)");
    CHECK(scalars["r_valid"] == "group");
    // The same grid and shared memory as the partial kernel alone, and CUDA that compiles.
    CHECK(k.shared_bytes == two.kernels[0].shared_bytes);
    const std::string src = internal::emit_cuda(one);
    CHECK(src.find("nd::last_arrival(") != std::string::npos);
    CHECK(src.find("nd::load_warp_rows<true>(") != std::string::npos);  // ld.global.cg: L2, where the others wrote
    CHECK_NOTHROW(compile_sm90a(src, "decode_gqa_folded.cu"));
}

TEST_CASE("lower: fold_constant_scales turns the softcap's division by its cap into a multiplication") {
    for (const char *name : {"prefill_softcap", "decode_softcap", "prefill_windowed"}) {
        INFO(name);
        for (const GpuArch target : {GpuArch::Sm80, GpuArch::Sm90a}) {
            const tir::Program p = lower(*find_operator(name), target);
            const std::string text = tir::to_string(p);
            INFO(text);
            // cap * tanh(s * d^-1/2 / cap) with cap 50 and d = 128: one constant factor inside the tanh.
            CHECK(text.find("/ 50") == std::string::npos);
            CHECK(text.find("tanh(s * 0.00176777)") != std::string::npos);
            CHECK(internal::emit_cuda(p).find("/ 50.0f") == std::string::npos);
        }
    }
}

TEST_CASE(
    "lower: swizzle_shared_tiles swizzles the mma.sync kernels' Q, K and V tiles whose columns make 64-column blocks") {
    for (const auto &[op, arch] : {std::pair{"decode_causal", GpuArch::Sm80},
                                   {"decode_gqa", GpuArch::Sm90a},
                                   {"prefill_causal", GpuArch::Sm80}}) {
        INFO(op);
        const tir::Program p = lower(*find_operator(op), arch);
        const tir::Kernel &k = p.kernels[0];
        CHECK(k.producer_warps == 0);
        for (const char *t : {"q_s", "k_s", "v_s"}) CHECK(k.values.at(t).layout == tir::Layout::SharedSwizzled128);
        // Unpadded tiles: the stages of K and of V (Q aliased onto K's last stage) and 128 bytes of slack,
        // for the 128-byte alignment of the base; decode on sm_90a copies by TMA, whose swizzle needs
        // 1024-byte alignment, and adds a full barrier per buffer.
        const bool tma = !k.tensor_maps.empty();
        CHECK(tma == (arch == GpuArch::Sm90a && std::string(op).rfind("decode", 0) == 0));
        const int barriers = tma ? 2 * k.pipeline_stages * 8 : 0, slack = tma ? 1024 : 128;
        const tir::TileType &kt = k.values.at("k_s");
        CHECK(k.shared_bytes == k.pipeline_stages * 2 * kt.rows * kt.cols * 2 + barriers + slack);
        const std::string src = internal::emit_cuda(p);
        CHECK(src.find("nd::swizzled_tile<nd::f16, " + std::to_string(kt.rows) + ", 128>") != std::string::npos);
        CHECK(src.find("__align__(" + std::to_string(slack) + ") unsigned char smem_raw[]") != std::string::npos);
    }
    // Head dim 96 is not a whole number of 64-column blocks: the tiles stay padded, the base unaligned.
    OperatorSpec d96 = *find_operator("decode_causal");
    d96.attention.head_dim_qk = d96.attention.head_dim_v = 96;
    const tir::Program p = lower(d96, GpuArch::Sm80);
    const tir::Kernel &k = p.kernels[0];
    for (const char *t : {"q_s", "k_s", "v_s"}) CHECK(k.values.at(t).layout == tir::Layout::SharedRowMajor);
    CHECK(k.shared_bytes == k.pipeline_stages * 2 * 32 * (96 + 8) * 2);
    CHECK(internal::emit_cuda(p).find("smem_raw") == std::string::npos);
    // wgmma kernels keep select_mma's swizzle and their TMA producer.
    const tir::Program h = lower(*find_operator("prefill_global"), GpuArch::Sm90a);
    CHECK(h.kernels[0].producer_warps > 0);
}

TEST_CASE("emit: the KV loop's first copies are issued before the block loads Q, which they never overwrite") {
    for (const auto &[op, stages] : {std::pair{"decode_gqa", 0}, {"decode_causal", 2}, {"prefill_causal", 0}}) {
        INFO(op << ", stages " << stages);
        internal::LoweringChoices c;
        c.arch = GpuArch::Sm80;
        c.stages = stages;
        const tir::Program p = internal::lower_operator(instantiate(*find_operator(op), 1, 1000), c).program;
        const tir::Kernel &k = p.kernels[0];
        const std::string src = internal::emit_cuda(p);
        const size_t first_copy = src.find("nd::load_tile_async<THREADS>(k_s_buf(0)");
        const size_t q_load = src.find("nd::load_tile_sync<THREADS>(q_s_buf(0)");
        REQUIRE(first_copy != std::string::npos);
        REQUIRE(q_load != std::string::npos);
        CHECK(first_copy < q_load);
        // The prologue fills stages 0 .. S - 2 of K and V; Q lies in none of them.
        const tir::SharedLayout l = tir::shared_layout(k);
        const int q0 = l.offset.at("q_s"), q1 = q0 + tir::shared_tile_bytes(k.values.at("q_s"));
        for (const char *t : {"k_s", "v_s"}) {
            const int at = l.offset.at(t), end = at + (k.pipeline_stages - 1) * tir::shared_tile_bytes(k.values.at(t));
            CHECK((q1 <= at || end <= q0));
        }
        CHECK_NOTHROW(compile_sm90a(src, std::string(op) + "_hoisted.cu"));
    }
}

namespace {

/** The register values a block's statements name, at any depth. */
void values_named(const tir::Kernel &k, const tir::Block &b, std::set<std::string> &out) {
    for (const tir::Stmt &s : b) {
        for (const std::string *n : {&s->dst, &s->src})
            if (k.values.count(*n)) out.insert(*n);
        values_named(k, s->body, out);
    }
}

const tir::Stmt *find_arrival(const tir::Block &b) {
    for (const tir::Stmt &s : b) {
        if (s->kind == tir::NodeKind::LastArrival) return &s;
        if (const tir::Stmt *in = find_arrival(s->body)) return in;
    }
    return nullptr;
}

}  // namespace

// A change detector: it pins the combine's listing (strip bounds, slice expressions, the emitted
// device calls). A failure after a change to the builder or lay_out_combine means the form changed:
// read the new listing, check the interpreter cases (test/correctness/interpret_attention.cpp) and update
// the expected text if the new form is intended.
TEST_CASE(
    "change detector: lay_out_combine merges split-K chunks in warp-rows registers and leaves the partial's "
    "state in fragments") {
    const OperatorInstance inst = instantiate(*find_operator("decode_gqa"), 3, 1000);
    for (int fold : {1, 0}) {
        INFO("fold_combine ", fold);
        internal::LoweringChoices c;
        c.arch = GpuArch::Sm90a;
        c.fold_combine = fold;
        const tir::Program p = internal::lower_operator(inst, c).program;
        INFO(tir::to_string(p));
        const tir::Kernel &k = p.kernels.back();
        const tir::Stmt *arrival = find_arrival(k.body);
        REQUIRE((fold == 1) == (arrival != nullptr));
        std::set<std::string> combine;
        values_named(k, fold ? (*arrival)->body : k.body, combine);
        REQUIRE(combine.size() > 5u);
        for (const std::string &v : combine) {
            INFO(v);
            CHECK(tir::is_warp_rows(k.values.at(v)));
        }
        if (fold) {
            // The partial's state of the same names stays in fragments (its dots write it); the
            // combine's copies carry the suffix, the chunk's own values keep their names.
            for (const char *v : {"acc", "row_max", "row_sum", "o_out"}) {
                CHECK(k.values.at(v).layout != tir::Layout::WarpRows);
                CHECK(!tir::is_warp_rows(k.values.at(v)));
                CHECK(combine.count(std::string(v) + "_c"));
            }
            CHECK(combine.count("acc_p"));
        }
        // The combine runs in strips of 4 rows: 4-row tiles, slices 4 strip rows further, up to the group's rows.
        for (const std::string &v : combine) CHECK(k.values.at(v).rows == 4);
        const std::string listing = tir::to_string(p);
        CHECK(listing.find("for strip in [0, (min(r_valid, 16) + 3) / 4) {") != std::string::npos);
        // (unroll_chunk_loops pads the chunk loop: past the last chunk, a load has no rows)
        CHECK(
            listing.find("load ws_acc[base: (strip * 4 + n_rows * p + r0) * 128, stride 128, valid select(p < chunks, "
                         "r_valid - strip * 4, 0) x 128]") != std::string::npos);
        // Output rows are (batch, head) rows of one query each, a head stride (out_vstride_2 units) apart.
        CHECK(listing.find(std::string("store out[base: (out_vstride_2 * r0 + out_vstride_2 * strip * 4) * 8, stride "
                                       "out_vstride_2 * 8, valid r_valid - strip * 4 x 128] = o_out") +
                           (fold ? "_c" : "")) != std::string::npos);
        const std::string src = internal::emit_cuda(p);
        for (const char *call : {"nd::load_warp_rows<true>(acc_p", "nd::load_warp_rows_vec(row_max_p",
                                 "nd::store_warp_rows(", "nd::row_of("})
            CHECK(src.find(call) != std::string::npos);
        CHECK_NOTHROW(compile_sm90a(src, "decode_gqa_warp_rows.cu"));
    }
}

TEST_CASE("lower: the cluster merge publishes each chunk's state in shared memory over the free ring; rank 0 merges") {
    // sm_90a's form of the folded combine: no workspace, no counter; the state tiles alias the K/V ring
    // (free after the loop), so the kernel's shared memory, and the chunk rule with it, stays the fold's.
    const OperatorInstance inst = instantiate(*find_operator("decode_gqa"), 3, 1000);
    internal::LoweringChoices c;
    c.arch = GpuArch::Sm90a;
    const tir::Program fold = internal::lower_operator(inst, c).program;
    c.cluster_merge = 1;
    const tir::Program cluster = internal::lower_operator(inst, c).program;
    const std::string text = tir::to_string(cluster);
    INFO(text);
    REQUIRE(cluster.kernels.size() == 1);
    const tir::Kernel &k = cluster.kernels[0];
    CHECK(cluster.workspaces.empty());
    for (const tir::TensorParam &t : k.tensors) CHECK(t.name.rfind("ws_", 0) == std::string::npos);
    CHECK(k.shared_bytes == fold.kernels.at(0).shared_bytes);
    const tir::SharedLayout l = tir::shared_layout(k);
    CHECK(l.offset.at("acc_shared") < l.offset.at("v_s"));  // inside the ring
    check_in_order(text, {"clusters: chunks blocks along x", "barrier", "acc_shared = convert(acc, valid rows group)",
                          "cluster merge, run by rank 0 {", "for strip in",
                          "acc_p = load acc_shared@rank min(p, chunks - 1)[row strip * 4", "store out["});
    CHECK(text.find("if last of") == std::string::npos);
    const std::string cuda = internal::emit_cuda(cluster);
    CHECK(cuda.find("nd::cluster_sync();") != std::string::npos);
    CHECK(cuda.find("__trap()") != std::string::npos);  // a launch without the clusters fails loudly
    CHECK_NOTHROW(compile_sm90a(cuda, "decode_gqa_cluster.cu"));
    // Where it does not apply: the reason, naming the operator.
    c.arch = GpuArch::Sm80;
    CHECK_THROWS_WITH_AS(internal::lower_operator(inst, c),
                         doctest::Contains("no cluster merge: thread block clusters need sm_90a"), CompileError);
    c.arch = GpuArch::Sm90a;
    c.warps = 2;
    CHECK_THROWS_WITH_AS(internal::lower_operator(inst, c), doctest::Contains("it merges one-warp blocks"),
                         CompileError);
}

TEST_CASE("decode's cluster merge where the chunks make a portable cluster of one-warp sm_90a blocks") {
    CHECK(internal::use_cluster_merge(-1, 2, true, -1, 1));
    CHECK(internal::use_cluster_merge(-1, 8, true, 1, 1));
    CHECK_FALSE(internal::use_cluster_merge(-1, 1, true, -1, 1));  // one chunk: nothing to merge
    CHECK_FALSE(internal::use_cluster_merge(-1, 9, true, -1, 1));  // beyond the portable cluster size
    CHECK_FALSE(internal::use_cluster_merge(-1, 4, false, -1, 1));  // sm_80
    CHECK_FALSE(internal::use_cluster_merge(-1, 4, true, 0, 1));  // two kernels asked for
    CHECK_FALSE(internal::use_cluster_merge(-1, 4, true, -1, 2));  // groups of more than 16 heads
    CHECK(internal::use_cluster_merge(1, 16, false, -1, 1));  // forced (lowering checks the rest)
    CHECK_FALSE(internal::use_cluster_merge(0, 4, true, -1, 1));
}

TEST_CASE(
    "lower: lay_out_combine leaves a region alone that reads what it did not write, reduces, reads a user tensor, or "
    "reloads what it stored") {
    // A folded-combine shape by hand: fragments outside, then an arrival whose body is the combine.
    using namespace tir;
    const auto fv = [](const std::string &n) { return Halide::Internal::Variable::make(Halide::Float(32), n); };
    Kernel k;
    k.name = "fold";
    k.warps = 1;
    k.grid_x = 2;
    k.tensors = {
        {"ws", DType::F32, true}, {"x", DType::F32, false}, {"out", DType::F32, true}, {"cnt", DType::F32, true}};
    k.values = {{"acc", {DType::F32, 16, 128, Scope::Register, Layout::MmaAccumulator}},
                {"part", {DType::F32, 16, 128, Scope::Register, Layout::MmaAccumulator}},
                {"m", {DType::F32, 16, 1, Scope::Register, Layout::RowVector}}};
    const Block combine = {make_fill("acc", 0.0f), make_load("part", "ws", 0, 128, 16, 128),
                           make_map("acc", fv("acc") + fv("part")), make_store("acc", "out", 0, 128, 16, 128)};
    k.body = {make_fill("acc", 1.0f), make_store("acc", "ws", 0, 128, 16, 128),
              make_last_arrival("cnt", 0, 2, combine)};
    Program p;
    p.kernels = {k};
    p.workspaces = {{"ws", Halide::Expr(16 * 128)}, {"cnt", Halide::Expr(1), true}};
    REQUIRE_NOTHROW(verify(p));
    const Program laid = internal::lay_out_combine(p);
    CHECK(laid.kernels[0].values.at("acc_c").layout == Layout::WarpRows);
    CHECK(laid.kernels[0].values.at("part").layout == Layout::WarpRows);  // only in the region: not renamed
    CHECK(laid.kernels[0].values.at("acc").layout == Layout::MmaAccumulator);
    CHECK_NOTHROW(verify(laid));
    check_in_order(to_string(laid), {"for strip in [0, 4) {",
                                     "part = load ws[base: strip * 512, stride 128, valid 16 - strip * 4 x 128]",
                                     "acc_c = map(acc_c + part)", "store out[base: strip * 512,"});
    // On the interpreter, strips and all: out = the workspace the block stored (acc = 1) + 0.
    HostTensor ws(TensorDesc{"ws", DType::F32, {16 * 128}}), x(TensorDesc{"x", DType::F32, {16 * 128}}),
        out(TensorDesc{"out", DType::F32, {16 * 128}}), cnt(TensorDesc{"cnt", DType::F32, {1}});
    LaunchArgs args{{{"ws", &ws}, {"x", &x}, {"out", &out}, {"cnt", &cnt}}, {}, {}};
    interpret(laid, args);
    for (double v : out.values) CHECK(v == 1.0);

    auto with_combine = [&](const Block &body) {
        Program q = p;
        q.kernels[0].body.back() = make_last_arrival("cnt", 0, 2, body);
        REQUIRE_NOTHROW(verify(q));
        return q;
    };
    const Block live_in = {make_load("part", "ws", 0, 128, 16, 128), make_map("acc", fv("acc") + fv("part")),
                           make_store("acc", "out", 0, 128, 16, 128)};  // reads the partial's acc
    const Block reduces = {make_load("part", "ws", 0, 128, 16, 128), make_fill("m", 0.0f),
                           make_reduce("m", ReduceOp::Max, "part"), make_row_store("m", "out", 0, 16)};
    const Block user_tensor = {make_fill("acc", 0.0f), make_load("part", "x", 0, 128, 16, 128),
                               make_map("acc", fv("acc") + fv("part")), make_store("acc", "out", 0, 128, 16, 128)};
    // Stores ws, then loads its rows 4..15: in strips, rows 4..7 would be loaded before they are stored.
    const Block reads_back = {make_fill("acc", 2.0f), make_store("acc", "ws", 0, 128, 16, 128),
                              make_load("part", "ws", 4 * 128, 128, 12, 128),
                              make_store("part", "out", 0, 128, 12, 128)};
    for (const Block *b : {&live_in, &reduces, &user_tensor, &reads_back}) {
        const Program q = with_combine(*b);
        const Program same = internal::lay_out_combine(q);
        CHECK(to_string(same) == to_string(q));
    }
}

TEST_CASE("lower: a paged cache's tiles lie in one page; other page sizes are refused by name") {
    OperatorSpec spec = *find_operator("decode_paged");
    auto keys_per_tile = [](const tir::Program &p) { return p.kernels.at(0).values.at("k_s").rows; };
    spec.attention.page_size = 16;  // smaller than decode's 32-key tiles: tiles of 16
    CHECK(keys_per_tile(lower(spec)) == 16);
    spec.attention.page_size = 128;
    CHECK(keys_per_tile(lower(spec)) == 32);
    // K's tile is addressed through the page table, its row within the page.
    const std::string listing = tir::to_string(lower(spec));
    CHECK(listing.find("page_table(") != std::string::npos);
    CHECK(listing.find("% page_size") != std::string::npos);
    // Prefill's wgmma tiles of 192 keys come down to the largest that divides the page.
    const OperatorSpec chunk = *find_operator("prefill_paged");
    CHECK(keys_per_tile(lower(chunk, GpuArch::Sm90a)) == 64);
    spec.attention.page_size = 24;
    CHECK_THROWS_WITH_AS(lower(spec), doctest::Contains("pages of 24 keys; the paged kernels need a multiple of 16"),
                         CompileError);
    spec.attention.page_size = 64;
    internal::LoweringChoices c;
    c.block_n = 48;
    CHECK_THROWS_WITH_AS(internal::lower_operator(instantiate(spec, 1, 256), c),
                         doctest::Contains("KV tiles of 48 keys do not divide pages of 64"), CompileError);
}
