// The tile IR by hand: the printer's listing, verify()'s rules, and the interpreter against fp64
// references on a matmul, masked loads and stores, an online-softmax row kernel and a grid with ifs.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "InOrder.h"
#include "neptune/Error.h"
#include "neptune/Half.h"
#include "tir/Interpreter.h"

using namespace neptune;
using Halide::Expr;
using neptune::testing::check_in_order;
namespace HI = Halide::Internal;

namespace {

Expr fv(const std::string &n) { return HI::Variable::make(Halide::Float(32), n); }
Expr iv(const std::string &n) { return HI::Variable::make(Halide::Int(32), n); }
const Expr ninf = Expr(-INFINITY);

tir::TileType shared(DType t, int rows, int cols) {
    return {t, rows, cols, tir::Scope::Shared, tir::Layout::SharedRowMajor};
}
tir::TileType accumulator(int rows, int cols) {
    return {DType::F32, rows, cols, tir::Scope::Register, tir::Layout::MmaAccumulator};
}
tir::TileType operand(DType t, int rows, int cols) {
    return {t, rows, cols, tir::Scope::Register, tir::Layout::MmaOperandA};
}
tir::TileType row_vector(int rows) { return {DType::F32, rows, 1, tir::Scope::Register, tir::Layout::RowVector}; }

HostTensor random_tensor(const std::string &name, DType t, std::vector<int64_t> shape, uint32_t seed,
                         double scale = 1.0) {
    HostTensor h(TensorDesc{name, t, std::move(shape)});
    std::mt19937 rng(seed);
    std::normal_distribution<double> nd(0, scale);
    for (double &v : h.values) v = nd(rng);
    h.round_to_dtype();
    return h;
}

HostTensor filled(const std::string &name, DType t, std::vector<int64_t> shape, double value) {
    HostTensor h(TensorDesc{name, t, std::move(shape)});
    for (double &v : h.values) v = value;
    return h;
}

// C = 0.5 * A B^T for A [rows x depth] and B [16 x depth] in f16, one 16-row tile of C per block:
// partial row and depth tiles are zero-filled by the loads.
tir::Kernel matmul_kernel() {
    tir::Kernel k;
    k.name = "mm";
    k.tensors = {{"a", DType::F16, false}, {"b", DType::F16, false}, {"c", DType::F32, true}};
    k.int_params = {"rows", "depth"};
    k.grid_x = (iv("rows") + 15) / 16;
    k.warps = 1;
    k.scalars = {{"m0", iv("block_x") * 16}};
    k.values = {{"a_s", shared(DType::F16, 16, 16)},
                {"b_s", shared(DType::F16, 16, 16)},
                {"a_op", operand(DType::F16, 16, 16)},
                {"acc", accumulator(16, 16)}};
    const Expr depth = iv("depth"), kt = iv("kt"), m0 = iv("m0");
    k.body = {
        tir::make_fill("acc", 0.0f),
        tir::make_loop(
            "kt", 0, (depth + 15) / 16, {"acc"},
            {tir::make_load("a_s", "a", m0 * depth + kt * 16, depth, iv("rows") - m0, depth - kt * 16),
             tir::make_load("b_s", "b", kt * 16, depth, 16, depth - kt * 16), tir::make_barrier(),
             tir::make_convert("a_op", "a_s"), tir::make_dot("acc", "a_op", "b_s", true), tir::make_barrier()}),
        tir::make_map("acc", fv("acc") * 0.5f, "the softmax scale"),
        tir::make_store("acc", "c", m0 * 16, 16, iv("rows") - m0, 16),
    };
    return k;
}

// Log-sum-exp of each row of x [rows x n] by the online-softmax recurrence over 32-column tiles,
// the tail tile masked to -inf by a select on the column.
tir::Kernel logsumexp_kernel() {
    tir::Kernel k;
    k.name = "lse";
    k.tensors = {{"x", DType::F16, false}, {"lse", DType::F32, true}};
    k.int_params = {"rows", "n"};
    k.grid_x = (iv("rows") + 15) / 16;
    k.warps = 1;
    k.scalars = {{"r0", iv("block_x") * 16}};
    k.values = {{"x_s", shared(DType::F16, 16, 32)},
                {"x_a", operand(DType::F16, 16, 32)},
                {"s", accumulator(16, 32)},
                {"m", row_vector(16)},
                {"l", row_vector(16)},
                {"m_new", row_vector(16)}};
    const Expr n = iv("n"), j = iv("j"), r0 = iv("r0");
    const Expr s = fv("s"), m = fv("m"), l = fv("l"), m_new = fv("m_new");
    k.body = {
        tir::make_fill("m", -INFINITY),
        tir::make_fill("l", 0.0f),
        tir::make_loop(
            "j", 0, (n + 31) / 32, {"m", "l"},
            {tir::make_load("x_s", "x", r0 * n + j * 32, n, iv("rows") - r0, n - j * 32), tir::make_barrier(),
             tir::make_convert("x_a", "x_s"),
             tir::make_map("s", Halide::select(j * 32 + iv("col") < n, fv("x_a"), ninf), "mask the tail tile"),
             tir::make_row_map("m_new", m), tir::make_reduce("m_new", tir::ReduceOp::Max, "s"),
             tir::make_map("s", Halide::exp(s - m_new)), tir::make_row_map("l", l * Halide::exp(m - m_new)),
             tir::make_reduce("l", tir::ReduceOp::Sum, "s"), tir::make_row_map("m", m_new), tir::make_barrier()}),
        tir::make_row_map("l", m + Halide::log(l)),
        tir::make_row_store("l", "lse", r0, iv("rows") - r0),
    };
    return k;
}

// A 2 x 2 grid of blocks, each writing its own 16-entry run of `out`: b * 100 + row, plus 1000 in
// odd blocks; block b writes only 16 - b rows.
tir::Kernel grid_kernel() {
    tir::Kernel k;
    k.name = "grid";
    k.tensors = {{"out", DType::F32, true}};
    k.grid_x = 2;
    k.grid_y = 2;
    k.warps = 1;
    k.scalars = {{"b", iv("block_y") * iv("grid_x") + iv("block_x")}};
    k.values = {{"v", row_vector(16)}};
    const Expr b = iv("b");
    k.body = {
        tir::make_row_map("v", Halide::cast<float>(b * 100 + iv("row"))),
        tir::make_if(b % 2 == 1, {tir::make_row_map("v", fv("v") + 1000.0f)}, "odd blocks"),
        tir::make_row_store("v", "out", b * 16, 16 - b),
    };
    return k;
}

tir::Kernel with_statement(tir::Kernel k, const tir::Stmt &s) {
    k.body.push_back(s);
    return k;
}

}  // namespace

TEST_CASE("tile IR printer: the listing shows the header, values and statements in order") {
    tir::Kernel k = matmul_kernel();
    k.body[1] = tir::with(k.body[1], [](tir::Node &loop) {
        loop.body[0] = tir::with(loop.body[0], [](tir::Node &n) {
            n.copy = tir::CopyKind::CpAsync;
            n.stage = 1;
        });
    });
    check_in_order(tir::to_string(k), {
                                          "kernel mm",
                                          "tensors: a f16, b f16, c f32 (out)",
                                          "int params: rows, depth",
                                          "grid: ((rows + 15) / 16, 1, 1), 1 warp (16 rows)",
                                          "m0 = block_x * 16",
                                          "a_op: f16[16 x 16] register mma-operand-a",
                                          "acc: f32[16 x 16] register mma-accumulator",
                                          "acc = fill(0)",
                                          "for kt in [0, (depth + 15) / 16) carrying acc {",
                                          "a_s = load a[base: m0 * depth + kt * 16, stride depth, valid rows - m0 x "
                                          "depth - kt * 16]  // cp.async stage 1",
                                          "b_s = load b[",
                                          "barrier",
                                          "a_op = convert(a_s)",
                                          "acc += dot(a_op, b_s^T)",
                                          "barrier",
                                          "}",
                                          "acc = map(acc * 0.5)  // the softmax scale",
                                          "store c[base: m0 * 16, stride 16, valid rows - m0 x 16] = acc",
                                      });
    check_in_order(tir::to_string(logsumexp_kernel()), {
                                                           "m = fill(-inf)",
                                                           "for j in [0, (n + 31) / 32) carrying m, l {",
                                                           "s = map(select(j * 32 + col < n, x_a, -inf))  // mask",
                                                           "m_new = row_map(m)",
                                                           "m_new = max(m_new, row_max(s))",
                                                           "s = map(exp(s - m_new))",
                                                           "l = row_map(l * exp(m - m_new))",
                                                           "l = l + row_sum(s)",
                                                           "m = row_map(m_new)",
                                                           "l = row_map(m + log(l))",
                                                           "row_store lse[base: r0, valid rows - r0] = l",
                                                       });
    check_in_order(tir::to_string(grid_kernel()), {"grid: (2, 2, 1)", "b = block_y * grid_x + block_x", "if (",
                                                   ") {  // odd blocks", "v = row_map(v + 1000)", "}", "row_store"});
    tir::Program p;
    p.kernels = {matmul_kernel(), grid_kernel()};
    p.workspaces = {{"ws", iv("rows") * 2}};
    check_in_order(tir::to_string(p),
                   {"program: 2 kernels", "workspace ws: f32[rows * 2]", "kernel mm", "kernel grid"});
}

TEST_CASE("tile IR verify: accepts well-formed kernels") {
    CHECK_NOTHROW(tir::verify(matmul_kernel()));
    CHECK_NOTHROW(tir::verify(logsumexp_kernel()));
    CHECK_NOTHROW(tir::verify(grid_kernel()));
}

TEST_CASE("tile IR verify: rejects broken kernels, naming the kernel, the statement and the rule") {
    const tir::Kernel mm = matmul_kernel();
    CHECK_THROWS_WITH_AS(tir::verify(with_statement(mm, tir::make_map("nope", fv("acc")))),
                         doctest::Contains("kernel 'mm': `nope = map(acc)`: 'nope' is not declared"), InternalError);

    tir::Kernel wide = mm;
    wide.values["b_s"] = shared(DType::F16, 16, 32);
    CHECK_THROWS_WITH_AS(tir::verify(wide), doctest::Contains("`acc += dot(a_op, b_s^T)`: the dot's shapes disagree"),
                         InternalError);

    CHECK_THROWS_WITH_AS(tir::verify(with_statement(mm, tir::make_convert("acc", "a_op"))),
                         doctest::Contains("a convert goes only from"), InternalError);

    tir::Kernel other = mm;
    other.values["big"] = accumulator(16, 32);
    CHECK_THROWS_WITH_AS(tir::verify(with_statement(other, tir::make_map("acc", fv("acc") + fv("big")))),
                         doctest::Contains("not a register tile of its destination's shape"), InternalError);

    CHECK_THROWS_WITH_AS(tir::verify(with_statement(mm, tir::make_loop("m0", 0, 1, {}, {}))),
                         doctest::Contains("reassigns a name"), InternalError);
    CHECK_THROWS_WITH_AS(tir::verify(with_statement(mm, tir::make_if(Expr(), {}))),
                         doctest::Contains("condition expression is undefined"), InternalError);
    CHECK_THROWS_WITH_AS(tir::verify(with_statement(mm, tir::make_map("acc", fv("acc") * fv("scale")))),
                         doctest::Contains("'scale', which is neither a declared value nor a scalar"), InternalError);
}

TEST_CASE("tile IR verify: mma.sync reads padded or swizzled shared tiles, wgmma only swizzled ones") {
    // The matmul over 64-deep tiles, so that its shared tiles can be swizzled (64-column blocks).
    tir::Kernel mm = matmul_kernel();
    for (const char *t : {"a_s", "b_s"}) mm.values[t] = shared(DType::F16, 16, 64);
    mm.values["a_op"] = operand(DType::F16, 16, 64);
    CHECK_NOTHROW(tir::verify(mm));
    tir::Kernel swizzled = mm;
    for (const char *t : {"a_s", "b_s"}) swizzled.values[t].layout = tir::Layout::SharedSwizzled128;
    CHECK_NOTHROW(tir::verify(swizzled));  // ldmatrix addresses either layout (swizzle_shared_tiles)

    auto as_wgmma = [](tir::Kernel k) {
        for (tir::Stmt &s : k.body)
            if (s->kind == tir::NodeKind::CarriedLoop)
                s = tir::with(s, [](tir::Node &loop) {
                    for (tir::Stmt &b : loop.body)
                        if (b->kind == tir::NodeKind::TileDot)
                            b = tir::with(b, [](tir::Node &dot) { dot.mma = tir::MmaKind::Wgmma; });
                });
        return k;
    };
    CHECK_THROWS_WITH_AS(tir::verify(as_wgmma(mm)), doctest::Contains("a wgmma reads b from a swizzled shared tile"),
                         InternalError);
    CHECK_THROWS_WITH_AS(tir::verify(as_wgmma(swizzled)),  // past the layout rule, to the warps
                         doctest::Contains("a wgmma dot needs whole warpgroups"), InternalError);

    tir::Kernel narrow = matmul_kernel();  // 16 columns: not a whole 64-column block
    narrow.values["b_s"].layout = tir::Layout::SharedSwizzled128;
    CHECK_THROWS_WITH_AS(tir::verify(narrow), doctest::Contains("columns a multiple of 64"), InternalError);
}

TEST_CASE("tile IR interpreter: a tiled matmul with transposed B matches the fp64 product of f16 inputs") {
    const int64_t rows = 40, depth = 40, cols = 16;  // partial row and depth tiles
    HostTensor a = random_tensor("a", DType::F16, {rows, depth}, 1),
               b = random_tensor("b", DType::F16, {cols, depth}, 2);
    HostTensor c = filled("c", DType::F32, {rows, cols}, NAN);
    tir::LaunchArgs args{{{"a", &a}, {"b", &b}, {"c", &c}}, {{"rows", rows}, {"depth", depth}}, {}};
    tir::interpret(matmul_kernel(), args);
    double worst = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double want = 0, magnitude = 0;
            for (int64_t kk = 0; kk < depth; kk++) {
                want += a.values[size_t(i * depth + kk)] * b.values[size_t(j * depth + kk)];
                magnitude += std::fabs(a.values[size_t(i * depth + kk)] * b.values[size_t(j * depth + kk)]);
            }
            const double got = c.values[size_t(i * cols + j)];
            worst = std::max(worst, std::fabs(got - 0.5 * want) / (0.5 * magnitude));
            REQUIRE(std::fabs(got - 0.5 * want) <= 1e-5 * 0.5 * magnitude);  // f32 accumulation of 40 terms
        }
    MESSAGE("worst error relative to sum |a b|: ", worst);
}

TEST_CASE("tile IR interpreter: loads zero-fill beyond the valid extent, stores leave the rest untouched") {
    tir::Kernel k;
    k.name = "mask";
    k.tensors = {{"x", DType::F32, false}, {"y", DType::F32, true}, {"z", DType::F16, true}};
    k.values = {{"t", accumulator(8, 8)}};
    k.body = {tir::make_load("t", "x", 0, 7, 3, 5), tir::make_store("t", "y", 9 + 1, 9, 4, 6),
              tir::make_map("t", fv("t") / 3.0f), tir::make_store("t", "z", 0, 5, 3, 5)};
    HostTensor x = random_tensor("x", DType::F32, {5, 7}, 3);
    const double poison = -777;
    HostTensor y = filled("y", DType::F32, {6, 9}, poison), z = filled("z", DType::F16, {3, 5}, poison);
    tir::LaunchArgs args{{{"x", &x}, {"y", &y}, {"z", &z}}, {}, {}};
    tir::interpret(k, args);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 9; c++) {
            const int tr = r - 1, tc = c - 1;  // the tile's element stored here
            double want = poison;
            if (tr >= 0 && tc >= 0 && tr < 4 && tc < 6) want = tr < 3 && tc < 5 ? x.values[size_t(tr * 7 + tc)] : 0.0;
            INFO("y[", r, "][", c, "]");
            CHECK(y.values[size_t(r * 9 + c)] == want);
        }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 5; c++) {
            const float third = float(x.values[size_t(r * 7 + c)]) / 3.0f;
            CHECK(z.values[size_t(r * 5 + c)] == double(f16_to_float(float_to_f16(third))));
        }
}

TEST_CASE("tile IR interpreter: online softmax over masked column tiles gives the fp64 log-sum-exp") {
    const int64_t rows = 37, n = 100;  // a partial row block and a partial column tile
    HostTensor x = random_tensor("x", DType::F16, {rows, n}, 4, 3.0);
    HostTensor lse = filled("lse", DType::F32, {rows}, NAN);
    tir::LaunchArgs args{{{"x", &x}, {"lse", &lse}}, {{"rows", rows}, {"n", n}}, {}};
    tir::interpret(logsumexp_kernel(), args);
    for (int64_t r = 0; r < rows; r++) {
        double m = -INFINITY, l = 0;
        for (int64_t c = 0; c < n; c++) m = std::max(m, x.values[size_t(r * n + c)]);
        for (int64_t c = 0; c < n; c++) l += std::exp(x.values[size_t(r * n + c)] - m);
        const double want = m + std::log(l);
        INFO("row ", r);
        CHECK(std::fabs(lse.values[size_t(r)] - want) <= 1e-5 * (1 + std::fabs(want)));
    }
}

TEST_CASE("tile IR interpreter: every block of the grid runs, ifs take the odd blocks, grid scalars bound") {
    HostTensor out = filled("out", DType::F32, {64}, -1);
    tir::LaunchArgs args{{{"out", &out}}, {}, {}};
    tir::interpret(grid_kernel(), args);
    for (int b = 0; b < 4; b++)
        for (int r = 0; r < 16; r++) {
            INFO("block ", b, " row ", r);
            CHECK(out.values[size_t(b * 16 + r)] == (r < 16 - b ? b * 100 + r + (b % 2 ? 1000 : 0) : -1));
        }
}

TEST_CASE("tile IR interpreter: integer division and modulus are Euclidean, as in Halide") {
    tir::Kernel k;
    k.name = "div";
    k.tensors = {{"out", DType::F32, true}};
    k.int_params = {"p"};
    k.values = {{"v", row_vector(16)}};
    const Expr d = iv("row") - 8;  // -8 .. 7
    k.body = {tir::make_row_map("v", Halide::cast<float>((d / iv("p")) * 100 + d % iv("p"))),
              tir::make_row_store("v", "out", 0, 16)};
    for (int64_t p : {3, -3}) {
        HostTensor out = filled("out", DType::F32, {16}, 0);
        tir::LaunchArgs args{{{"out", &out}}, {{"p", p}}, {}};
        tir::interpret(k, args);
        for (int r = 0; r < 16; r++) {
            const int64_t a = r - 8, m = ((a % p) + std::abs(p)) % std::abs(p), q = (a - m) / p;
            INFO("a ", a, " p ", p);
            CHECK(out.values[size_t(r)] == double(q * 100 + m));
        }
    }
}

TEST_CASE("tile IR interpreter: an out-of-bounds element or a missing argument is an internal error") {
    tir::Kernel k = grid_kernel();
    HostTensor small = filled("out", DType::F32, {40}, 0);
    tir::LaunchArgs args{{{"out", &small}}, {}, {}};
    CHECK_THROWS_WITH_AS(tir::interpret(k, args), doctest::Contains("is outside its 40 elements"), InternalError);
    tir::LaunchArgs none;
    CHECK_THROWS_WITH_AS(tir::interpret(k, none), doctest::Contains("no tensor 'out'"), InternalError);
}

namespace {

// Groups of 3 blocks (grid 3 x 4): each block writes g * 10 + chunk to ws[3 g + chunk]; the last
// block of each group to arrive at cnt[g] sums its group's three entries into out[g].
tir::Program arrival_program() {
    tir::Kernel k;
    k.name = "arrive";
    k.tensors = {{"ws", DType::F32, true}, {"cnt", DType::F32, true}, {"out", DType::F32, true}};
    k.grid_x = 3;
    k.grid_y = 4;
    k.warps = 1;
    k.scalars = {{"chunk", iv("block_x")}, {"g", iv("block_y")}};
    k.values = {{"v", row_vector(16)}, {"w", row_vector(16)}};
    tir::Block combine = {tir::make_fill("v", 0.0f),
                          tir::make_loop("p", 0, 3, {"v"},
                                         {tir::make_row_load("w", "ws", iv("g") * 3 + iv("p"), 1, 1, 0.0f),
                                          tir::make_row_map("v", fv("v") + fv("w"))}),
                          tir::make_row_store("v", "out", iv("g"), 1)};
    k.body = {tir::make_row_map("v", Halide::cast<float>(iv("g") * 10 + iv("chunk"))),
              tir::make_row_store("v", "ws", iv("g") * 3 + iv("chunk"), 1),
              tir::make_last_arrival("cnt", iv("g"), 3, combine, "the group's last block")};
    tir::Program p;
    p.kernels = {k};
    p.workspaces = {{"ws", Expr(12)}, {"cnt", Expr(4), true}};
    return p;
}

}  // namespace

TEST_CASE("tile IR: the last block of each group to arrive runs the body, sees the group's writes, resets the count") {
    const tir::Program p = arrival_program();
    check_in_order(tir::to_string(p), {"workspace cnt: f32[4], zeroed", "row_store ws[",
                                       "if last of 3 arrivals at cnt[g] {  // the group's last block",
                                       "for p in [0, 3)", "row_store out[base: g, valid 1] = v", "}"});
    HostTensor ws = filled("ws", DType::F32, {12}, NAN), cnt = filled("cnt", DType::F32, {4}, 0),
               out = filled("out", DType::F32, {4}, -1);
    tir::LaunchArgs args{{{"ws", &ws}, {"cnt", &cnt}, {"out", &out}}, {}, {}};
    tir::interpret(p, args);
    for (int g = 0; g < 4; g++) {
        INFO("group ", g);
        CHECK(out.values[size_t(g)] == 30.0 * g + 3);  // (10 g + 0) + (10 g + 1) + (10 g + 2)
        CHECK(cnt.values[size_t(g)] == 0);
    }
    tir::interpret(p, args);  // again on the same counters: they were left at zero
    CHECK(out.values[3] == 93);

    cnt.values[2] = 1;  // a count left over (a launch that did not finish)
    CHECK_THROWS_WITH_AS(tir::interpret(p, args), doctest::Contains("workspace 'cnt' must be zero before the launch"),
                         InternalError);
}

TEST_CASE(
    "tile IR verify: arrivals are counted once per block, at the top level or under a grid-uniform condition, in a "
    "zeroed workspace") {
    const tir::Program p = arrival_program();
    CHECK_NOTHROW(tir::verify(p));
    tir::Program unzeroed = p;
    unzeroed.workspaces[1].zeroed = false;
    CHECK_THROWS_WITH_AS(tir::verify(unzeroed),
                         doctest::Contains("arrivals are counted in 'cnt', which is not a zeroed workspace"),
                         InternalError);
    tir::Kernel nested = p.kernels[0];
    nested.body = {tir::make_loop("j", 0, 2, {}, {p.kernels[0].body.back()})};
    CHECK_THROWS_WITH_AS(tir::verify(nested), doctest::Contains("blocks arrive once, at the kernel's top level"),
                         InternalError);
    // Under a condition on the launch parameters alone every block takes the same branch, so every
    // block of a group still arrives; under one on a block index some would not, and the last never comes.
    tir::Program uniform = p;
    uniform.kernels[0].int_params = {"n"};
    uniform.kernels[0].body.back() = tir::make_if(iv("n") > 1, {p.kernels[0].body.back()});
    CHECK_NOTHROW(tir::verify(uniform));
    uniform.workspaces[1].zeroed = false;
    CHECK_THROWS_WITH_AS(tir::verify(uniform),
                         doctest::Contains("arrivals are counted in 'cnt', which is not a zeroed workspace"),
                         InternalError);
    tir::Kernel per_block = p.kernels[0];
    per_block.body.back() = tir::make_if(iv("chunk") > 0, {p.kernels[0].body.back()});
    CHECK_THROWS_WITH_AS(tir::verify(per_block), doctest::Contains("under a condition on the launch parameters alone"),
                         InternalError);
    tir::Kernel read_only = p.kernels[0];
    read_only.tensors[1].output = false;
    CHECK_THROWS_WITH_AS(tir::verify(read_only), doctest::Contains("an arrival counter is a written f32 workspace"),
                         InternalError);
}

namespace {

// Clusters of 3 blocks (grid 3 x 4): each block publishes g * 10 + chunk (one row) in its shared
// tile; rank 0 of each cluster sums its cluster's three tiles into out[g], reading them by rank.
tir::Kernel cluster_kernel() {
    tir::Kernel k;
    k.name = "cluster";
    k.tensors = {{"out", DType::F32, true}};
    k.int_params = {"n"};
    k.grid_x = iv("n");
    k.grid_y = 4;
    k.cluster_x = iv("n");
    k.warps = 1;
    k.scalars = {{"chunk", iv("block_x")}, {"g", iv("block_y")}};
    k.values = {{"v", row_vector(16)},
                {"w", row_vector(16)},
                {"v_shared", {DType::F32, 16, 1, tir::Scope::Shared, tir::Layout::SharedRowMajor}}};
    tir::Block merge = {tir::make_fill("v", 0.0f),
                        tir::make_loop("p", 0, iv("n"), {"v"},
                                       {tir::make_cluster_row_load("w", "v_shared", iv("p"), 0, 1, 0.0f),
                                        tir::make_row_map("v", fv("v") + fv("w"))}),
                        tir::make_row_store("v", "out", iv("g"), 1)};
    k.body = {tir::make_row_map("v", Halide::cast<float>(iv("g") * 10 + iv("chunk"))),
              tir::with(tir::make_convert("v_shared", "v"), [](tir::Node &n) { n.valid_rows = 1; }),
              tir::make_cluster_merge(merge, "rank 0 sums the cluster")};
    return k;
}

}  // namespace

TEST_CASE("tile IR: a cluster merge runs in rank 0 and reads every block's published shared tile") {
    const tir::Kernel k = cluster_kernel();
    check_in_order(tir::to_string(k), {"clusters: n blocks along x", "v_shared = convert(v, valid rows 1)",
                                       "cluster merge, run by rank 0 {  // rank 0 sums the cluster",
                                       "w = row_load v_shared@rank p[row 0, valid 1] else 0", "}"});
    HostTensor out = filled("out", DType::F32, {4}, -1);
    tir::LaunchArgs args{{{"out", &out}}, {{"n", 3}}, {}};
    tir::interpret(k, args);
    for (int g = 0; g < 4; g++) CHECK(out.values[size_t(g)] == 30.0 * g + 3);  // (10 g + 0) + (10 g + 1) + (10 g + 2)
    // A row nobody published is NaN: the merge reads only published rows, or the sum shows it.
    tir::Kernel unpublished = k;
    unpublished.body[2] = tir::make_cluster_merge(
        {tir::make_fill("v", 0.0f), tir::make_cluster_row_load("w", "v_shared", 2, 0, 2, 0.0f),
         tir::make_row_map("v", fv("v") + fv("w")), tir::make_row_store("v", "out", iv("g"), 2)});
    HostTensor out2 = filled("out", DType::F32, {5}, -1);
    tir::LaunchArgs args2{{{"out", &out2}}, {{"n", 3}}, {}};
    tir::interpret(unpublished, args2);
    CHECK(std::isnan(out2.values[4]));  // the last group's second row
    tir::Kernel past = k;  // a rank outside the cluster, with rows to read
    past.body[2] = tir::make_cluster_merge({tir::make_cluster_row_load("w", "v_shared", 3, 0, 1, 0.0f)});
    CHECK_THROWS_WITH_AS(tir::interpret(past, args), doctest::Contains("rank 3 is outside the cluster of 3 blocks"),
                         InternalError);
    tir::Kernel uneven = k;  // clusters must divide the grid
    uneven.cluster_x = 2;
    CHECK_THROWS_WITH_AS(tir::interpret(uneven, args),
                         doctest::Contains("clusters of 2 blocks do not divide the grid's 3"), InternalError);
}

TEST_CASE("tile IR verify: cluster merges at the top level of clustered kernels, cluster loads only inside them") {
    const tir::Kernel k = cluster_kernel();
    CHECK_NOTHROW(tir::verify(k));
    tir::Kernel unclustered = k;
    unclustered.cluster_x = Expr();
    CHECK_THROWS_WITH_AS(tir::verify(unclustered), doctest::Contains("shared f32 tiles publish state to a cluster"),
                         InternalError);
    unclustered.body.erase(unclustered.body.begin() + 1);
    CHECK_THROWS_WITH_AS(tir::verify(unclustered), doctest::Contains("a cluster merge needs a kernel with clusters"),
                         InternalError);
    tir::Kernel nested = k;
    nested.body.back() = tir::make_if(iv("chunk") == 0, {k.body.back()});
    CHECK_THROWS_WITH_AS(tir::verify(nested), doctest::Contains("a cluster merge is a top-level statement"),
                         InternalError);
    tir::Kernel outside = k;  // a cluster load before the blocks published their tiles
    outside.body.insert(outside.body.begin(), tir::make_cluster_row_load("w", "v_shared", 1, 0, 1, 0.0f));
    CHECK_THROWS_WITH_AS(tir::verify(outside), doctest::Contains("only inside a cluster merge"), InternalError);
    tir::Kernel from_register = k;  // cluster loads read shared f32 tiles
    from_register.body.back() = tir::make_cluster_merge({tir::make_cluster_row_load("w", "v", 1, 0, 1, 0.0f)});
    CHECK_THROWS_WITH_AS(tir::verify(from_register), doctest::Contains("a cluster load reads a shared f32 tile"),
                         InternalError);
}

namespace {

tir::TileType warp_rows(int rows, int cols) {
    return {DType::F32, rows, cols, tir::Scope::Register, tir::Layout::WarpRows};
}
tir::TileType warp_row_vector(int rows) {
    return {DType::F32, rows, 1, tir::Scope::Register, tir::Layout::WarpRowVector};
}

// Two 16 x 128 f32 tiles of x merged in warp rows, as split-K's combine merges chunks:
// out[r][c] = x[r][c] * w[r] + x[16 + r][c], only the first `valid` rows loaded and stored.
tir::Kernel warp_rows_merge_kernel() {
    tir::Kernel k;
    k.name = "merge";
    k.tensors = {{"x", DType::F32, false}, {"w", DType::F32, false}, {"out", DType::F32, true}};
    k.int_params = {"valid"};
    k.grid_x = 1;
    k.warps = 1;
    k.values = {{"t", warp_rows(16, 128)}, {"u", warp_rows(16, 128)}, {"w_r", warp_row_vector(16)}};
    const Expr valid = iv("valid");
    k.body = {tir::make_load("t", "x", 0, 128, valid, 128), tir::make_load("u", "x", 16 * 128, 128, valid, 128),
              tir::make_row_load("w_r", "w", 0, 1, valid, 0.0f), tir::make_map("t", fv("t") * fv("w_r") + fv("u")),
              tir::make_store("t", "out", 0, 128, valid, 128)};
    return k;
}

}  // namespace

TEST_CASE(
    "tile IR: warp-rows tiles load, map and store f32 rows; maps read one register family; rows 16-byte aligned") {
    const tir::Kernel k = warp_rows_merge_kernel();
    REQUIRE_NOTHROW(tir::verify(k));
    CHECK(tir::to_string(k).find("t: f32[16 x 128] register warp-rows") != std::string::npos);
    CHECK(tir::to_string(k).find("w_r: f32[16] warp-row-vector") != std::string::npos);
    HostTensor x = random_tensor("x", DType::F32, {32, 128}, 5), w = random_tensor("w", DType::F32, {16}, 6),
               out = filled("out", DType::F32, {16, 128}, -1);
    tir::LaunchArgs args{{{"x", &x}, {"w", &w}, {"out", &out}}, {{"valid", 13}}, {}};
    tir::interpret(k, args);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 128; c += 17) {
            INFO("row ", r, ", column ", c);
            const double want = r < 13 ? double(float(x.values[size_t(r * 128 + c)] * w.values[size_t(r)])) +
                                             x.values[size_t((16 + r) * 128 + c)]
                                       : -1.0;
            CHECK(out.values[size_t(r * 128 + c)] == doctest::Approx(want).epsilon(1e-6));
        }

    tir::Kernel mixed = k;  // an mma-family row vector in a warp-rows map
    mixed.values["w_r"] = row_vector(16);
    mixed.body[2] = tir::make_fill("w_r", 1.0f);
    CHECK_THROWS_WITH_AS(tir::verify(mixed),
                         doctest::Contains("a map reads values of its destination's register family"), InternalError);
    CHECK_THROWS_WITH_AS(tir::verify(with_statement(k, tir::make_reduce("w_r", tir::ReduceOp::Max, "t"))),
                         doctest::Contains("a reduction reads an mma-accumulator or operand tile"), InternalError);
    tir::Kernel unaligned = k;  // float4 rows need 16-byte row starts
    unaligned.body[1] = tir::make_load("u", "x", 16 * 128 + 2, 128, 16, 128);
    CHECK_THROWS_WITH_AS(tir::verify(unaligned), doctest::Contains("base and row stride must be multiples of 4"),
                         InternalError);
    tir::Kernel odd_stride = k;
    odd_stride.body[0] = tir::make_load("t", "x", 0, iv("valid"), 16, 128);
    CHECK_THROWS_WITH_AS(tir::verify(odd_stride), doctest::Contains("base and row stride must be multiples of 4"),
                         InternalError);
    tir::Kernel two_warps = k;  // one warp's tiles
    two_warps.warps = 2;
    CHECK_THROWS_WITH_AS(tir::verify(two_warps), doctest::Contains("in a one-warp kernel (this one has 2)"),
                         InternalError);
    tir::Kernel dot = matmul_kernel();  // tensor cores read mma fragments only
    dot.values["acc"] = warp_rows(16, 16);
    CHECK_THROWS_WITH_AS(tir::verify(dot),
                         doctest::Contains("the dot's accumulator must be an f32 mma-accumulator tile"), InternalError);
}
