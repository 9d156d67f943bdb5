// Neptune tutorial lesson 4: split_k_update (FlashDecoding) and companions (LayerNorm)
//
// rolling_update (lesson 3) walks a row's tiles in order, so a row is one sequential loop. When
// there are few rows and each is long (decoding: one query row per head against thousands of
// keys), that loop cannot fill a GPU. split_k_update(P, T) cuts the reduction into P independent
// chunks, each rolling over tiles of T positions on its own, and merges their partial states with
// the same repair h in a combine step (FUSION.md §5). On attention that is FlashDecoding.
//
// Not every map gets a one-number repair. The variance of LayerNorm, sum_j (x_j - mean)^2 with
// the mean a producer, mixes producer and data; Neptune carries "companions" (further partial
// sums) whose combination repairs it exactly, which is Chan's parallel variance update
// (FUSION.md §11.4). The second half of the lesson shows them.
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
// the loop (FUSION.md §3.2), so acc needs only the max's repair.
struct Decode {
    Var e{"e"}, j{"j"}, i{"i"};
    RDom kv, rd;
    Func score, row_max, row_sum, acc, out;
    Decode(const Buffer<float> &q, const Buffer<float> &k, const Buffer<float> &v, const std::string &suffix)
        : kv(0, k.dim(1).extent(), "kv"), rd(0, q.dim(0).extent(), "rd"), score("score" + suffix),
          row_max("row_max" + suffix), row_sum("row_sum" + suffix), acc("acc" + suffix), out("out" + suffix) {
        const float scale = 1.0f / std::sqrt(float(q.dim(0).extent()));
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

// LayerNorm statistics of each row: the mean (a producer) and m2 = sum (x - mean)^2.
struct Moments {
    Var i{"i"};
    RDom kv;
    Func sum_x, mean, m2;
    Moments(const Buffer<float> &x, const std::string &suffix)
        : kv(0, x.dim(0).extent(), "kv"), sum_x("sum_x" + suffix), mean("mean" + suffix), m2("m2" + suffix) {
        sum_x(i) = 0.0f;
        sum_x(i) += x(kv, i);
        mean(i) = sum_x(i) / float(x.dim(0).extent());
        m2(i) = 0.0f;
        m2(i) += (x(kv, i) - mean(i)) * (x(kv, i) - mean(i));
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

Buffer<float> realize(Func f, const std::vector<int> &sizes) {
    neptune::schedule_reductions_at_root({f});
    return f.realize(sizes, neptune::cpu_target());
}

}  // namespace

int main() {
    bool ok = true;

    {
        // One query row, 5000 keys, head dimension 16. Keys and values are smooth functions of
        // the position plus a slow ramp on the scores, so the maximum keeps rising along the row.
        const int d = 16, keys = 5000;
        Buffer<float> q({d, 1}, "q"), k({d, keys}, "k"), v({d, keys}, "v");
        for (int c = 0; c < d; c++) q(c, 0) = std::cos(float(c));
        for (int j = 0; j < keys; j++)
            for (int c = 0; c < d; c++) {
                k(c, j) = std::sin(float(j * (c + 1)) * 0.01f) + 0.0004f * float(j) * q(c, 0);
                v(c, j) = std::cos(float(j + 3 * c) * 0.02f);
            }
        Decode plain(q, k, v, ""), fused(q, k, v, "_fused");

        // The directive: both targets (the output accumulator and the normaliser) over kv, cut
        // into 8 chunks, each rolling over tiles of 128 keys. describe() shows, per target, the
        // repair that both rolls within a chunk and merges the chunks: for the accumulator it is
        // the FlashDecoding combine, acc = sum_p acc_p * exp(m_p - m) with m the global max. The
        // accumulator reads the max through the guarded value select(m == -inf, 0, m) only where
        // the user wrote it; here the scores are never masked.
        neptune::FusedReduction group =
            neptune::fuse_reduction({fused.acc, fused.row_sum}, RVar(fused.kv.x)).split_k_update(8, 128);
        std::printf("%s", group.describe().c_str());
        // Prints:
        //   fuse_reduction(acc_fused, row_sum_fused, kv): split-K update, tiles of 128, 8 chunks
        //     row_max_fused(i) = max over kv of score_fused(kv, i)
        //     acc_fused(e, i) = + over kv of exp(score_fused(kv, i) - row_max_fused) * v(e, kv)
        //         repair (rescale): h = t * exp(row_max_fused - row_max_fused')
        //         proof: ...
        //     row_sum_fused(i) = + over kv of exp(score_fused(kv, i) - row_max_fused)
        //         repair (rescale): h = t * exp(row_max_fused - row_max_fused')
        //         proof: ...

        // lower_to_cpu gives every stage a combine Func (acc_fused_combined) that reduces over
        // the chunk index: the max of the chunks' maxima, then each chunk's partial rescaled to
        // the global max and summed. Nothing else changes from the rolling form.
        const Func lowered = neptune::lower_to_cpu({fused.out})[0];
        const double worst = largest_difference(realize(lowered, {d, 1}), realize(plain.out, {d, 1}));
        std::printf("decode attention, split-K vs unfused: largest relative difference %.2g\n", worst);
        // Prints: decode attention, split-K vs unfused: largest relative difference 1.8e-06
        // That is fp32 rounding: the 5000 terms are added in another order, and rounding errors of
        // a sum grow with its length.
        ok = ok && worst < 1e-5;
    }

    {
        // The chunk count and the tile size do not have to divide anything: 5000 keys in tiles of
        // 700 make 8 tiles, which 3 chunks share as 3 + 3 + 2. With more chunks than tiles, the
        // extra chunks are empty and combine as the identity.
        const int d = 4, keys = 5000;
        Buffer<float> q({d, 1}, "q4"), k({d, keys}, "k4"), v({d, keys}, "v4");
        for (int c = 0; c < d; c++) q(c, 0) = 1.0f;
        for (int j = 0; j < keys; j++)
            for (int c = 0; c < d; c++) {
                k(c, j) = std::sin(float(j + c) * 0.37f);
                v(c, j) = float(c) - std::cos(float(j) * 0.11f);
            }
        Decode plain(q, k, v, "_ragged");
        const Buffer<float> want = realize(plain.out, {d, 1});
        for (int chunks : {3, 12}) {
            Decode fused(q, k, v, "_ragged_fused");
            neptune::fuse_reduction({fused.acc, fused.row_sum}, RVar(fused.kv.x)).split_k_update(chunks, 700);
            const double worst = largest_difference(realize(neptune::lower_to_cpu({fused.out})[0], {d, 1}), want);
            std::printf("%2d chunks of 700-key tiles: largest relative difference %.2g\n", chunks, worst);
            // Prints a difference of 1.3e-06 for 3 chunks and for 12.
            ok = ok && worst < 1e-5;
        }
    }

    {
        // LayerNorm's variance. The map (x - sum_x / n)^2 = x^2 - 2 x sum_x / n + sum_x^2 / n^2 is
        // polynomial in the producer, so Neptune carries its Taylor coefficients in the producer
        // as companions: t[d sum_x] = sum of d/d(sum_x) of the term, and t[d2 sum_x] (constant per
        // term: it counts the positions). A new producer value s' repairs all three exactly:
        //   t' = t + t[d sum_x] (s' - s) + t[d2 sum_x] (s' - s)^2
        // Algebraically, merging two chunks this way is the pairwise update of Chan, Golub and
        // LeVeque.
        const int n = 3000, rows = 2;
        Buffer<float> x({n, rows}, "x");
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < n; c++) x(c, r) = 0.5f + std::sin(float(c * (r + 2)) * 0.013f) + 0.0002f * float(c);
        Moments plain(x, ""), fused(x, "_fused");
        neptune::FusedReduction group = neptune::fuse_reduction(fused.m2, RVar(fused.kv.x)).split_k_update(4, 64);
        std::printf("%s", group.describe().c_str());
        // Prints (abridged; n is the row length, 3000):
        //   fuse_reduction(m2_fused, kv): split-K update, tiles of 64, 4 chunks
        //     sum_x_fused(i) = + over kv of x(kv, i)
        //     m2_fused(i) = + over kv of (x(kv, i) - sum_x_fused / 3000) * (x(kv, i) - sum_x_fused / 3000)
        //         repair (rescale with companions): h = t + t[d sum_x_fused] * (sum_x_fused' - sum_x_fused) + ...
        //         companion t[d sum_x_fused] = sum of ...
        //         companion t[d2 sum_x_fused] = sum of ...
        const double worst = largest_difference(realize(neptune::lower_to_cpu({fused.m2})[0], {rows}),
                                                realize(plain.m2, {rows}));
        std::printf("LayerNorm m2, split-K vs unfused: largest relative difference %.2g\n", worst);
        // Prints: LayerNorm m2, split-K vs unfused: largest relative difference 2.3e-07
        ok = ok && worst < 1e-4;
    }

    if (!ok) {
        std::printf("lesson 4: a fused result differs from the unfused one\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
