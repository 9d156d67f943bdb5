// Neptune tutorial lesson 4: split_k_update (FlashDecoding) and companions (LayerNorm)
//
// rolling_update (lesson 3) walks a row's tiles in order, so a row is one sequential loop. When
// there are few rows and each is long (decoding: one query row per head against thousands of
// keys), that loop cannot fill a GPU. split_k_update(P, T) cuts the reduction into P independent
// chunks, each rolling over tiles of T positions on its own, and merges their partial states with
// the same repair h in a combine step (docs/design/fusion.md, split-K update). On attention that is FlashDecoding.
//
// Not every map gets a one-number repair. The variance of LayerNorm, sum_j (x_j - mean)^2 with
// the mean a producer, mixes producer and data; Neptune carries "companions" (further partial
// sums) whose combination repairs it exactly, which is Chan's parallel variance update
// (docs/design/fusion.md, multi-moment states). The second half of the lesson shows them.
//
// Which variant to pick: rolling when the pure indices (rows, heads, batch) already give the
// machine enough independent loops, as in prefill; split-K when they do not, as in decoding or a
// few very long rows. Split-K costs a combine step and partial states that travel through memory
// in fp32; rolling costs nothing beyond the repair but runs each row's tiles one after another.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_04_split_k_update
//   build/tutorials/lesson_04_split_k_update
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "Halide.h"
#include "neptune/Directives.h"
#include "neptune/HalideCpu.h"

using namespace Halide;

namespace {

// Decoding attention for one query against `keys` keys of dimension d: scores s_j = q . k_j / sqrt(d),
// out(e) = sum_j exp(s_j - m) v(e, j) / sum_j exp(s_j - m). Division by the sum happens once, after
// the loop (docs/design/fusion.md, factoring out), so acc needs only the max's repair.
//   score    a reduction over the head dimension rd, not over kv: to the fusion it is just a value
//            that varies along kv, like the input x of lesson 3;
//   row_max  the producer, read by both targets;
//   row_sum, acc  the targets (acc has one value per output column e);
//   out      the epilogue, which reads the final values of both targets.
struct Decode {
    Var e{"e"}, j{"j"}, i{"i"};
    RDom kv, rd;
    Func score, row_max, row_sum, acc, out;
    Decode(const Buffer<float> &q, const Buffer<float> &k, const Buffer<float> &v, const std::string &suffix)
        : kv(0, k.dim(1).extent(), "kv"),
          rd(0, q.dim(0).extent(), "rd"),
          score("score" + suffix),
          row_max("row_max" + suffix),
          row_sum("row_sum" + suffix),
          acc("acc" + suffix),
          out("out" + suffix) {
        const float scale = 1.0f / std::sqrt(float(q.dim(0).extent()));  // the usual 1 / sqrt(d)
        score(j, i) = 0.0f;
        score(j, i) += q(rd, i) * k(rd, j) * scale;
        row_max(i) = -std::numeric_limits<float>::infinity();
        row_max(i) = max(row_max(i), score(kv, i));
        row_sum(i) = 0.0f;
        row_sum(i) += exp(score(kv, i) - row_max(i));
        acc(e, i) = 0.0f;
        acc(e, i) += exp(score(kv, i) - row_max(i)) * v(e, kv);
        out(e, i) = acc(e, i) / row_sum(i);
    }
};

// The largest difference between two buffers of one shape, relative to the largest value: an
// element near 0 (an output whose terms cancel) would inflate an element-wise relative error.
double largest_difference(const Buffer<float> &got, const Buffer<float> &want) {
    double diff = 0, scale = 0;
    want.for_each_element([&](const int *pos) {
        diff = std::max(diff, std::fabs(double(got(pos)) - want(pos)));
        scale = std::max(scale, std::fabs(double(want(pos))));
    });
    return diff / std::max(scale, 1e-30);
}

// Realizes f on the CPU, every reduction it depends on computed once at root (lesson 1).
Buffer<float> realize(Func f, const std::vector<int> &sizes) {
    neptune::schedule_reductions_at_root({f});
    return f.realize(sizes, neptune::cpu_target());
}

}  // namespace

int main() {
    // One query row, 5000 keys, head dimension 16: a decoding step. Keys and values are smooth
    // functions of the position, with a slow ramp on the scores so that the maximum keeps rising
    // along the row and every repair really rescales. The chunks then end with different maxima,
    // and the combine has real rescaling to do. The plain (unfused) algorithm is the reference.
    const int d = 16, keys = 5000;
    Buffer<float> q({d, 1}, "q"), k({d, keys}, "k"), v({d, keys}, "v");
    for (int c = 0; c < d; c++) q(c, 0) = std::cos(float(c));
    for (int j = 0; j < keys; j++)
        for (int c = 0; c < d; c++) {
            k(c, j) = std::sin(float(j * (c + 1)) * 0.01f) + 0.0004f * float(j) * q(c, 0);
            v(c, j) = std::cos(float(j + 3 * c) * 0.02f);
        }
    // The reference is realized once and compared with every fused variant below. Each fused
    // variant is a fresh copy of the algorithm: directives and lower_to_cpu change Funcs in place,
    // as Halide schedules do, so one copy cannot serve as both.
    Decode plain(q, k, v, "");
    const Buffer<float> want = realize(plain.out, {d, 1});
    bool ok = true;

    {
        // The directive: both targets (the output accumulator and the normaliser) over kv, cut
        // into 7 chunks, each rolling over tiles of 128 keys. 5000 keys make 40 tiles; the
        // chunks take 6 tiles each and the last takes 4: nothing has to divide anything.
        //
        // describe() shows one repair per target, and it serves twice: inside a chunk it rescales
        // the running partial whenever that chunk's max rises (as in lesson 3), and in the
        // combine it rescales each chunk's partial from the chunk's max m_p to the global max m:
        //   m = max_p m_p,   acc = sum_p acc_p * exp(m_p - m),   row_sum likewise.
        // That combine is FlashDecoding's, derived here from the definition of acc. Each chunk p
        // ends with its own state (m_p, row_sum_p, acc_p), computed as if its keys were the whole
        // row; nothing in a chunk waits for another chunk.
        Decode fused(q, k, v, "_fused");
        neptune::FusedReduction group =
            neptune::fuse_reduction({fused.acc, fused.row_sum}, RVar(fused.kv.x)).split_k_update(7, 128);
        std::printf("%s", group.describe().c_str());
        // Prints:
        //   fuse_reduction(acc_fused, row_sum_fused, kv): split-K update, tiles of 128, 7 chunks
        //     row_max_fused(i) = max over kv of score_fused(kv, i)
        //     acc_fused(e, i) = + over kv of exp(score_fused(kv, i) - row_max_fused) * v(e, kv)
        //         repair (rescale): h = t * exp(row_max_fused - row_max_fused')
        //         proof: ...
        //     row_sum_fused(i) = + over kv of exp(score_fused(kv, i) - row_max_fused)
        //         repair (rescale): h = t * exp(row_max_fused - row_max_fused')
        //         proof: ...
        // Both targets read the same producer through the same kind of term, so they get the same
        // h; acc applies it to each of its d columns. The max itself needs no repair: a max of
        // maxima is the max.

        // lower_to_cpu gives every stage a state per (tile, chunk) and a combine Func (such as
        // acc_fused_combined) that reduces over the chunk index. out, the division, still runs
        // once after everything, on the combined values. On a GPU the chunk index becomes a grid
        // dimension: 7 thread blocks share one row that a rolling loop would give to one.
        const Func lowered = neptune::lower_to_cpu({fused.out})[0];
        const double worst = largest_difference(realize(lowered, {d, 1}), want);
        std::printf("decode attention, split-K vs unfused: largest relative difference %.2g\n", worst);
        // Prints: decode attention, split-K vs unfused: largest relative difference 1.8e-06
        // That is fp32 rounding: the 5000 terms are added in another order, and rounding errors of
        // a sum grow with its length.
        ok = ok && worst < 1e-5;
    }

    {
        // More chunks than tiles: 64 chunks for 40 tiles leaves 24 chunks empty. An empty chunk
        // has max -inf and sums 0, the identities of its reducers, and the combine treats it as
        // nothing: its state is never rescaled (which could form 0 * inf).
        Decode fused(q, k, v, "_empty_chunks");
        neptune::fuse_reduction({fused.acc, fused.row_sum}, RVar(fused.kv.x)).split_k_update(64, 128);
        const double worst = largest_difference(realize(neptune::lower_to_cpu({fused.out})[0], {d, 1}), want);
        std::printf("64 chunks for 40 tiles: largest relative difference %.2g\n", worst);
        // Prints: 64 chunks for 40 tiles: largest relative difference 1.8e-06
        ok = ok && worst < 1e-5;
    }

    {
        // LayerNorm's variance. The map (x - sum_x / n)^2 = x^2 - 2 x sum_x / n + sum_x^2 / n^2
        // mixes the producer sum_x with the data, and no single factor re-expresses a partial sum
        // under a new sum_x. But the map is a polynomial in sum_x, so Neptune carries its Taylor
        // coefficients as companions: t[d sum_x], the sum of the terms' first derivatives in
        // sum_x, and t[d2 sum_x], the sum of half their second derivatives (1 / n^2 per term: it
        // counts positions). From s to a new producer value s', the expansion is exact:
        //   t' = t + t[d sum_x] (s' - s) + t[d2 sum_x] (s' - s)^2
        // and the companions get their own such updates (t[d sum_x]' = t[d sum_x] + 2 t[d2 sum_x]
        // (s' - s), and t[d2 sum_x] does not change). Algebraically, merging two chunks this way is
        // the pairwise variance update of Chan, Golub and LeVeque. Companions are derived for maps
        // up to degree 4 in the producers; beyond that fuse_reduction raises a CompileError.
        //
        // mean is a pure Func between the two reductions: Neptune looks through it and finds that
        // m2 reads the reduction sum_x. The check is against the two-pass variance in fp64, and
        // allows 1e-4: the split-K sum is reassociated, and every companion update rounds a few
        // times. The rows have a mean near 0.8 and a spread near 0.7.
        const int n = 3000, rows = 2;
        Buffer<float> x({n, rows}, "x");
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < n; c++) x(c, r) = 0.5f + std::sin(float(c * (r + 2)) * 0.013f) + 0.0002f * float(c);
        Var i("i");
        RDom kv(0, n, "kv");
        Func sum_x("sum_x"), mean("mean"), m2("m2_sum");
        sum_x(i) = 0.0f;
        sum_x(i) += x(kv, i);
        mean(i) = sum_x(i) / float(n);
        m2(i) = 0.0f;
        m2(i) += (x(kv, i) - mean(i)) * (x(kv, i) - mean(i));
        neptune::FusedReduction group = neptune::fuse_reduction(m2, RVar(kv.x)).split_k_update(4, 64);
        std::printf("%s", group.describe().c_str());
        // Prints (abridged; 3000 is the row length n):
        //   fuse_reduction(m2_sum, kv): split-K update, tiles of 64, 4 chunks
        //     sum_x(i) = + over kv of x(kv, i)
        //     m2_sum(i) = + over kv of (x(kv, i) - sum_x / 3000) * (x(kv, i) - sum_x / 3000)
        //         repair (rescale with companions): h = t + t[d sum_x] * (sum_x' - sum_x)
        //                                             + t[d2 sum_x] * (... the square of that difference)
        //         companion t[d sum_x] = sum of 2.22222e-07 * sum_x - 0.000666667 * x(kv, i)
        //         companion t[d2 sum_x] = sum of 1.11111e-07
        const Buffer<float> got = realize(neptune::lower_to_cpu({m2})[0], {rows});
        for (int r = 0; r < rows; r++) {
            double mu = 0, want = 0;
            for (int c = 0; c < n; c++) mu += x(c, r) / double(n);
            for (int c = 0; c < n; c++) want += (x(c, r) - mu) * (x(c, r) - mu);
            std::printf("row %d: m2 split-K %.6g, fp64 %.6g\n", r, got(r), want);
            ok = ok && std::fabs(got(r) - want) <= 1e-4 * want;
        }
        // Prints:
        //   row 0: m2 split-K 1593.54, fp64 1593.54
        //   row 1: m2 split-K 1578.49, fp64 1578.49
    }

    // A failed check exits non-zero, so `meson test --suite tutorial` reports it.
    if (!ok) {
        std::printf("lesson 4: a fused result differs from the unfused one\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
