// Neptune tutorial lesson 2: the unfused softmax, and why its sum waits for the final max
//
// Softmax of a row x is y_j = exp(x_j - m) / l with m = max_j x_j and l = sum_j exp(x_j - m).
// Written as Halide reductions it reads each row three times: once for the max, once for the sum
// (which needs the finished max), once to normalise. This lesson builds that pipeline, shows why
// the max is subtracted at all, and shows what goes wrong if the sum uses the max seen so far
// instead of the final one: the dependency that lesson 3 repairs. Fused, the max and the sum
// share one pass, and only the normalisation needs a second: three passes become two.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_02_two_pass_softmax
//   build/tutorials/lesson_02_two_pass_softmax
#include <cmath>
#include <cstdio>
#include <limits>

#include "Halide.h"
#include "neptune/HalideCpu.h"

using namespace Halide;

int main() {
    // Scores around 100, as attention logits can be: exp(100) does not fit in fp32, whose largest
    // value is about 3.4e38 = exp(88.7). The values rise along each row, so a left-to-right pass
    // keeps finding a new maximum. As in lesson 1, i is a row and kv the reduction over columns;
    // j is a column as a pure variable, for the output y(j, i).
    const int n = 40, rows = 2;
    const float inf = std::numeric_limits<float>::infinity();
    Buffer<float> x(n, rows);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < n; c++) x(c, r) = 100.0f + 0.1f * float(c) + std::sin(float(7 * c + r));
    Var i("i"), j("j");
    RDom kv(0, n, "kv");
    Func row_max("row_max"), row_sum("row_sum");  // defined in the first block, read in the last
    bool ok = true;

    {
        // The three passes. row_max and row_sum are reductions over kv; y is a pure Func that
        // reads both final values. compute_root() makes each reduction run once, for every row,
        // before its consumers (lesson 1): pass 1 is row_max, pass 2 row_sum, pass 3 y. Each
        // pass reads the whole row again. On a GPU that means reading x from memory three times,
        // or holding the whole row on chip, which a long attention row does not fit.
        Func y("y");
        row_max(i) = -inf;
        row_max(i) = max(row_max(i), x(kv, i));
        row_sum(i) = 0.0f;
        row_sum(i) += exp(x(kv, i) - row_max(i));  // needs the final row_max of row i
        y(j, i) = exp(x(j, i) - row_max(i)) / row_sum(i);
        row_max.compute_root();
        row_sum.compute_root();
        std::fflush(stdout);  // Halide prints the loop nest on stderr
        y.print_loop_nest();
        // Prints three loop nests over the rows, one per pass (each reduction first sets its
        // initial value, then runs its update over kv):
        //   produce row_max:
        //     for i:
        //       row_max(...) = ...
        //     for i:
        //       for kv in [0, 39]:
        //         row_max(...) = ...
        //   consume row_max:
        //     produce row_sum:
        //       for i:
        //         row_sum(...) = ...
        //       for i:
        //         for kv in [0, 39]:
        //           row_sum(...) = ...
        //     consume row_sum:
        //       produce y:
        //         for i:
        //           for j:
        //             y(...) = ...

        // The check: the same three passes in fp64, element by element. The largest relative
        // error is a few fp32 roundings.
        Buffer<float> out = y.realize({n, rows}, neptune::cpu_target());
        double worst = 0;
        for (int r = 0; r < rows; r++) {
            double m = -INFINITY, l = 0;
            for (int c = 0; c < n; c++) m = std::max(m, double(x(c, r)));
            for (int c = 0; c < n; c++) l += std::exp(x(c, r) - m);
            for (int c = 0; c < n; c++) worst = std::max(worst, std::fabs(out(c, r) * l / std::exp(x(c, r) - m) - 1));
        }
        std::printf("three-pass softmax: largest relative error against fp64 %.2g\n", worst);
        // Prints: three-pass softmax: largest relative error against fp64 1.3e-07
        ok = ok && worst < 1e-5;
    }

    {
        // Why subtract the max: without it every exp overflows to infinity, and inf / inf is NaN.
        // Subtracting m keeps every exponent <= 0, so every term lies in (0, 1] and the sum is at
        // least 1 (the maximum contributes exp(0) = 1). The max is not optional: it is what makes
        // softmax computable in fp32, and it is what makes the sum depend on another reduction.
        Func naive_sum("naive_sum"), naive("naive");
        naive_sum(i) = 0.0f;
        naive_sum(i) += exp(x(kv, i));
        naive_sum.compute_root();
        naive(j, i) = exp(x(j, i)) / naive_sum(i);
        // Every x is above 98, so every exp(x) exceeds 3e42: +inf in fp32. The sum is then +inf,
        // and each output is inf / inf.
        Buffer<float> out = naive.realize({n, rows}, neptune::cpu_target());
        std::printf("softmax without the max: y(0, 0) = %f\n", out(0, 0));
        // Prints: softmax without the max: y(0, 0) = -nan
        ok = ok && !std::isfinite(out(0, 0));
    }

    {
        // Why the sum needs the *final* max. Fusing the sum into the max's loop means computing
        // term j right after the max has seen positions 0..j, so with the running max m_j in
        // place of m. Halide expresses that running max as a scan: a Func over (j, i) whose
        // update at position scan reads its own value at scan - 1. The sum of exp(x_j - m_j) then
        // shows the damage: every term computed before the last rise of the maximum is too large
        // by the factor exp(m - m_j).
        // The scan's pure definition copies x; its update visits positions 1..n-1 in order (the
        // RDom starts at 1: position 0 is the maximum of itself), and the in-order visit is what
        // makes the result a prefix maximum rather than one value per row. The right sum, for
        // comparison, is the first block's row_sum.
        RDom scan(1, n - 1, "scan");
        Func running_max("running_max"), stale_sum("stale_sum");
        running_max(j, i) = x(j, i);
        running_max(scan, i) = max(running_max(scan - 1, i), x(scan, i));
        running_max.compute_root();
        stale_sum(i) = 0.0f;
        stale_sum(i) += exp(x(kv, i) - running_max(kv, i));
        Buffer<float> stale = stale_sum.realize({rows}, neptune::cpu_target());
        Buffer<float> right = row_sum.realize({rows}, neptune::cpu_target());
        for (int r = 0; r < rows; r++) {
            std::printf("row %d: sum with the final max %.4f, with the running max %.4f\n", r, right(r), stale(r));
            ok = ok && stale(r) > 1.5f * right(r);
        }
        // Prints:
        //   row 0: sum with the final max 6.7075, with the running max 25.7815
        //   row 1: sum with the final max 6.7778, with the running max 24.7748
        // The stale sum is not off by one common factor: each term has its own m_j, so no single
        // correction at the end can fix it. What can: correct the partial sum each time the max
        // rises, multiplying it by exp(m_old - m_new), so that it always holds the terms as if
        // computed under the current max. Lesson 3 has Neptune derive that correction, prove it,
        // and fuse the two loops with it.
    }

    // A failed check exits non-zero, so `meson test --suite tutorial` reports it.
    if (!ok) {
        std::printf("lesson 2: a check failed\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
