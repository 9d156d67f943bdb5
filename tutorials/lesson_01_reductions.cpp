// Neptune tutorial lesson 1: reductions in Halide
//
// Neptune's algorithms are plain Halide Funcs, and everything it fuses is a reduction: a Func with
// an initial value and one update that runs over a reduction domain (an RDom). This lesson writes
// the two reductions every softmax starts with, the maximum and the sum of each row, realizes them
// on the CPU through Halide's JIT, and checks them against a plain C++ loop.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_01_reductions
//   build/tutorials/lesson_01_reductions
#include <cmath>
#include <cstdio>
#include <limits>

#include "Halide.h"
#include "neptune/HalideCpu.h"

using namespace Halide;

int main() {
    // The data: 3 rows of 8 values. Halide indexes a buffer innermost first, so x(j, i) is
    // column j of row i, the layout of a row-major matrix x[i][j]. The Buffer lives in host
    // memory; a Func can read it like any other Func.
    const int cols = 8, rows = 3;
    const float inf = std::numeric_limits<float>::infinity();
    Buffer<float> x(cols, rows);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) x(c, r) = std::sin(float(3 * c + 5 * r)) + 0.25f * float(r);
    bool ok = true;

    // The names the blocks share: the pure variable i (a row) and the reduction domain j (the
    // columns 0..cols-1). A Var is a free index of a Func's definition; an RDom is a loop.
    Var i("i");
    RDom j(0, cols, "j");

    {
        // A row maximum. The pure definition gives every row its initial value: -infinity, the
        // identity of max (max(-inf, a) = a), so an empty row stays -inf instead of inventing a
        // value. The update runs once per position of the RDom j, columns 0..cols-1, and folds
        // x(j, i) into the running value. The RDom is a loop that the update owns: j is not an
        // argument of row_max, so each row i reduces over all of it.
        Func row_max("row_max");
        row_max(i) = -inf;
        row_max(i) = max(row_max(i), x(j, i));

        // Realize it on the CPU: {rows} is the extent of the output, one value per row.
        // neptune::cpu_target() is the host with strict IEEE floats: the algorithms compare
        // against -inf, which Halide's default fast math may assume never happens.
        Buffer<float> m = row_max.realize({rows}, neptune::cpu_target());

        // The oracle is the same reduction as a loop. max never rounds, so the two must be equal.
        for (int r = 0; r < rows; r++) {
            float want = -inf;
            for (int c = 0; c < cols; c++) want = std::max(want, x(c, r));
            std::printf("row %d: max %.6f (loop %.6f)\n", r, m(r), want);
            ok = ok && m(r) == want;
        }
        // Prints:
        //   row 0: max 0.836656 (loop 0.836656)
        //   row 1: max 1.240607 (loop 1.240607)
        //   row 2: max 0.920167 (loop 0.920167)
    }

    {
        // A row sum: initial value 0, the identity of +, and `+=` as the update. Unlike max, a
        // sum rounds at every addition, and its result depends on the order of the additions.
        // Here both sides add left to right in fp32, but later lessons cut the loop into tiles
        // and reorder the additions, so they compare with a tolerance of a few fp32 roundings.
        //
        // These two shapes are what Neptune can fuse: a Func with an initial value and one
        // update t(i) = t(i) + g, max(t(i), g) or min(t(i), g), where g may read anything but t.
        // Those reducers are associative and commutative with an identity, so a reduction can be
        // cut into pieces, each reduced on its own, and the pieces combined.
        Func row_sum("row_sum");
        row_sum(i) = 0.0f;
        row_sum(i) += x(j, i);
        Buffer<float> s = row_sum.realize({rows}, neptune::cpu_target());
        for (int r = 0; r < rows; r++) {
            double want = 0;
            for (int c = 0; c < cols; c++) want += x(c, r);
            std::printf("row %d: sum %.6f (loop %.6f)\n", r, s(r), want);
            ok = ok && std::fabs(s(r) - want) <= 1e-5 * (1 + std::fabs(want));
        }
        // Prints:
        //   row 0: sum 0.473206 (loop 0.473206)
        //   row 1: sum 1.888937 (loop 1.888937)
        //   row 2: sum 3.463785 (loop 3.463785)
    }

    {
        // What Halide runs. print_loop_nest() shows the loops of a Func and of what it calls.
        // A reduction that a later Func reads is computed "at root" (every row, once, before its
        // consumer) by compute_root(); without that schedule Halide would compute it inside the
        // consumer, once per use. The reduction's own loops are two: one sets the initial value
        // of every row, the next runs the update, with j inside the loop over rows.
        Func row_max("row_max"), gap("gap");
        row_max(i) = -inf;
        row_max(i) = max(row_max(i), x(j, i));
        row_max.compute_root();
        gap(i) = row_max(i) - x(0, i);  // a consumer of the reduction's final value
        std::fflush(stdout);  // Halide prints the loop nest on stderr
        gap.print_loop_nest();
        // Prints:
        //   produce row_max:
        //     for i:
        //       row_max(...) = ...
        //     for i:
        //       for j in [0, 7]:
        //         row_max(...) = ...
        //   consume row_max:
        //     produce gap:
        //       for i:
        //         gap(...) = ...
        // gap reads the final maximum: it runs only after every update of its row. Lesson 2
        // builds softmax from reductions like these, and meets a reduction that has to wait.
        Buffer<float> g = gap.realize({rows}, neptune::cpu_target());
        float m0 = -inf;
        for (int c = 0; c < cols; c++) m0 = std::max(m0, x(c, 0));
        ok = ok && g(0) == m0 - x(0, 0);
    }

    // Every lesson ends like this: a failed check prints what failed and exits non-zero, so that
    // `meson test --suite tutorial` reports it; a passing run prints Success!.
    if (!ok) {
        std::printf("lesson 1: a reduction disagrees with its loop\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
