// Neptune tutorial lesson 3: fuse_reduction, the derived repair, and the CPU form
//
// Lesson 2 ended with a sum that needs the final max, so the two reductions ran as separate
// passes. neptune::fuse_reduction fuses them anyway: the sum runs in the max's loop, tile by tile,
// and whenever the max rises the partial sum is corrected by a "repair" h that Neptune derives
// from the sum's own definition and proves (docs/design/fusion.md, the repair function). rolling_update(T) picks the
// sequential variant: tiles of T positions, with state (max, sum) carried from one tile to the next. lower_to_cpu
// rewrites the Funcs into that tiled form, which Halide then runs on the host.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_03_fuse_reduction
//   build/tutorials/lesson_03_fuse_reduction
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "Halide.h"
#include "neptune/Directives.h"
#include "neptune/HalideCpu.h"

using namespace Halide;

namespace {

// Softmax as the user writes it (lesson 2): plain Halide, no schedule. The names get a suffix
// because this lesson builds the algorithm twice, once to fuse and once as the reference.
struct Softmax {
    Var i{"i"}, j{"j"};
    RDom kv;
    Func row_max, row_sum, y;
    Softmax(const Buffer<float> &x, const std::string &suffix)
        : kv(0, x.dim(0).extent(), "kv"), row_max("row_max" + suffix), row_sum("row_sum" + suffix), y("y" + suffix) {
        row_max(i) = -std::numeric_limits<float>::infinity();
        row_max(i) = max(row_max(i), x(kv, i));
        row_sum(i) = 0.0f;
        row_sum(i) += exp(x(kv, i) - row_max(i));
        y(j, i) = exp(x(j, i) - row_max(i)) / row_sum(i);
    }
};

}  // namespace

int main() {
    // 4 rows of 100 scores with a rising ramp, so the row maximum rises in almost every tile and
    // the repair really rescales (a maximum found in the first tile would hide a missing repair).
    const int n = 100, rows = 4;
    Buffer<float> x({n, rows}, "x");
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < n; c++) x(c, r) = 0.05f * float(c) + 2.0f * std::sin(float(13 * c + 3 * r));
    Softmax plain(x, ""), fused(x, "_fused");

    {
        // Before: the plain algorithm, its reductions computed at root as in lesson 2. Its loop
        // nest has one loop over all 100 positions for the max, then another for the sum.
        neptune::schedule_reductions_at_root({plain.y});
        std::fflush(stdout);  // Halide prints the loop nest on stderr
        plain.y.print_loop_nest();
        // Prints (abridged):
        //   produce row_max:
        //     ...
        //       for kv in [0, 99]:
        //         row_max(...) = ...
        //   consume row_max:
        //     produce row_sum:
        //       ...
        //         for kv in [0, 99]:
        //           row_sum(...) = ...
    }

    {
        // The directive. fuse_reduction(target, rvar) names the reduction to fuse (the sum) and
        // the reduction variable of the shared loop; Neptune finds the producers the target reads
        // over that variable (here row_max) and validates the chain. rolling_update(16) chooses
        // tiles of 16 positions: 100 is not a multiple of 16, and the last tile is simply shorter.
        neptune::FusedReduction group = neptune::fuse_reduction(fused.row_sum, RVar(fused.kv.x)).rolling_update(16);

        // describe() prints what was derived. The sum's map is g(m, x) = exp(x - m); the repair
        // re-expresses a partial sum t accumulated under the old max m as if under the new max m':
        // h(t) = t * exp(m - m'). Its proof has two parts: (R1) h turns one old term into the new
        // term, checked by rewriting both sides to one normal form; (R2) h distributes over the
        // sum, because it multiplies by a factor that does not depend on the term.
        std::printf("%s", group.describe().c_str());
        // Prints:
        //   fuse_reduction(row_sum_fused, kv): rolling update, tiles of 16
        //     row_max_fused(i) = max over kv of x(kv, i)
        //     row_sum_fused(i) = + over kv of exp(x(kv, i) - row_max_fused)
        //         repair (rescale): h = t * exp(row_max_fused - row_max_fused')
        //         proof: R1: g(r', c) and h(g(r, c)) have the same normal form; R2: h(t) = t *
        //         exp(row_max_fused - row_max_fused') is linear in t
        // The primed name is the new value m'. The lesson checks that this is the repair found.
        if (group.describe().find("h = t * exp(row_max_fused - row_max_fused')") == std::string::npos) {
            std::printf("lesson 3: not the expected repair\n");
            return 1;
        }
    }

    {
        // The rewrite. lower_to_cpu takes the outputs to realize and rewrites every fused group
        // they depend on into plain Halide Funcs: per tile k, the max of the tile, the tile's sum
        // under the max after tile k, and the carried state
        //   m_k = max(m_(k-1), max of tile k)
        //   l_k = l_(k-1) * exp(m_(k-1) - m_k) + sum over tile k of exp(x - m_k)
        // (the online normaliser of Milakov and Gimelshein). y is not a reduction over kv; it
        // reads the final max and sum after the loop, as an epilogue. The printed loop nest has
        // loops over the 7 tiles (nep_k) with 16-position loops inside, where the plain one had
        // one loop over all 100 positions; the carried state is a scan over tiles (from 1, the
        // first tile being peeled). An excerpt:
        //   produce row_sum_fused_tile:
        //     ...
        //     for nep_k in [0, 6]:
        //       for i:
        //         for row_sum_fused_j in [0, 15]:
        //           row_sum_fused_tile(...) = ...
        //   consume row_sum_fused_tile:
        //     produce row_sum_fused_state:
        //       ...
        //       for i:
        //         for row_sum_fused_k in [1, 6]:
        //           row_sum_fused_state(...) = ...
        // On the CPU each Func is computed at root, tile after tile; a GPU kernel keeps the same
        // state in registers and runs the whole recurrence in one loop.
        std::vector<Func> outputs = neptune::lower_to_cpu({fused.y});
        neptune::schedule_reductions_at_root(outputs);
        std::fflush(stdout);
        outputs[0].print_loop_nest();

        // The check: the fused softmax against the unfused one, both in fp32. They differ only by
        // rounding (the sum is added in another order, and each rescale rounds once).
        Buffer<float> want = plain.y.realize({n, rows}, neptune::cpu_target());
        Buffer<float> got = outputs[0].realize({n, rows}, neptune::cpu_target());
        double worst = 0;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < n; c++) worst = std::max(worst, std::fabs(double(got(c, r)) - want(c, r)) / want(c, r));
        std::printf("fused vs unfused softmax: largest relative difference %.2g\n", worst);
        // Prints: fused vs unfused softmax: largest relative difference 2.3e-07 (fp32 rounding)
        if (!(worst < 1e-5)) {
            std::printf("lesson 3: the fused softmax differs from the unfused one\n");
            return 1;
        }
    }

    std::printf("Success!\n");
    return 0;
}
