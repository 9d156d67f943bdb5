// fuse_reduction's validation, one TEST_CASE per rule (frontend/BuildFusedPlan.cpp, DeriveRepair.cpp):
// each broken rule raises neptune::CompileError whose message holds the rule's key phrase and names
// the Funcs involved. Then what must not be an error: a tile larger than the extent, producers
// with consumers outside the chain, and fully masked rows (0, never NaN).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "neptune/Directives.h"
#include "neptune/Error.h"
#include "neptune/HalideCpu.h"
#include "neptune/HostTensor.h"

using namespace Halide;
using neptune::fuse_reduction;

namespace {

const float inf = std::numeric_limits<float>::infinity();

// The CompileError `directive` raises must contain `phrase` and name every Func in `named`.
void check_rejected(const std::function<void()> &directive, const char *phrase, const std::vector<Func> &named) {
    CHECK_THROWS_WITH_AS(directive(), doctest::Contains(phrase), neptune::CompileError);
    std::string message;
    try {
        directive();
    } catch (const neptune::CompileError &e) { message = e.what(); }
    for (const Func &f : named) {
        INFO("message: " << message);
        CHECK_MESSAGE(message.find(f.name()) != std::string::npos, "the message names " << f.name());
    }
}

// Softmax statistics over the rows of x(kv, i): the producer row_max and the target row_sum.
struct Softmax {
    Var i{"i"};
    RDom kv;
    Func row_max, row_sum;
    Softmax(const Func &x, int n, const std::string &tag)
        : kv(0, n, "kv"), row_max(tag + "_row_max"), row_sum(tag + "_row_sum") {
        row_max(i) = -inf;
        row_max(i) = max(row_max(i), x(kv, i));
        row_sum(i) = 0.0f;
        row_sum(i) += exp(x(kv, i) - row_max(i));
    }
};

// An input x(kv, i) for chains that are only validated, never realized.
Func symbolic_input(const std::string &name) {
    ImageParam p(Float(32), 2, name);
    Func x(name + "_f");
    Var a, b;
    x(a, b) = p(a, b);
    return x;
}

// A target t over the softmax's kv that adds `g` with reducer `op` ('+', 'M' for max, 'm' for min).
Func target(const Softmax &s, const std::string &name, char op, const Expr &g) {
    Func t(name);
    t(s.i) = op == '+' ? 0.0f : (op == 'M' ? -inf : inf);
    t(s.i) = op == '+' ? t(s.i) + g : (op == 'M' ? max(t(s.i), g) : min(t(s.i), g));
    return t;
}

std::vector<double> values(const Buffer<float> &b) {
    std::vector<double> v;
    b.for_each_value([&](float x) { v.push_back(x); });
    return v;
}

// Fused and unfused realizations agree within fp32 rounding (relative error below 1e-5), with no
// non-finite value where the unfused one is finite.
void check_same(const std::string &what, const Buffer<float> &fused, const Buffer<float> &plain) {
    const neptune::ErrorStats e = neptune::compare(values(fused), values(plain));
    INFO(what << ": max |err| " << e.max_abs << " (fused " << e.worst_actual << ", unfused " << e.worst_expected
              << ")");
    CHECK(e.nonfinite == 0);
    CHECK(e.max_scaled < 1e-5);
}

Buffer<float> realize(const Func &f, const std::vector<int> &sizes) {
    neptune::schedule_reductions_at_root({f});
    return Pipeline(f).realize(sizes, neptune::cpu_target());
}

// Inputs in [-2, 2] plus a ramp along each row, so the row maximum rises across tiles and every
// repair rescales (docs/design/fusion.md, numerical stability).
Buffer<float> random_rows(int n, int rows, uint32_t seed) {
    Buffer<float> b(n, rows);
    uint32_t s = seed;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            s = s * 1664525u + 1013904223u;
            b(j, r) = 4.0f * float(s >> 8) / float(1u << 24) - 2.0f + 0.02f * float(j);
        }
    return b;
}

}  // namespace

TEST_CASE("fuse_reduction errors: a reducer that is not associative and commutative is rejected by stage name") {
    const Func x = symbolic_input("x_assoc");
    const Softmax s(x, 64, "assoc");
    const Expr g = exp(x(s.kv, s.i) - s.row_max(s.i));
    Func decay("decay"), flip("flip");
    decay(s.i) = 0.0f;
    decay(s.i) = decay(s.i) * 0.5f + g;  // an exponential moving sum: order matters
    flip(s.i) = 0.0f;
    flip(s.i) = g - flip(s.i);
    for (const Func &t : {decay, flip})
        check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "associative and commutative", {t});
    // A producer discovered from the target is held to the same rule.
    Func bad_max("bad_max"), sum("sum_of_bad");
    bad_max(s.i) = 0.0f;
    bad_max(s.i) = bad_max(s.i) * 2.0f + x(s.kv, s.i);
    sum(s.i) = 0.0f;
    sum(s.i) += exp(x(s.kv, s.i) - bad_max(s.i));
    check_rejected([&] { fuse_reduction(sum, RVar(s.kv.x)); }, "is not t = t + g, max(t, g) or min(t, g)", {bad_max});
}

TEST_CASE("fuse_reduction errors: a target with no derivable repair names the blocking term") {
    const Func x = symbolic_input("x_tanh");
    const Softmax s(x, 64, "tanh");
    const Func t = target(s, "soft_target", '+', tanh(x(s.kv, s.i) - s.row_max(s.i)));
    check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "no repair for soft_target", {t, s.row_max});
    check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "tanh", {});
    check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "mixes a producer", {});
    // A sum of a producer term and a free term needs one shift per term: no repair from t alone.
    const Func shifted = target(s, "shifted_sum", '+', exp(s.row_max(s.i)) + x(s.kv, s.i));
    check_rejected([&] { fuse_reduction(shifted, RVar(s.kv.x)); }, "no repair from the partial target exists",
                   {shifted});
}

TEST_CASE("fuse_reduction errors: a select whose branches need different repairs") {
    const Func x = symbolic_input("x_branches");
    const Softmax s(x, 64, "branches");
    const Expr v = x(s.kv, s.i);
    const Func t = target(s, "two_branch", '+', select(v > 0.0f, exp(v - s.row_max(s.i)), v - s.row_max(s.i)));
    check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "the branches of a select need different repairs", {t});
}

TEST_CASE("fuse_reduction errors: a divisor that may be zero must be guarded") {
    const Func x = symbolic_input("x_divisor");
    const Softmax s(x, 64, "divisor");
    const Func t = target(s, "unguarded", '+', exp(x(s.kv, s.i) - s.row_max(s.i)) / s.row_sum(s.i));
    check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "is not provably non-zero", {t, s.row_sum});
    check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "select(l == 0, 1, l)", {});
}

TEST_CASE("fuse_reduction errors: companions are derived up to degree 4") {
    const Func x = symbolic_input("x_degree");
    const Softmax s(x, 64, "degree");
    const Expr d = x(s.kv, s.i) - s.row_max(s.i);
    const Func t = target(s, "fifth_moment", '+', d * d * d * d * d);
    check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "companions are derived up to degree 4", {t});
}

TEST_CASE("fuse_reduction errors: a max or min target whose repair factor is not provably positive") {
    const Func x = symbolic_input("x_sign");
    const Softmax s(x, 64, "sign");
    // h = t * m' / m: m may be negative, and a negative factor would turn max into min.
    const Func t = target(s, "scaled_max", 'M', x(s.kv, s.i) * s.row_max(s.i));
    check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "not provably positive", {t, s.row_max});
    const Func u = target(s, "scaled_min", 'm', x(s.kv, s.i) * s.row_max(s.i));
    check_rejected([&] { fuse_reduction(u, RVar(s.kv.x)); }, "not provably positive", {u, s.row_max});
    // Neither a positive rescale nor a shift.
    const Expr d = x(s.kv, s.i) - s.row_max(s.i);
    const Func w = target(s, "entropy_max", 'M', exp(d) * d);
    check_rejected([&] { fuse_reduction(w, RVar(s.kv.x)); }, "is neither", {w});
}

TEST_CASE("fuse_reduction errors: a stage that reduces over another RDom than the directive's RVar") {
    const Func x = symbolic_input("x_rdom");
    const Softmax s(x, 64, "rdom");
    RDom other(0, 64, "other");
    const Func t = target(s, "other_rdom_sum", '+', exp(x(other, s.i) - s.row_max(s.i)));
    check_rejected([&] { fuse_reduction(t, {s.row_max}, RVar(s.kv.x)); }, "reduces over other, not kv", {t});
    check_rejected([&] { fuse_reduction(t, {s.row_max}, RVar(s.kv.x)); }, "a fused chain shares one reduction variable",
                   {});
    // A domain of the same name with other bounds is another domain.
    RDom shorter(0, 32, "kv");
    const Func u = target(s, "shorter_sum", '+', exp(x(shorter, s.i) - s.row_max(s.i)));
    check_rejected([&] { fuse_reduction(u, {s.row_max}, RVar(s.kv.x)); }, "the stages of a chain must share one RDom",
                   {});
}

TEST_CASE("fuse_reduction errors: an RVar that no stage of the chain reduces over") {
    const Func x = symbolic_input("x_rvar");
    const Softmax s(x, 64, "rvar");
    RDom unrelated(0, 64, "unrelated");
    check_rejected([&] { fuse_reduction(s.row_sum, {s.row_max}, RVar(unrelated.x)); }, "reduces over kv, not unrelated",
                   {s.row_sum});
}

TEST_CASE("fuse_reduction errors: a target reads an axis reduction missing from the explicit producers") {
    const Func x = symbolic_input("x_missing");
    const Softmax s(x, 64, "missing");
    const Expr l = select(s.row_sum(s.i) == 0.0f, 1.0f, s.row_sum(s.i));
    const Func t = target(s, "normalised_max", 'M', exp(x(s.kv, s.i) - s.row_max(s.i)) / l);
    check_rejected([&] { fuse_reduction(t, {s.row_max}, RVar(s.kv.x)); }, "that is not in the chain", {t, s.row_sum});
    // Named, or discovered, the chain is fine.
    CHECK_NOTHROW(fuse_reduction(t, {s.row_max, s.row_sum}, RVar(s.kv.x)));
}

TEST_CASE("fuse_reduction errors: a producer read at a position that varies along the reduction") {
    const Func x = symbolic_input("x_varying");
    const Softmax s(x, 64, "varying");
    const Func t = target(s, "shifted_read", '+', exp(x(s.kv, s.i) - s.row_max(s.kv)));
    check_rejected([&] { fuse_reduction(t, RVar(s.kv.x)); }, "at a position that varies along kv", {t, s.row_max});
    // Two fixed positions are also refused: a stage reads each producer once.
    const Func u = target(s, "two_rows", '+', exp(x(s.kv, s.i) - s.row_max(s.i)) * s.row_max(max(s.i - 1, 0)));
    check_rejected([&] { fuse_reduction(u, RVar(s.kv.x)); }, "is read at two different positions", {u, s.row_max});
}

TEST_CASE("fuse_reduction errors: a stage must be one float update t(args) = op(t(args), g)") {
    const Func x = symbolic_input("x_shape");
    const Softmax s(x, 64, "shape");
    Func pure("pure_target"), twice("twice_updated"), pair("tuple_target"), ints("int_target"), fixed("fixed_row");
    Func undefined("undefined_target");
    pure(s.i) = s.row_max(s.i) * 2.0f;
    twice(s.i) = 0.0f;
    twice(s.i) += x(s.kv, s.i);
    twice(s.i) += exp(x(s.kv, s.i) - s.row_max(s.i));
    pair(s.i) = {0.0f, 0.0f};
    pair(s.i) = {pair(s.i)[0] + x(s.kv, s.i), pair(s.i)[1] + exp(x(s.kv, s.i) - s.row_max(s.i))};
    ints(s.i) = 0;
    ints(s.i) += cast<int>(exp(x(s.kv, s.i) - s.row_max(s.i)));
    fixed(s.i) = 0.0f;
    fixed(0) += exp(x(s.kv, 0) - s.row_max(0));
    RDom two_d(0, 8, 0, 8, "two_d");
    Func tiled("two_rvars");
    tiled(s.i) = 0.0f;
    tiled(s.i) += exp(x(two_d.x + 8 * two_d.y, s.i) - s.row_max(s.i));
    const RVar kv(s.kv.x);
    check_rejected([&] { fuse_reduction(pure, kv); }, "is not a reduction with one update definition", {pure});
    check_rejected([&] { fuse_reduction(twice, kv); }, "is not a reduction with one update definition", {twice});
    check_rejected([&] { fuse_reduction(pair, kv); }, "has a Tuple value", {pair});
    check_rejected([&] { fuse_reduction(ints, kv); }, "fused reductions are floating point", {ints});
    check_rejected([&] { fuse_reduction(fixed, kv); }, "at computed positions", {fixed});
    check_rejected([&] { fuse_reduction(tiled, {s.row_max}, RVar(two_d.x)); }, "reduces over 2 reduction variables",
                   {tiled});
    check_rejected([&] { fuse_reduction(undefined, kv); }, "has no definition", {undefined});
    check_rejected([&] { fuse_reduction(std::vector<Func>{}, kv); }, "no target Func given", {});
}

TEST_CASE("fuse_reduction errors: tile sizes and chunk counts must be positive") {
    const Func x = symbolic_input("x_params");
    const Softmax s(x, 64, "params");
    const RVar kv(s.kv.x);
    for (int tile : {0, -16})
        check_rejected([&] { fuse_reduction(s.row_sum, kv).rolling_update(tile); }, "must be positive", {s.row_sum});
    check_rejected([&] { fuse_reduction(s.row_sum, kv).split_k_update(4, 0); }, "must be positive", {s.row_sum});
    for (int chunks : {0, -2})
        check_rejected([&] { fuse_reduction(s.row_sum, kv).split_k_update(chunks, 16); },
                       "split_k_update needs a positive number of chunks", {s.row_sum});
}

TEST_CASE("fuse_reduction: a tile larger than the extent is fine, rolling and split-K") {
    const int n = 5, rows = 3;
    const Buffer<float> xb = random_rows(n, rows, 7);
    Func x("x_big_tile");
    Var a, b;
    x(a, b) = xb(a, b);
    const Softmax plain(x, n, "big_tile_plain");
    const Buffer<float> want = realize(plain.row_sum, {rows});
    for (int variant = 0; variant < 2; variant++) {
        const Softmax fused(x, n, "big_tile_fused");
        neptune::FusedReduction g = fuse_reduction(fused.row_sum, RVar(fused.kv.x));
        if (variant == 0) {
            g.rolling_update(64);
        } else {
            g.split_k_update(3, 100);  // more chunks than tiles: the empty chunks combine as identities
        }
        check_same(g.describe(), realize(neptune::lower_to_cpu({fused.row_sum})[0], {rows}), want);
    }
}

TEST_CASE("fuse_reduction: producers with consumers outside the chain read final values") {
    // Softmax whose user also outputs the row maximum and the per-position probabilities.
    const int n = 77, rows = 4;
    const Buffer<float> xb = random_rows(n, rows, 11);
    Func x("x_consumers");
    Var a, b, c("c");
    x(a, b) = xb(a, b);
    auto probabilities = [&](const Softmax &s) {
        Func p(s.row_sum.name() + "_probabilities");
        p(c, s.i) = exp(x(c, s.i) - s.row_max(s.i)) / s.row_sum(s.i);
        return p;
    };
    const Softmax plain(x, n, "consumers_plain"), fused(x, n, "consumers_fused");
    const Func plain_p = probabilities(plain), fused_p = probabilities(fused);
    fuse_reduction(fused.row_sum, RVar(fused.kv.x)).rolling_update(16);
    const std::vector<Func> lowered = neptune::lower_to_cpu({fused_p, fused.row_max, fused.row_sum});
    check_same("probabilities", realize(lowered[0], {n, rows}), realize(plain_p, {n, rows}));
    check_same("row_max", realize(lowered[1], {rows}), realize(plain.row_max, {rows}));
    check_same("row_sum", realize(lowered[2], {rows}), realize(plain.row_sum, {rows}));
}

namespace {

// Attention over keys 0..kv_len with query rows 0..q_len, masked by `visible(j, i)`, scores shifted
// by `offset`: out(e, i) = sum_j p_j v(e, j) / sum_j p_j, p_j = exp(s_j - safe(max s)), 0 on a
// fully masked row.
struct MaskCase {
    std::string name;
    std::function<Expr(Expr, Expr)> visible;
    float offset = 0;
};

struct Attention {
    Var e{"e"}, i{"i"}, j{"j"};
    RDom kv, rd;
    Func score, row_max, row_sum, acc, out;
    Attention(const Buffer<float> &q, const Buffer<float> &k, const Buffer<float> &v, const MaskCase &mask,
              const std::string &tag)
        : kv(0, k.dim(1).extent(), "kv"),
          rd(0, q.dim(0).extent(), "rd"),
          score(tag + "_score"),
          row_max(tag + "_row_max"),
          row_sum(tag + "_row_sum"),
          acc(tag + "_acc"),
          out(tag + "_out") {
        Func qk(tag + "_qk");
        qk(j, i) = 0.0f;
        qk(j, i) += q(rd, i) * k(rd, j);
        score(j, i) = select(mask.visible(j, i), qk(j, i) * 0.25f + mask.offset, -inf);
        row_max(i) = -inf;
        row_max(i) = max(row_max(i), score(kv, i));
        const Expr p = exp(score(kv, i) - select(row_max(i) == -inf, 0.0f, row_max(i)));
        row_sum(i) = 0.0f;
        row_sum(i) += p;
        acc(e, i) = 0.0f;
        acc(e, i) += p * v(e, kv);
        out(e, i) = select(row_sum(i) == 0.0f, 0.0f, acc(e, i) / row_sum(i));
    }
};

}  // namespace

TEST_CASE("fuse_reduction: fully masked rows give 0, never NaN, in the fused CPU form") {
    const int d = 16, q_len = 40, kv_len = 25;
    const Buffer<float> q = random_rows(d, q_len, 1), k = random_rows(d, kv_len, 2), v = random_rows(d, kv_len, 3);
    auto causal = [&](const Expr &j, const Expr &i) { return j <= i - (q_len - kv_len); };
    auto window = [](const Expr &j, const Expr &i) { return j <= i && j > i - 3; };
    const std::vector<MaskCase> masks = {
        // Causal, bottom-right aligned, more query rows than keys: rows 0..14 see no key.
        {"causal", causal},
        // A window of 3 keys that runs past the last key: rows 28..39 see none.
        {"window", window},
        // Scores below -88.7, where exp(0 - m) overflows: a tile or chunk that saw only masked keys
        // (its max guarded to 0) must not be rescaled into 0 * inf.
        {"window_low", window, -100.0f},
    };
    for (const MaskCase &mask : masks) {
        const std::string &name = mask.name;
        const Attention plain(q, k, v, mask, name + "_plain");
        const Buffer<float> want = realize(plain.out, {d, q_len}), row_sum = realize(plain.row_sum, {q_len});
        for (int variant = 0; variant < 2; variant++) {
            const Attention fused(q, k, v, mask, name + "_fused");
            neptune::FusedReduction g = fuse_reduction({fused.acc, fused.row_sum}, RVar(fused.kv.x));
            if (variant == 0) {
                g.rolling_update(4);
            } else {
                g.split_k_update(3, 4);
            }
            const Buffer<float> got = realize(neptune::lower_to_cpu({fused.out})[0], {d, q_len});
            check_same(name + ": " + g.describe(), got, want);
            int masked_rows = 0;
            for (int row = 0; row < q_len; row++) {
                if (row_sum(row) != 0.0f) continue;
                masked_rows++;
                for (int col = 0; col < d; col++) CHECK(got(col, row) == 0.0f);
            }
            CHECK(masked_rows >= 12);
        }
    }
}
