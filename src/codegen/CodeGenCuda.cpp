#include <functional>
#include "codegen/CodeGenCuda.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "codegen/CodeGenStrip.h"
#include "codegen/CudaPrinter.h"
#include "neptune/Error.h"
#include "tir/SharedLayout.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

class Emitter {
public:
    explicit Emitter(const Kernel &k) : k_(k), layout_(shared_layout(k)) {}

    std::string emit() {
        const bool specialized = k_.producer_warps > 0;
        out_ << signature(k_);
        line("constexpr int THREADS = " + std::to_string(32 * k_.warps) + ";  // the compute warps");
        line("(void)THREADS;");
        if (const int a = layout_.alignment_slack) {
            // Swizzled tiles (and TMA) need aligned shared addresses; the planner left room.
            const std::string mask = std::to_string(a - 1) + "u";
            line("extern __shared__ __align__(" + std::to_string(a) + ") unsigned char smem_raw[];");
            line("unsigned char *const smem = smem_raw + ((" + std::to_string(a) +
                 "u - (nd::smem_address(smem_raw) & " + mask + ")) & " + mask + ");");
        } else {
            line("extern __shared__ __align__(16) unsigned char smem[];");
        }
        if (specialized) {
            line("const int warp_all = nd::warp_id();");
        } else {
            line("const int warp = nd::warp_id();");
            line("(void)warp;");
        }
        line("const int block_x = blockIdx.x, block_y = blockIdx.y, block_z = blockIdx.z;");
        line("const int grid_x = gridDim.x, sm_count = nd::sm_count();");
        line("(void)block_x; (void)block_y; (void)block_z; (void)grid_x; (void)sm_count;");
        ExprPrinter sp(k_, Context::Scalar);
        for (const ScalarDef &s : k_.scalars) line("const int " + ident(s.name) + " = " + sp.print(s.value) + ";");
        declare_shared();
        if (specialized) {
            roles();
        } else {
            init_copy_barriers();
            declare_registers();
            const size_t hoist_at = prologue_position();
            for (size_t i = 0; i < k_.body.size(); ++i) {
                if (hoisted_ && i == hoist_at) loop_prologue(*hoisted_);
                stmt(k_.body[i], nullptr);
            }
        }
        out_ << "}\n";
        return out_.str();
    }

private:
    // The loop being emitted, for pipelined loads.
    struct LoopCtx {
        const Node *loop;
        int pipelined = 0;  // its cp.async loads (commit groups per iteration)
    };

    void line(const std::string &s) { out_ << std::string(size_t(indent_ * 4), ' ') << s << "\n"; }

    std::string tile_type(const TileType &t) const {
        switch (t.layout) {
        case Layout::SharedRowMajor:
            return "nd::smem_tile<" + std::string(elem_type(t.elem)) + ", " + std::to_string(t.rows) + ", " +
                   std::to_string(t.cols) + ">";
        case Layout::SharedSwizzled128:
            return "nd::swizzled_tile<" + std::string(elem_type(t.elem)) + ", " + std::to_string(t.rows) + ", " +
                   std::to_string(t.cols) + ">";
        case Layout::MmaAccumulator:
            return "nd::acc_tile<" + std::to_string(t.rows / 16 / k_.warps) + ", " + std::to_string(t.cols / 8) + ">";
        case Layout::MmaOperandA:
            return "nd::a_tile<" + std::string(elem_type(t.elem)) + ", " + std::to_string(t.rows / 16 / k_.warps) +
                   ", " + std::to_string(t.cols / 16) + ">";
        case Layout::RowVector: return "nd::row_vec<" + std::to_string(t.rows / 16 / k_.warps) + ">";
        case Layout::WarpRows:
            return "nd::warp_rows_tile<" + std::to_string(t.rows) + ", " + std::to_string((t.cols + 127) / 128) + ">";
        case Layout::WarpRowVector: return "nd::warp_rows_vec<" + std::to_string(t.rows) + ">";
        default: throw InternalError("emit_cuda: value without a layout");
        }
    }

    void declare_shared() {
        for (const auto &[name, t] : k_.values) {
            if (t.scope != Scope::Shared) continue;
            if (t.elem == DType::F32) {  // a block's state for its cluster: rows of t.cols floats
                line("float *const " + ident(name) + "_smem = reinterpret_cast<float *>(smem + " +
                     std::to_string(layout_.offset.at(name)) + ");");
                continue;
            }
            // A function of the buffer index: an array of tiles indexed at run time would live in local memory.
            const int bytes = shared_tile_bytes(t);
            line("const auto " + ident(name) + "_buf = [&](int stage) { return " + tile_type(t) + "{reinterpret_cast<" +
                 elem_type(t.elem) + " *>(smem + " + std::to_string(layout_.offset.at(name)) + " + stage * " +
                 std::to_string(bytes) + ")}; };");
        }
        for (const auto &[name, off] : layout_.full_barrier)
            line("unsigned long long *const " + ident(name) + "_full = reinterpret_cast<unsigned long long *>(smem + " +
                 std::to_string(off) + ");");
        for (const auto &[name, off] : layout_.empty_barrier)
            line("unsigned long long *const " + ident(name) +
                 "_empty = reinterpret_cast<unsigned long long *>(smem + " + std::to_string(off) + ");");
    }

    void declare_registers() {
        for (const auto &[name, t] : k_.values)
            if (t.scope != Scope::Shared) line(tile_type(t) + " " + ident(name) + ";");
    }

    // ---- Warp specialization: a producer warpgroup issues the TMA copies, the rest compute ------------

    static int tile_bytes(const TileType &t) { return t.rows * t.cols * dtype_bytes(t.elem); }

    void roles() {
        // Full barriers complete on the producer's arrival plus the copy's bytes; empty barriers on one
        // arrival per compute warp (Release).
        line("if (threadIdx.x == 0) {");
        indent_++;
        for (const auto &[name, off] : layout_.full_barrier)
            for (int b = 0; b < layout_.buffers.at(name); b++)
                line("nd::mbarrier_init(" + ident(name) + "_full + " + std::to_string(b) + ", 1);");
        // A multicast tile's buffer is written by every block of the cluster: it is empty once the compute
        // warps of all of them released it.
        for (const auto &[name, off] : layout_.empty_barrier)
            for (int b = 0; b < layout_.buffers.at(name); b++)
                line("nd::mbarrier_init(" + ident(name) + "_empty + " + std::to_string(b) + ", " +
                     std::to_string(k_.warps * std::max(1, multicast_of(name))) + ");");
        line("nd::fence_barrier_init();");
        indent_--;
        line("}");
        // With multicast loads, a block's barriers must be ready before its cluster's producers copy into it.
        line(multicasts() ? "nd::cluster_sync();" : "__syncthreads();");
        line("if (warp_all < " + std::to_string(k_.producer_warps) + ") {");
        indent_++;
        if (k_.producer_registers) line("nd::setmaxnreg_dec<" + std::to_string(k_.producer_registers) + ">();");
        line("if (warp_all == 0 && nd::lane_id() == 0) {");
        indent_++;
        for (const TensorMap &m : k_.tensor_maps) line("nd::tma_prefetch(" + ident(m.name) + ");");
        for (const Stmt &s : k_.body) produce(s);
        indent_--;
        line("}");
        indent_--;
        line("} else {");
        indent_++;
        if (k_.consumer_registers) line("nd::setmaxnreg_inc<" + std::to_string(k_.consumer_registers) + ">();");
        line("const int warp = warp_all - " + std::to_string(k_.producer_warps) + ";");
        line("(void)warp;");
        declare_registers();
        for (const Stmt &s : k_.body) stmt(s, nullptr);
        indent_--;
        line("}");
        // No block leaves while its cluster's producers may still copy into it or arrive on its barriers.
        if (multicasts()) line("nd::cluster_sync();");
    }

    // The blocks a ring tile's loads are multicast to (0: not multicast).
    int multicast_of(const std::string &tile) const {
        int n = 0;
        std::function<void(const Block &)> scan = [&](const Block &b) {
            for (const Stmt &s : b) {
                if (s->kind == NodeKind::TileLoad && s->dst == tile) n = std::max(n, s->multicast);
                scan(s->body);
            }
        };
        scan(k_.body);
        return n > 1 ? n : 0;
    }
    bool multicasts() const {
        for (const auto &[name, off] : layout_.empty_barrier)
            if (multicast_of(name)) return true;
        return false;
    }

    // TMA copies in the compute warps' own loops (pipeline_loads): one full barrier per buffer, which
    // the issuing thread's arrival and the copy's bytes complete.
    void init_copy_barriers() {
        if (layout_.full_barrier.empty()) return;
        line("if (threadIdx.x == 0) {");
        indent_++;
        for (const auto &[name, off] : layout_.full_barrier)
            for (int b = 0; b < layout_.buffers.at(name); b++)
                line("nd::mbarrier_init(" + ident(name) + "_full + " + std::to_string(b) + ", 1);");
        line("nd::fence_barrier_init();");
        for (const TensorMap &m : k_.tensor_maps) line("nd::tma_prefetch(" + ident(m.name) + ");");
        indent_--;
        line("}");
        line("__syncthreads();");
    }

    // Thread 0 issues the TMA copy of load `n` into buffer `buffer` (an expression), for the iteration
    // at which `var` is `at`. `after_reads`: the buffer was read (ldmatrix, plain stores of an aliased
    // tile) since it was last filled, so those generic-proxy accesses are ordered before the copy.
    void tma_issue(const Node &n, const std::string &buffer, const std::string &var, const Expr &at, bool after_reads) {
        auto f = [&](const Expr &e) { return HI::substitute(var, at, e); };
        const std::string bar = ident(n.dst) + "_full + " + buffer;
        line("if (threadIdx.x == 0) {");
        indent_++;
        if (after_reads) line("nd::fence_proxy_async();");
        line("nd::mbarrier_arrive_expect_tx(" + bar + ", " + std::to_string(tile_bytes(k_.values.at(n.dst))) + ");");
        line("nd::tma_load_tile(" + ident(n.dst) + "_buf(" + buffer + "), " + ident(map_of(n).name) + ", " +
             scalar(f(n.row)) + ", " + scalar(f(n.head)) + ", " + scalar(f(n.batch)) + ", " + bar + ");");
        indent_--;
        line("}");
    }

    // Warpgroup g waits on barrier 2 + g and passes to 2 + (g + 1) % C: immediates, one branch per warpgroup.
    void turn(TurnMode mode) {
        const int groups = k_.warps / 4;
        auto bar = [&](const char *op, int id) {
            return std::string("nd::barrier_") + op + "<" + std::to_string(2 + id) + ", 256>();";
        };
        if (mode == TurnMode::Begin)
            return line("if (warp / 4 == " + std::to_string(groups - 1) + ") " + bar("arrive", 0));
        if (mode == TurnMode::End) return line("if (warp / 4 == 0) " + bar("sync", 0));
        for (int g = 0; g < groups; g++)
            line(std::string(g ? "else " : "") + (g + 1 < groups ? "if (warp / 4 == " + std::to_string(g) + ") " : "") +
                 (mode == TurnMode::Take ? bar("sync", g) : bar("arrive", (g + 1) % groups)));
    }

    static bool has_tma_load(const Stmt &s) {
        if (s->kind == NodeKind::TileLoad && s->copy == CopyKind::Tma) return true;
        for (const Stmt &b : s->body)
            if (has_tma_load(b)) return true;
        return false;
    }

    const TensorMap &map_of(const Node &n) const {
        for (const TensorMap &m : k_.tensor_maps)
            if (m.tensor == n.tensor) return m;
        throw InternalError("emit_cuda: no tensor map for " + n.tensor);
    }

    // The producer's program: the TMA loads in program order, in the same loops; each ring buffer is
    // refilled once the compute warps have released it (its empty barrier's previous phase).
    void produce(const Stmt &s, const LoopCtx *lc = nullptr) {
        if (!has_tma_load(s)) return;
        const Node &n = *s;
        if (n.kind == NodeKind::CarriedLoop) {
            const std::string j = ident(n.var);
            line("for (int " + j + " = " + scalar(n.begin) + "; " + j + " < " + scalar(n.end) + "; ++" + j + ") {");
            indent_++;
            LoopCtx inner{&n, 0};
            for (const Stmt &b : n.body) produce(b, &inner);
            indent_--;
            line("}");
            return;
        }
        if (n.kind != NodeKind::TileLoad) throw InternalError("emit_cuda: a TMA load under a condition");
        (void)lc;
        const TileType &t = k_.values.at(n.dst);
        const std::string stage = ring_position(n);
        if (n.ring.defined())
            line("nd::mbarrier_wait(" + ident(n.dst) + "_empty + " + stage + ", " + ident(n.dst) + "_phase ^ 1u);");
        line("nd::mbarrier_arrive_expect_tx(" + ident(n.dst) + "_full + " + stage + ", " +
             std::to_string(tile_bytes(t)) + ");");
        if (n.multicast > 1) {  // this block's share of the rows, into every block of the cluster
            line("nd::tma_load_tile_multicast<" + std::to_string(n.multicast) + ">(" + ident(n.dst) + "_buf(" + stage +
                 "), " + ident(map_of(n).name) + ", " + scalar(n.row) + ", " + scalar(n.head) + ", " + scalar(n.batch) +
                 ", " + ident(n.dst) + "_full + " + stage + ");");
            return;
        }
        line("nd::tma_load_tile(" + ident(n.dst) + "_buf(" + stage + "), " + ident(map_of(n).name) + ", " +
             scalar(n.row) + ", " + scalar(n.head) + ", " + scalar(n.batch) + ", " + ident(n.dst) + "_full + " + stage +
             ");");
    }

    // A TMA load's buffer: for a ring tile, T_stage and T_phase (the parity of its barriers' current
    // phase) from the load's ring position, defined here for the statements that follow; else 0.
    std::string ring_position(const Node &n) {
        if (!n.ring.defined()) return "0";
        const std::string t = ident(n.dst), stages = std::to_string(k_.pipeline_stages), r = scalar(n.ring);
        line("const int " + t + "_stage = (" + r + ") % " + stages + ";");
        line("const unsigned " + t + "_phase = unsigned((" + r + ") / " + stages + ") & 1u;");
        return t + "_stage";
    }

    // stage_j and phase_j: which ring buffer iteration j uses, and the parity of its barriers' phase.
    void loop_position(const Node &n) {
        const std::string j = ident(n.var), stages = std::to_string(k_.pipeline_stages);
        line("const int stage_" + j + " = (" + j + " - " + j + "_begin) % " + stages + ";");
        line("const unsigned phase_" + j + " = unsigned((" + j + " - " + j + "_begin) / " + stages + ") & 1u;");
        line("(void)stage_" + j + "; (void)phase_" + j + ";");
    }

    /** Whether a warp-rows load's columns are whole fours: no row ends inside a lane's four columns. */
    static bool whole_fours(const Node &n) {
        const auto *cols = n.valid_cols.as<HI::IntImm>();
        return cols && cols->value % 4 == 0;
    }

    /** A cluster load: rows of a cluster block's shared f32 tile, by generic loads of its mapped address. */
    void cluster_load(const Node &n) {
        const TileType &t = k_.values.at(n.dst), &src = k_.values.at(n.src);
        const std::string from = "nd::cluster_map(" + ident(n.src) + "_smem, " + scalar(n.rank) + ")";
        const std::string pitch = std::to_string(src.cols);
        // The warp-rows loads of the workspace's combine, by generic loads from the mapped tile's first row.
        const std::string first = from + " + (long long)(" + scalar(n.row) + ") * " + pitch;
        if (t.layout == Layout::WarpRows) {
            line(std::string("nd::load_warp_rows<") + (whole_fours(n) ? "true" : "false") + ", nd::Load::Generic>(" +
                 ident(n.dst) + ", " + first + ", " + pitch + ", 0, " + scalar(n.valid_rows) + ", " +
                 scalar(n.valid_cols) + ");");
            return;
        }
        if (t.layout == Layout::WarpRowVector) {
            line("nd::load_warp_rows_vec<nd::Load::Generic>(" + ident(n.dst) + ", " + first + ", " + pitch + ", 0, " +
                 scalar(n.valid_rows) + ", " + ExprPrinter(k_, Context::Scalar).print(n.value) + ");");
            return;
        }
        line("{");
        indent_++;
        line("const float *src_ = " + first + ";");
        if (n.kind == NodeKind::RowLoad) {
            row_loop(ident(n.dst) + ".v[mt][hh] = row < " + scalar(n.valid_rows) +
                     " ? src_[row] : " + ExprPrinter(k_, Context::Scalar).print(n.value) + ";");
        } else {
            line("constexpr int NT_ = " + std::to_string(t.cols / 8) + ";");
            element_loop(ident(n.dst) + ".v[mt][nt][e] = (row < " + scalar(n.valid_rows) + " && col < " +
                         scalar(n.valid_cols) + ") ? src_[row * " + pitch + " + col] : 0.0f;");
        }
        indent_--;
        line("}");
    }

    std::string ptr(const std::string &tensor, const Expr &base) const {
        return "(" + ident(tensor) + " + (long long)(" + ExprPrinter(k_, Context::Scalar).print(base) + "))";
    }

    std::string scalar(const Expr &e) const { return ExprPrinter(k_, Context::Scalar).print(e); }

    const TensorParam &tensor(const std::string &n) const {
        for (const TensorParam &t : k_.tensors)
            if (t.name == n) return t;
        throw InternalError("emit_cuda: no tensor " + n);
    }

    // A shared load; `at` rebinds the loop variable (the prologue's first iteration, the next iteration).
    void shared_load(const Node &n, const std::string &buf, bool async, const std::string &var = "",
                     const Expr &at = Expr()) {
        auto f = [&](const Expr &e) { return at.defined() ? HI::substitute(var, at, e) : e; };
        line(std::string("nd::") + (async ? "load_tile_async" : "load_tile_sync") + "<THREADS>(" + buf + ", " +
             ptr(n.tensor, f(n.base)) + ", " + scalar(f(n.row_stride)) + ", max(0, " + scalar(f(n.valid_rows)) + "), " +
             scalar(f(n.valid_cols)) + ");");
    }

    // Fully unrolled loops over (variable, bound) pairs, outermost first, around the lines that bind
    // an element's coordinates and the body.
    void loop_nest(const std::vector<std::pair<std::string, std::string>> &loops, const std::string &coords,
                   const std::string &body) {
        for (const auto &[var, bound] : loops) {
            line("#pragma unroll");
            line("for (int " + var + " = 0; " + var + " < " + bound + "; ++" + var + ") {");
            indent_++;
        }
        line(coords);
        line(body);
        for (size_t i = 0; i < loops.size(); i++) {
            indent_--;
            line("}");
        }
    }

    void element_loop(const std::string &body) {
        loop_nest({{"mt", "1"}, {"nt", "NT_"}, {"e", "4"}},
                  "const int row = 16 * warp + nd::frag_row(mt, e), col = nd::frag_col(nt, e); (void)row; (void)col;",
                  body);
    }

    void row_loop(const std::string &body) {
        loop_nest({{"mt", "1"}, {"hh", "2"}}, "const int row = 16 * warp + nd::frag_row(mt, 2 * hh); (void)row;", body);
    }

    // The warp-rows forms (one-warp kernels: rows are the tile's own): every (row, column) a lane
    // holds, after a per-row copy (by shuffles) of each row vector the map reads; a row vector's one
    // row per lane.
    void warp_rows_loop(const Node &map, const TileType &t, const std::string &body) {
        const std::string rows = std::to_string(t.rows);
        for (const auto &[name, type] : k_.values) {
            if (type.layout != Layout::WarpRowVector || !HI::expr_uses_var(map.value, name)) continue;
            line("float " + row_copy(name) + "[" + rows + "];");
            line("#pragma unroll");
            line("for (int r = 0; r < " + rows + "; ++r) " + row_copy(name) + "[r] = nd::row_of(" + ident(name) +
                 ", r);");
        }
        loop_nest({{"r", rows}, {"q", std::to_string((t.cols + 127) / 128)}, {"e", "4"}},
                  "const int row = r, col = nd::warp_rows_col(q, e); (void)row; (void)col;", body);
    }

    void warp_row_vector_op(const TileType &t, const std::string &body) {
        line("{");
        indent_++;
        line("const int row = nd::warp_rows_vec_row<" + std::to_string(t.rows) + ">();");
        line("(void)row;");
        line(body);
        indent_--;
        line("}");
    }

    std::string current_buf(const std::string &tile, const LoopCtx *lc) const {
        if (k_.producer_warps && layout_.empty_barrier.count(tile))
            return ident(tile) + "_buf(" + ident(tile) + "_stage)";
        const bool piped = layout_.buffers.count(tile) && layout_.buffers.at(tile) > 1;
        return ident(tile) + "_buf(" + (piped && lc ? "stage_" + ident(lc->loop->var) : "0") + ")";
    }

    void stmt(const Stmt &s, const LoopCtx *lc) {
        const Node &n = *s;
        if (!n.note.empty()) line("// " + n.note);
        switch (n.kind) {
        case NodeKind::TileLoad: {
            const TileType &t = k_.values.at(n.dst);
            if (n.rank.defined()) {
                cluster_load(n);
                break;
            }
            if (t.layout == Layout::WarpRows) {  // whole rows, ld.global.cg (a folded combine's partials)
                line(std::string("nd::load_warp_rows<") + (whole_fours(n) ? "true" : "false") + ">(" + ident(n.dst) +
                     ", " + ptr(n.tensor, n.base) + ", " + scalar(n.row_stride) + ", 0, " + scalar(n.valid_rows) +
                     ", " + scalar(n.valid_cols) + ");");
                break;
            }
            if (t.scope == Scope::Register) {  // f32 partials of split-K into accumulator registers
                const int nt = t.cols / 8;
                line("{");
                indent_++;
                line("constexpr int NT_ = " + std::to_string(nt) + ";");
                line("const float *src_ = " + ptr(n.tensor, n.base) + ";");
                // ld.global.cg: the partials may come from other blocks of this launch (a folded combine).
                element_loop(ident(n.dst) + ".v[mt][nt][e] = (row < " + scalar(n.valid_rows) + " && col < " +
                             scalar(n.valid_cols) + ") ? __ldcg(src_ + (long long)row * " + scalar(n.row_stride) +
                             " + col) : 0.0f;");
                indent_--;
                line("}");
                break;
            }
            if (n.copy == CopyKind::Tma && !k_.producer_warps) {
                // This iteration's copy lands; after the barrier every thread is past iteration j - 1's
                // reads of the buffer that iteration j + S - 1 refills, which thread 0 then issues.
                if (!lc) throw InternalError("emit_cuda: a TMA load of the compute warps outside its loop");
                const std::string j = ident(lc->loop->var), ahead = std::to_string(k_.pipeline_stages - 1);
                line("nd::mbarrier_wait(" + ident(n.dst) + "_full + stage_" + j + ", phase_" + j + ");");
                line("nd::barrier();");
                line("if (" + j + " + " + ahead + " < " + j + "_end) {");
                indent_++;
                tma_issue(n, "(stage_" + j + " + " + ahead + ") % " + std::to_string(k_.pipeline_stages), lc->loop->var,
                          int_var(lc->loop->var) + (k_.pipeline_stages - 1), true);
                indent_--;
                line("}");
                break;
            }
            if (n.copy == CopyKind::Tma) {  // the producer issued the copy: wait for it to land
                const std::string stage = ring_position(n);
                line("nd::mbarrier_wait(" + ident(n.dst) + "_full + " + stage + ", " +
                     (n.ring.defined() ? ident(n.dst) + "_phase" : std::string("0u")) + ");");
                break;
            }
            if (n.copy == CopyKind::CpAsync && lc) {
                // Iteration it's copy of load p is commit group (it - begin) * P + p (P pipelined loads,
                // one group each per iteration, S - 1 iterations issued ahead): when this load's group
                // for j has landed, (S - 1) P - 1 newer groups may be in flight. After the barrier every
                // thread is past iteration j - 1's reads of the buffer that iteration j + S - 1 refills.
                const std::string j = ident(lc->loop->var), stages = std::to_string(k_.pipeline_stages);
                line("nd::cp_async_wait<" + std::to_string((k_.pipeline_stages - 1) * lc->pipelined - 1) + ">();");
                line("nd::barrier();");
                line("if (" + j + " + " + std::to_string(k_.pipeline_stages - 1) + " < " + j + "_end) {");
                indent_++;
                shared_load(n,
                            ident(n.dst) + "_buf((stage_" + j + " + " + std::to_string(k_.pipeline_stages - 1) +
                                ") % " + stages + ")",
                            true, lc->loop->var, int_var(lc->loop->var) + (k_.pipeline_stages - 1));
                indent_--;
                line("}");
                line("nd::cp_async_commit();");
            } else {
                shared_load(n, current_buf(n.dst, lc), false);
            }
            break;
        }
        case NodeKind::TileStore: {
            const TensorParam &t = tensor(n.tensor);
            if (k_.values.at(n.src).layout == Layout::WarpRows) {
                line("nd::store_warp_rows(" + ptr(n.tensor, n.base) + ", " + scalar(n.row_stride) + ", " +
                     ident(n.src) + ", 0, " + scalar(n.valid_rows) + ", " + scalar(n.valid_cols) + ");");
                break;
            }
            line(std::string(t.elem == DType::F32 ? "nd::store_acc_f32(" : "nd::store_acc(") + ptr(n.tensor, n.base) +
                 ", " + scalar(n.row_stride) + ", " + ident(n.src) + ", 16 * warp, " + scalar(n.valid_rows) + ", " +
                 scalar(n.valid_cols) + ");");
            break;
        }
        case NodeKind::RowStore:
            line("nd::store_rows(" + ptr(n.tensor, n.base) + ", " + ident(n.src) + ", " +
                 (k_.values.at(n.src).layout == Layout::WarpRowVector ? "0" : "16 * warp") + ", " +
                 scalar(n.valid_rows) + ");");
            break;
        case NodeKind::RowLoad:
            if (n.rank.defined()) {
                cluster_load(n);
                break;
            }
            if (k_.values.at(n.dst).layout == Layout::WarpRowVector) {
                line("nd::load_warp_rows_vec(" + ident(n.dst) + ", " + ptr(n.tensor, n.base) + ", " +
                     scalar(n.row_stride) + ", 0, " + scalar(n.valid_rows) + ", " +
                     ExprPrinter(k_, Context::Scalar).print(n.value) + ");");
                break;
            }
            line("{");
            indent_++;
            line("const float *src_ = " + ptr(n.tensor, n.base) + ";");
            row_loop(ident(n.dst) + ".v[mt][hh] = row < " + scalar(n.valid_rows) +
                     " ? __ldcg(src_ + (long long)row * " + scalar(n.row_stride) +
                     ") : " + ExprPrinter(k_, Context::Scalar).print(n.value) + ";");
            indent_--;
            line("}");
            break;
        case NodeKind::Fill: line("nd::fill(" + ident(n.dst) + ", " + scalar(n.value) + ");"); break;
        case NodeKind::TileMap: {
            const TileType &t = k_.values.at(n.dst);
            line("{");
            indent_++;
            if (t.layout == Layout::WarpRows) {
                warp_rows_loop(n, t,
                               ident(n.dst) + ".v[r][q][e] = " + ExprPrinter(k_, Context::Tile).print(n.value) + ";");
                indent_--;
                line("}");
                break;
            }
            line("constexpr int NT_ = " + std::to_string(t.cols / 8) + ";");
            element_loop(ident(n.dst) + ".v[mt][nt][e] = " + ExprPrinter(k_, Context::Tile).print(n.value) + ";");
            indent_--;
            line("}");
            break;
        }
        case NodeKind::RowMap:
            if (k_.values.at(n.dst).layout == Layout::WarpRowVector) {
                warp_row_vector_op(k_.values.at(n.dst),
                                   ident(n.dst) + ".v = " + ExprPrinter(k_, Context::Row).print(n.value) + ";");
                break;
            }
            row_loop(ident(n.dst) + ".v[mt][hh] = " + ExprPrinter(k_, Context::Row).print(n.value) + ";");
            break;
        case NodeKind::TileReduce:
            line(std::string(n.op == ReduceOp::Max ? "nd::row_max(" : "nd::row_sum(") + ident(n.dst) + ", " +
                 ident(n.src) + ");");
            break;
        case NodeKind::TileDot:
            if (n.mma == MmaKind::Wgmma) {
                // One warpgroup's 64 rows: issue, commit, wait, then let the compiler see the new values.
                const std::string acc = !n.accumulate         ? "false"
                                        : n.restart.defined() ? "!(" + scalar(n.restart) + ")"
                                                              : "true";
                if (n.transpose_b)
                    line("nd::wgmma_abt(" + ident(n.dst) + ", " + current_buf(n.a, lc) + ", 64 * (warp / 4), " +
                         current_buf(n.b, lc) + ", " + acc + ");");
                else
                    line("nd::wgmma_ab(" + ident(n.dst) + ", " + ident(n.a) + ", " + current_buf(n.b, lc) + ", " + acc +
                         ");");
                if (!n.async) {
                    line("nd::wgmma_wait<0>();");
                    line("nd::fence_registers(" + ident(n.dst) + ");");
                }
                break;
            }
            if (!n.accumulate) line("nd::fill(" + ident(n.dst) + ", 0.0f);");
            if (n.accumulate && n.restart.defined())
                line("if (" + scalar(n.restart) + ") nd::fill(" + ident(n.dst) + ", 0.0f);");
            if (n.transpose_b)
                line("nd::mma_abt(" + ident(n.dst) + ", " + ident(n.a) + ", " + current_buf(n.b, lc) + ", 0);");
            else
                line("nd::mma_ab(" + ident(n.dst) + ", " + ident(n.a) + ", " + current_buf(n.b, lc) + ", 0, 0);");
            break;
        case NodeKind::Convert: {
            const TileType &src = k_.values.at(n.src), &dst = k_.values.at(n.dst);
            if (dst.scope == Scope::Shared) {  // the block's state into its shared f32 tile (cluster merge)
                const std::string rows = n.valid_rows.defined() ? scalar(n.valid_rows) : std::to_string(dst.rows);
                if (src.layout == Layout::RowVector)
                    line("nd::store_rows(" + ident(n.dst) + "_smem, " + ident(n.src) + ", 16 * warp, " + rows + ");");
                else
                    line("nd::store_acc_f32(" + ident(n.dst) + "_smem, " + std::to_string(dst.cols) + ", " +
                         ident(n.src) + ", 16 * warp, " + rows + ", " + std::to_string(dst.cols) + ");");
                break;
            }
            if (src.scope == Scope::Shared) {
                line("nd::load_a(" + ident(n.dst) + ", " + current_buf(n.src, lc) + ", 16 * warp);");
            } else {
                line("nd::acc_to_a(" + ident(n.dst) + ", " + ident(n.src) + ");");
            }
            break;
        }
        case NodeKind::CarriedLoop: loop(n); break;
        case NodeKind::IfThen:
            line("if (" + scalar(n.cond) + ") {");
            indent_++;
            for (const Stmt &b : n.body) stmt(b, lc);
            indent_--;
            line("}");
            break;
        case NodeKind::LastArrival:
            line("if (nd::last_arrival(reinterpret_cast<unsigned *>" + ptr(n.tensor, n.base) + ", unsigned(" +
                 scalar(n.value) + "))) {");
            indent_++;
            for (const Stmt &b : n.body) stmt(b, lc);
            indent_--;
            line("}");
            break;
        case NodeKind::ClusterMerge:
            // A launch without the kernel's clusters would merge nothing: fail loudly instead.
            line("if (nd::cluster_size() != unsigned(" + scalar(k_.cluster_x) + ")) __trap();");
            line("nd::cluster_sync();");
            line("if (nd::cluster_rank() == 0) {");
            indent_++;
            for (const Stmt &b : n.body) stmt(b, lc);
            indent_--;
            line("}");
            line("nd::cluster_sync();  // no block leaves while rank 0 reads its shared memory");
            break;
        case NodeKind::ClusterReduce:
            throw InternalError("emit_cuda: cluster reductions are of row-strip kernels, not tile kernels");
        case NodeKind::Barrier:
            // With a producer warpgroup, a barrier is among the compute warps only (the producer runs ahead).
            line(k_.producer_warps ? "nd::named_barrier(1, THREADS);" : "nd::barrier();");
            break;
        case NodeKind::Release:
            if (!layout_.empty_barrier.count(n.src)) throw InternalError("emit_cuda: release of a tile outside a ring");
            line("__syncwarp();");
            // The buffer of the release's ring position (a mainloop releases the previous iteration's); a
            // multicast tile's in every block of the cluster, whose producers all write it.
            line("if (nd::lane_id() == 0) nd::" +
                 (multicast_of(n.src) ? "mbarrier_arrive_cluster<" + std::to_string(multicast_of(n.src)) + ">"
                                      : std::string("mbarrier_arrive")) +
                 "(" + ident(n.src) + "_empty + " +
                 (n.ring.defined() ? "(" + scalar(n.ring) + ") % " + std::to_string(k_.pipeline_stages)
                                   : ident(n.src) + "_stage") +
                 ");");
            break;
        case NodeKind::WarpgroupTurn: turn(n.turn); break;
        case NodeKind::DotWait:
            // The retired dots' registers are fenced, so the compiler neither reads results early nor
            // reuses operand registers that the tensor cores may still read.
            line("nd::wgmma_wait<" + std::to_string(n.pending) + ">();");
            for (const std::string &f : n.fenced) line("nd::fence_registers(" + ident(f) + ");");
            break;
        }
    }

    // The loop's loads that pipeline_loads pipelined: cp.async, or TMA issued by the compute warps.
    std::vector<const Node *> pipelined_loads(const Node &loop) const {
        std::vector<const Node *> piped;
        for (const Stmt &b : loop.body)
            if (b->kind == NodeKind::TileLoad &&
                (b->copy == CopyKind::CpAsync || (b->copy == CopyKind::Tma && !k_.producer_warps)))
                piped.push_back(b.get());
        return piped;
    }

    static int cp_async_loads(const std::vector<const Node *> &piped) {
        int n = 0;
        for (const Node *p : piped) n += p->copy == CopyKind::CpAsync;
        return n;
    }

    // Where the first pipelined loop's bounds and prologue go: as early as the statements before it
    // allow, so that its first copies are in flight while the block loads Q and sets up its state
    // (one global round trip less before the first tile). Statements the prologue may pass: register
    // work, barriers, and synchronous loads into shared memory the prologue does not write (Q shares
    // the last stage of K, which the prologue leaves alone). Sets hoisted_ (null: nothing to hoist).
    size_t prologue_position() {
        size_t loop_at = 0;
        while (loop_at < k_.body.size() &&
               !(k_.body[loop_at]->kind == NodeKind::CarriedLoop && !pipelined_loads(*k_.body[loop_at]).empty()))
            ++loop_at;
        if (loop_at == k_.body.size()) return loop_at;
        const std::vector<const Node *> piped = pipelined_loads(*k_.body[loop_at]);
        auto written_by_prologue = [&](int lo, int hi) {
            for (const Node *p : piped) {
                const int bytes = shared_tile_bytes(k_.values.at(p->dst)), at = layout_.offset.at(p->dst);
                if (lo < at + (k_.pipeline_stages - 1) * bytes && at < hi) return true;
            }
            return false;
        };
        auto shared_range_free = [&](const std::string &tile) {
            const TileType &t = k_.values.at(tile);
            if (t.scope != Scope::Shared) return true;
            const int lo = layout_.offset.at(tile);
            return !written_by_prologue(lo, lo + shared_tile_bytes(t));
        };
        size_t at = loop_at;
        while (at > 0) {
            const Node &s = *k_.body[at - 1];
            const bool registers_only = s.kind == NodeKind::Fill || s.kind == NodeKind::TileMap ||
                                        s.kind == NodeKind::RowMap || s.kind == NodeKind::RowLoad ||
                                        s.kind == NodeKind::Barrier ||
                                        (s.kind == NodeKind::Convert && k_.values.at(s.dst).scope == Scope::Register &&
                                         shared_range_free(s.src));
            const bool separate_load = s.kind == NodeKind::TileLoad && s.copy == CopyKind::Sync &&
                                       k_.values.at(s.dst).scope == Scope::Shared && shared_range_free(s.dst);
            if (!registers_only && !separate_load) break;
            --at;
        }
        if (at < loop_at) hoisted_ = k_.body[loop_at].get();
        return at;
    }

    // The loop's bounds and its prologue: the first S - 1 iterations' copies in body order, one
    // commit group per cp.async load.
    void loop_prologue(const Node &n) {
        const std::string j = ident(n.var);
        line("const int " + j + "_begin = " + scalar(n.begin) + ", " + j + "_end = " + scalar(n.end) + ";");
        const std::vector<const Node *> piped = pipelined_loads(n);
        if (piped.empty()) return;
        if (k_.pipeline_stages < 2) throw InternalError("emit_cuda: pipelined copies need 2 or more stages");
        if (&n == hoisted_) line("// the KV loop's first copies, issued before the block's setup");
        for (int it = 0; it + 1 < k_.pipeline_stages; it++)
            for (const Node *p : piped) {
                line("if (" + j + "_begin + " + std::to_string(it) + " < " + j + "_end) {");
                indent_++;
                const Expr at = int_var(n.var + "_begin") + it;
                if (p->copy == CopyKind::Tma)
                    tma_issue(*p, std::to_string(it), n.var, at, false);
                else
                    shared_load(*p, ident(p->dst) + "_buf(" + std::to_string(it) + ")", true, n.var, at);
                indent_--;
                line("}");
                if (p->copy == CopyKind::CpAsync) line("nd::cp_async_commit();");
            }
    }

    void loop(const Node &n) {
        const std::string j = ident(n.var);
        line("{");
        indent_++;
        const std::vector<const Node *> piped = pipelined_loads(n);
        if (&n != hoisted_) loop_prologue(n);
        LoopCtx lc{&n, cp_async_loads(piped)};
        if (n.unroll > 1) line("#pragma unroll " + std::to_string(n.unroll));
        line("for (int " + j + " = " + j + "_begin; " + j + " < " + j + "_end; ++" + j + ") {");
        indent_++;
        if (!k_.producer_warps) loop_position(n);
        for (const Stmt &b : n.body) stmt(b, &lc);
        indent_--;
        line("}");
        if (cp_async_loads(piped)) line("nd::cp_async_wait<0>();");
        indent_--;
        line("}");
    }

    const Kernel &k_;
    SharedLayout layout_;
    const Node *hoisted_ = nullptr;  // the loop whose prologue was emitted ahead of it (prologue_position)
    std::ostringstream out_;
    int indent_ = 1;
};

}  // namespace

std::string emit_cuda(const Program &p) {
    std::ostringstream os;
    os << "// Generated by Neptune from a tile program; see tir::to_string for the program.\n"
       << "#include \"neptune/device/neptune_device.cuh\"\n\n"
       << "namespace nd = neptune::device;\n\n";
    for (const Kernel &k : p.kernels) os << (k.strip_threads ? emit_strip_kernel(k) : Emitter(k).emit()) << "\n";
    return os.str();
}

}  // namespace neptune::internal
