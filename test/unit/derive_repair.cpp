// The repair derivation, case by case: the derived h against the hand-derived form, and every
// companion's update checked on sums of random terms in fp64 (docs/design/fusion.md: the repair function, worked
// examples, further reducers).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "ExprEval.h"
#include "frontend/DeriveRepair.h"
#include "neptune/Error.h"

using namespace neptune;
using namespace neptune::internal;
using Halide::Expr;
namespace HI = Halide::Internal;

namespace {

Expr var(const std::string &n) { return HI::Variable::make(Halide::Float(32), n); }

const Halide::Var kv("kv");
Halide::ImageParam xs(Halide::Float(32), 1, "x"), vs(Halide::Float(32), 1, "v");
const Expr x = xs(kv), v = vs(kv);  // values that vary along the reduction
const Expr m = var("m"), l = var("l"), mp = var("m'"), lp = var("l'");
const Expr ninf = Expr(-INFINITY);

std::string text(const Expr &e) {
    std::ostringstream os;
    os << e;
    return os.str();
}

// Sums of the companions' maps over random terms under the old producer values, updated by the
// repair, must equal the sums under the new values: R1 and R2 together, on data.
void check_on_data(const Repair &r, Reducer red, std::map<std::string, double> old_p,
                   std::map<std::string, double> new_p, int terms = 37, bool positive_x = false) {
    std::mt19937 rng(3);
    std::normal_distribution<double> nd(0, 1);
    const size_t n = r.maps.size();
    auto total = [&](const std::map<std::string, double> &prod, size_t k, std::mt19937 gen) {
        double acc = red == Reducer::Sum ? 0 : (red == Reducer::Max ? -INFINITY : INFINITY);
        for (int j = 0; j < terms; j++) {
            std::map<std::string, double> env = prod;
            env[text(x)] = positive_x ? std::fabs(std::normal_distribution<double>(0, 1)(gen)) + 0.1
                                      : std::normal_distribution<double>(0, 1)(gen) + 1.0;
            env[text(v)] = std::normal_distribution<double>(0, 1)(gen);
            env["kv"] = j;
            const double g = testing::eval(r.maps[k], env);
            acc = red == Reducer::Sum ? acc + g : (red == Reducer::Max ? std::max(acc, g) : std::min(acc, g));
        }
        return acc;
    };
    std::vector<double> old_state(n);
    for (size_t k = 0; k < n; k++) old_state[k] = total(old_p, k, rng);
    std::map<std::string, double> env = old_p;
    for (auto &[k, val] : new_p) env[k + "'"] = val;
    for (size_t b = 0; b < n; b++) {
        double updated = r.shift[b].defined() ? testing::eval(r.shift[b], env) : 0.0;
        for (size_t c = 0; c < n; c++)
            if (r.coeff[b][c].defined()) updated += testing::eval(r.coeff[b][c], env) * old_state[c];
        const double direct = total(new_p, b, rng);
        INFO("companion " << r.names[b] << ": repaired " << updated << " direct " << direct);
        CHECK(updated == doctest::Approx(direct).epsilon(1e-9));
    }
    (void)nd;
}

double h_at(const Repair &r, std::map<std::string, double> env) { return testing::eval(r.h, env); }

}  // namespace

TEST_CASE("derive: softmax normaliser exp(x - m) gets the rescale t * exp(m - m')") {
    const Repair r = derive_repair("row_sum", Reducer::Sum, Halide::exp(x - m), {"m"}, "kv", {});
    CHECK(r.kind == RepairKind::Rescale);
    MESSAGE("h = " << sym::pretty(r.h));
    for (double t : {0.5, 3.0})
        CHECK(h_at(r, {{"t", t}, {"m", 1.5}, {"m'", 2.25}}) == doctest::Approx(t * std::exp(1.5 - 2.25)));
    CHECK(sym::pretty(r.h) == "t * exp(m - m')");
    check_on_data(r, Reducer::Sum, {{"m", 0.3}}, {{"m", 1.9}});
}

TEST_CASE("derive: attention output with a safe max, exp(x - safe(m)) * v") {
    const Expr safe = Halide::select(m == ninf, 0.0f, m);
    const Repair r = derive_repair("acc", Reducer::Sum, Halide::exp(x - safe) * v, {"m"}, "kv", {});
    CHECK(r.kind == RepairKind::Rescale);
    MESSAGE("h = " << sym::pretty(r.h));
    // hand-derived: t * exp(safe(m) - safe(m')); at m = -inf the old safe value is 0
    CHECK(h_at(r, {{"t", 2.0}, {"m", -INFINITY}, {"m'", 0.7}}) == doctest::Approx(2.0 * std::exp(0 - 0.7)));
    check_on_data(r, Reducer::Sum, {{"m", 0.1}}, {{"m", 2.0}});
}

TEST_CASE("derive: FlashAttention-1 form reads two producers: t * exp(m - m') * l / l'") {
    const Expr lsafe = Halide::select(l == 0.0f, 1.0f, l);
    const std::map<std::string, sym::Sign> facts = {{"l", sym::Sign::NonNegative}};
    const Repair r = derive_repair("acc", Reducer::Sum, Halide::exp(x - m) / lsafe * v, {"m", "l"}, "kv", facts);
    CHECK(r.kind == RepairKind::Rescale);
    CHECK(sym::pretty(r.h) == "t * select(l == 0, 1, l) * exp(m - m') / select(l' == 0, 1, l')");
    CHECK(h_at(r, {{"t", 1.5}, {"m", 0.5}, {"m'", 1.0}, {"l", 3.0}, {"l'", 7.0}}) ==
          doctest::Approx(1.5 * std::exp(0.5 - 1.0) * 3.0 / 7.0));
    check_on_data(r, Reducer::Sum, {{"m", 0.5}, {"l", 2.0}}, {{"m", 1.2}, {"l", 5.0}});
    // Without the guard, l may be 0 and the repair cannot divide by it.
    CHECK_THROWS_WITH_AS(derive_repair("acc", Reducer::Sum, Halide::exp(x - m) / l * v, {"m", "l"}, "kv", facts),
                         doctest::Contains("select(l == 0, 1, l)"), CompileError);
}

TEST_CASE("derive: masks, softcap and ALiBi live in the non-producer part and leave h unchanged") {
    const Halide::Var i("i");
    const Expr masked = Halide::select(kv <= i, x, ninf);
    const Expr softcap = 50.0f * Halide::tanh(x / 50.0f);
    const Expr alibi = x + var("slope") * Halide::cast<float>(kv - i);
    for (const Expr &s : {masked, softcap, alibi}) {
        const Repair r = derive_repair("acc", Reducer::Sum, Halide::exp(s - m) * v, {"m"}, "kv", {});
        CHECK(r.kind == RepairKind::Rescale);
        CHECK(h_at(r, {{"t", 2.0}, {"m", 0.25}, {"m'", 1.0}}) == doctest::Approx(2.0 * std::exp(0.25 - 1.0)));
    }
    // A select masking whole terms: each branch that is not the identity gets the same repair.
    const Repair r =
        derive_repair("acc", Reducer::Sum, Halide::select(kv <= i, Halide::exp(x - m) * v, 0.0f), {"m"}, "kv", {});
    CHECK(r.kind == RepairKind::Rescale);
    CHECK(r.maps[0].as<HI::Select>() != nullptr);
}

TEST_CASE("derive: Performer's feature sums, exp(a - k_max) * v and exp(a - q_max) * kv_sum") {
    const Repair r = derive_repair("kv_sum", Reducer::Sum, Halide::exp(x - var("k_max")) * v, {"k_max"}, "kv", {});
    CHECK(r.kind == RepairKind::Rescale);
    // docs/design/fusion.md, Performer: R1 against the map gives t * exp(r - r') (the paper prints exp(r' - r)).
    CHECK(h_at(r, {{"t", 1.0}, {"k_max", 2.0}, {"k_max'", 3.0}}) == doctest::Approx(std::exp(2.0 - 3.0)));
    check_on_data(r, Reducer::Sum, {{"k_max", 1.0}}, {{"k_max", 2.5}});
}

TEST_CASE("derive: a mean -> variance chain gets companions (Chan's update)") {
    const Expr n = var("n");  // the extent: constant along the reduction
    const Expr mean = var("sum_x") / n;
    const Repair r = derive_repair("m2", Reducer::Sum, (x - mean) * (x - mean), {"sum_x"}, "kv", {});
    CHECK(r.kind == RepairKind::Taylor);
    REQUIRE(r.maps.size() == 3);
    MESSAGE("h = " << sym::pretty(r.h));
    // Hand-derived (docs/design/fusion.md, multi-moment states): sum (x - mu')^2 = t + 2 (mu - mu') sum (x - mu) + N
    // (mu - mu')^2.
    check_on_data(r, Reducer::Sum, {{"sum_x", 4.0}, {"n", 5.0}}, {{"sum_x", 9.0}, {"n", 5.0}});
}

TEST_CASE("derive: entropy numerator exp(s - m) * (s - m) gets t' = exp(m - m') (t + (m - m') l)") {
    const Repair r = derive_repair("ent", Reducer::Sum, Halide::exp(x - m) * (x - m), {"m"}, "kv", {});
    CHECK(r.kind == RepairKind::Taylor);
    REQUIRE(r.maps.size() == 2);
    check_on_data(r, Reducer::Sum, {{"m", 0.2}}, {{"m", 1.4}});
}

TEST_CASE("derive: max and min targets: a positive rescale, or a shift") {
    const Expr lsafe = Halide::select(l == 0.0f, 1.0f, l);
    const std::map<std::string, sym::Sign> facts = {{"l", sym::Sign::NonNegative}};
    const Repair r = derive_repair("max_prob", Reducer::Max, Halide::exp(x - m) / lsafe, {"m", "l"}, "kv", facts);
    CHECK(r.kind == RepairKind::Rescale);
    check_on_data(r, Reducer::Max, {{"m", 0.5}, {"l", 2.0}}, {{"m", 1.2}, {"l", 5.0}});
    const Repair s = derive_repair("shifted_max", Reducer::Max, x - m, {"m"}, "kv", {});
    CHECK(s.kind == RepairKind::Shift);
    CHECK(h_at(s, {{"t", 1.0}, {"m", 0.5}, {"m'", 2.0}}) == doctest::Approx(1.0 + 0.5 - 2.0));
    check_on_data(s, Reducer::Max, {{"m", 0.5}}, {{"m", 2.0}});
    const Repair mn = derive_repair("shifted_min", Reducer::Min, x - m, {"m"}, "kv", {});
    check_on_data(mn, Reducer::Min, {{"m", 0.5}}, {{"m", 2.0}});
}

TEST_CASE("derive: terms that admit no repair are rejected, naming the blocking term") {
    CHECK_THROWS_WITH_AS(derive_repair("t", Reducer::Sum, Halide::tanh(x - m), {"m"}, "kv", {}),
                         doctest::Contains("mixes a producer"), CompileError);
    CHECK_THROWS_WITH_AS(derive_repair("t", Reducer::Sum, Halide::tanh(x - m), {"m"}, "kv", {}),
                         doctest::Contains("tanh"), CompileError);
    // x * m under max: the factor m may be negative, so rescaling would turn max into min.
    CHECK_THROWS_WITH_AS(derive_repair("t", Reducer::Max, x * m, {"m"}, "kv", {}),
                         doctest::Contains("not provably positive"), CompileError);
    // exp(m) + x under +: a shift needs one correction per term.
    CHECK_THROWS_WITH_AS(derive_repair("t", Reducer::Sum, Halide::exp(m) + x, {"m"}, "kv", {}),
                         doctest::Contains("no repair for t"), CompileError);
    // max of exp(x) * exp(x - m) * (x - m): neither a rescale nor a shift
    CHECK_THROWS_WITH_AS(derive_repair("t", Reducer::Max, Halide::exp(x - m) * (x - m), {"m"}, "kv", {}),
                         doctest::Contains("neither"), CompileError);
}

TEST_CASE("derive: a map that reads no producer needs no repair") {
    const Repair r = derive_repair("t", Reducer::Sum, x * v, {"m"}, "kv", {});
    CHECK(r.kind == RepairKind::None);
    CHECK(h_at(r, {{"t", 4.0}, {"m", 1.0}, {"m'", 2.0}}) == 4.0);
}

TEST_CASE("derive: a producer inside a nested exponential is separated, and rejected when unstable") {
    // exp(x - exp(m)) = exp(x) * exp(-exp(m)): a rescale by exp(exp(m) - exp(m')), exact...
    const Repair r = derive_repair("t", Reducer::Sum, Halide::exp(x - Halide::exp(m)), {"m"}, "kv", {});
    CHECK(r.kind == RepairKind::Rescale);
    check_on_data(r, Reducer::Sum, {{"m", 0.2}}, {{"m", 0.7}});
    // ...but exp(m) could overflow between partial values of m: with reducers known, it is refused.
    CHECK_THROWS_WITH_AS(
        derive_repair("t", Reducer::Sum, Halide::exp(x - Halide::exp(m)), {"m"}, "kv", {}, {{"m", Reducer::Max}}),
        doctest::Contains("- max or + min"), CompileError);
    // exp(x - m) with m a max is the stable softmax form; with m a sum it is refused.
    CHECK_NOTHROW(derive_repair("t", Reducer::Sum, Halide::exp(x - m), {"m"}, "kv", {}, {{"m", Reducer::Max}}));
    CHECK_THROWS_WITH_AS(derive_repair("t", Reducer::Sum, Halide::exp(x - m), {"m"}, "kv", {}, {{"m", Reducer::Sum}}),
                         doctest::Contains("overflow"), CompileError);
    // A producer mixed with varying values inside a nested exponential blocks the repair.
    CHECK_THROWS_WITH_AS(derive_repair("t", Reducer::Sum, Halide::exp(Halide::exp(x - m)), {"m"}, "kv", {}),
                         doctest::Contains("mixes a producer"), CompileError);
}
