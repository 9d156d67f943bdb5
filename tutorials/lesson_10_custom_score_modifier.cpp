// Neptune tutorial lesson 10: your own score modifier, from a generator to a linked library
//
// Attention variants differ mostly in what happens to the scores between the dot product and the
// softmax: a scale, a mask, a cap, a bias. Libraries ship a fixed menu of these. With Neptune the
// scores are a Halide Func like any other, so a modifier nobody has shipped is one line of the
// algorithm, and Neptune's schedule turns it into a fused kernel with it inside.
//
// This lesson is the walkthrough of the README's "Add your own generator", step by step, for
//   s(j, i, h, b) = (q . k) / sqrt(D) * inv_temp[h] - decay[h] * log(1 + |p_i - j|)
// a temperature per query head and a logarithmic distance penalty per head (p_i is the query's
// position; no mask). The README's steps, with this lesson's names:
//
// 1. Write the generator: tutorials/lesson_10_decay_generator.cpp, a Halide::Generator. It declares
//    its GeneratorParams (a `backend` of gpu or host, the head dim), its Input and Output buffers
//    (q, k, v, inv_temp, decay; out), and a generate() that writes the algorithm as Halide Funcs
//    (the formula above is its `score`), applies Neptune's directive and compiles the fused group
//    for the backend, with the helpers of generators/GeneratorSupport.h:
//      neptune::fuse_reduction({acc, row_sum}, RVar(kv.x)).rolling_update(64);
//      neptune::ExternOptions o;
//      o.head_dim_qk = head_dim;  // the kernels are compiled for it
//      result_ = neptune::generators::lower_fused(attn, backend, get_target(), o, name());
//      out = result_;
//    (lower_fused calls neptune::lower_to_cpu for host, neptune::extern_stages for gpu.) schedule()
//    schedules the CPU form (schedule_host), require_attention_shapes makes shapes that disagree
//    an error, and the file ends with HALIDE_REGISTER_GENERATOR(DecayAttention, decay_attention).
// 2. Add it to the table in generators/meson.build, one entry per library, with its sources (paths
//    relative to generators/; the two entries share the generator's binary):
//      'lesson_10_decay': {'generator': 'decay_attention', 'sources': files('../tutorials/lesson_10_decay_generator.cpp')},
//      'lesson_10_decay_host': {'generator': 'decay_attention', 'sources': files('../tutorials/lesson_10_decay_generator.cpp'),
//                               'params': ['backend=host']},
// 3. Link the libraries: in tutorials/meson.build (read after subdir('generators')),
//      executable('lesson_10_custom_score_modifier', 'lesson_10_custom_score_modifier.cpp',
//                 dependencies: [lesson_10_decay_dep, lesson_10_decay_host_dep])
// 4. Call them: #include "lesson_10_decay.h", then lesson_10_decay(q, k, v, inv_temp, decay, out) on
//    halide_buffer_t's, in the order the generator declared them; it returns 0 or a Halide error
//    code, with the message through halide_error (halide_set_error_handler). Build and run:
//    ninja -C build tutorials/lesson_10_custom_score_modifier, then the binary.
//
// The check is against an fp64 reference written below, from the formula alone: it shares no code
// with Neptune, so a wrong modifier, a wrong repair or a wrong kernel all show up as errors.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_10_custom_score_modifier
//   build/tutorials/lesson_10_custom_score_modifier [build/generators/lesson_10_decay.out.sm_80.tir]
#include <HalideBuffer.h>
#include <HalideRuntimeCuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "lesson_10_decay.h"  // the kernels on the GPU
#include "lesson_10_decay_host.h"  // the fused CPU form
#include "neptune/Half.h"
#include "neptune/runtime/NeptuneRuntime.h"

using Halide::Runtime::Buffer;

namespace {

std::string last_message;
void keep_message(void *, const char *message) {
    last_message = message;
    while (!last_message.empty() && last_message.back() == '\n') last_message.pop_back();
}

/** One problem: tensors row-major [batch, heads, sequence, head dim], values exactly as stored in f16. */
struct Problem {
    int batch, q_heads, kv_heads, seq_q, seq_kv, dim;
    std::vector<float> q, k, v, inv_temp, decay;
};

float to_f16_and_back(float x) { return neptune::f16_to_float(neptune::float_to_f16(x)); }

Problem make_problem(int batch, int q_heads, int kv_heads, int seq_q, int seq_kv, unsigned seed) {
    Problem p{batch, q_heads, kv_heads, seq_q, seq_kv, 64, {}, {}, {}, {}, {}};
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto fill = [&](std::vector<float> &t, size_t n) {
        t.resize(n);
        for (float &x : t) x = to_f16_and_back(normal(rng));
    };
    fill(p.q, size_t(batch) * q_heads * seq_q * p.dim);
    fill(p.k, size_t(batch) * kv_heads * seq_kv * p.dim);
    fill(p.v, size_t(batch) * kv_heads * seq_kv * p.dim);
    for (int h = 0; h < q_heads; h++) {
        p.inv_temp.push_back(0.5f + 0.5f * float(h % 4));  // 0.5, 1, 1.5, 2
        p.decay.push_back(0.4f * float(h % 3));  // 0, 0.4, 0.8
    }
    return p;
}

/** The formula, in double, one query row at a time. */
std::vector<double> reference(const Problem &p) {
    std::vector<double> out(size_t(p.batch) * p.q_heads * p.seq_q * p.dim);
    std::vector<double> s(size_t(p.seq_kv));
    for (int b = 0; b < p.batch; b++)
        for (int h = 0; h < p.q_heads; h++)
            for (int i = 0; i < p.seq_q; i++) {
                const int hk = h / (p.q_heads / p.kv_heads);
                const float *qi = &p.q[((size_t(b) * p.q_heads + h) * p.seq_q + i) * p.dim];
                const double pos = double(p.seq_kv - p.seq_q + i);
                double m = -INFINITY, l = 0;
                for (int j = 0; j < p.seq_kv; j++) {
                    const float *kj = &p.k[((size_t(b) * p.kv_heads + hk) * p.seq_kv + j) * p.dim];
                    double dot = 0;
                    for (int d = 0; d < p.dim; d++) dot += double(qi[d]) * double(kj[d]);
                    s[j] =
                        dot / std::sqrt(double(p.dim)) * p.inv_temp[h] - p.decay[h] * std::log(1 + std::fabs(pos - j));
                    m = std::max(m, s[j]);
                }
                double *o = &out[((size_t(b) * p.q_heads + h) * p.seq_q + i) * p.dim];
                for (int j = 0; j < p.seq_kv; j++) {
                    const double w = std::exp(s[j] - m);
                    l += w;
                    const float *vj = &p.v[((size_t(b) * p.kv_heads + hk) * p.seq_kv + j) * p.dim];
                    for (int e = 0; e < p.dim; e++) o[e] += w * double(vj[e]);
                }
                for (int e = 0; e < p.dim; e++) o[e] /= l;
            }
    return out;
}

/** A dense buffer of f16 values with Halide's dimension order (innermost first). */
Buffer<void> f16_buffer(const std::vector<float> &values, std::vector<int> extents) {
    Buffer<void> b(halide_type_t(halide_type_float, 16), extents);
    uint16_t *bits = static_cast<uint16_t *>(b.data());
    for (size_t n = 0; n < values.size(); n++) bits[n] = neptune::float_to_f16(values[n]);
    b.set_host_dirty();
    return b;
}

/** Runs `library` on `p` (inputs on the device when `device`) and returns the relative RMS error. */
template <typename Library>
double run_and_compare(Library library, const Problem &p, bool device, int &rc) {
    Buffer<void> q = f16_buffer(p.q, {p.dim, p.seq_q, p.q_heads, p.batch});
    Buffer<void> k = f16_buffer(p.k, {p.dim, p.seq_kv, p.kv_heads, p.batch});
    Buffer<void> v = f16_buffer(p.v, {p.dim, p.seq_kv, p.kv_heads, p.batch});
    Buffer<float> inv_temp(std::vector<int>{p.q_heads}), decay(std::vector<int>{p.q_heads});
    std::copy(p.inv_temp.begin(), p.inv_temp.end(), inv_temp.data());
    std::copy(p.decay.begin(), p.decay.end(), decay.data());
    if (device)
        for (Buffer<void> *t : {&q, &k, &v}) t->copy_to_device(halide_cuda_device_interface());
    Buffer<void> out(halide_type_t(halide_type_float, 16), {p.dim, p.seq_q, p.q_heads, p.batch});
    rc = library(q, k, v, inv_temp, decay, out);
    if (rc != 0) return INFINITY;
    out.copy_to_host();
    const std::vector<double> want = reference(p);
    double err = 0, norm = 0;
    for (size_t n = 0; n < want.size(); n++) {
        const double got = neptune::f16_to_float(static_cast<const uint16_t *>(out.data())[n]);
        if (!std::isfinite(got)) return INFINITY;
        err += (got - want[n]) * (got - want[n]);
        norm += want[n] * want[n];
    }
    return std::sqrt(err / norm);
}

}  // namespace

int main(int argc, char **argv) {
    halide_set_error_handler(keep_message);
    bool ok = true;

    // Two problems: 4 query heads sharing 2 KV heads over 200 keys (three tiles of 64 and a
    // partial one), first with as many queries as keys, then with 77 queries at the last positions
    // (p_i = 123 + i), as when a prompt continues a cached sequence.
    const std::vector<Problem> problems = {make_problem(2, 4, 2, 200, 200, 1), make_problem(1, 4, 2, 77, 200, 2)};

    {
        // The host library (the fused CPU form), against the formula. The error bound is f16's
        // rounding of the output (the library computes in f32): about 3e-4 relative RMS.
        for (const Problem &p : problems) {
            int rc = 0;
            const double e = run_and_compare(lesson_10_decay_host, p, false, rc);
            std::printf("host library, %d queries x %d keys: returned %d, relative RMS vs fp64 %.1e\n", p.seq_q,
                        p.seq_kv, rc, e);
            ok = ok && rc == 0 && e < 1e-3;
        }
        // Prints:
        //   host library, 200 queries x 200 keys: returned 0, relative RMS vs fp64 2.6e-04
        //   host library, 77 queries x 200 keys: returned 0, relative RMS vs fp64 2.6e-04
    }

    {
        // The GPU library: Neptune's kernels with the modifier inside. Without a GPU it is linked
        // but not run; its kernels were compiled by the build all the same (an sm_80 fatbin with
        // compute_90 PTX, an sm_90a cubin).
        if (neptune_cuda_available()) {
            for (const Problem &p : problems) {
                int rc = 0;
                const double e = run_and_compare(lesson_10_decay, p, true, rc);
                std::printf("GPU library, %d queries x %d keys: returned %d, relative RMS vs fp64 %.1e %s\n", p.seq_q,
                            p.seq_kv, rc, e, rc ? last_message.c_str() : "");
                ok = ok && rc == 0 && e < 2e-3;  // f16 probabilities into the tensor cores (lesson 7)
            }
        } else {
            std::printf("no GPU here: the GPU library was linked, not run\n");
        }
    }

    {
        // Where the modifier went: the build writes each kernel's tile program beside the library
        // (build/generators/lesson_10_decay.out.<arch>.tir; the test passes the sm_80 one). The
        // modifier is one elementwise map of the score tile s, right after the dot product. The
        // head's inputs are the same for every row of a block, so a lowering pass hoists them out
        // of the loop over key tiles as row vectors (s_r0, s_r1); the distance reads the row (the
        // query, q0 + row) and the column (the key, j * 64 + col) of each element.
        if (argc > 1) {
            std::ifstream tir(argv[1]);
            std::string line;
            int maps = 0;
            while (std::getline(tir, line)) {
                const bool modifier = line.find("// score modifier") != std::string::npos;
                if (modifier || (maps == 0 && line.find("// row-invariant part of s") != std::string::npos))
                    std::printf("%s\n", line.c_str());
                maps += modifier ? 1 : 0;
            }
            ok = ok && maps == 1;
            // Prints:
            //   s_r0 = row_map(inv_temp(h))  // row-invariant part of s
            //   s_r1 = row_map(decay(h))  // row-invariant part of s
            //     s = map(s * 0.125 * s_r0 - s_r1 * log(1 + abs(seq_kv - seq_q + q0 + row - (j * 64 + col))))  // score modifier
        }
    }

    {
        // The generator's own checks hold for a custom operator too. One temperature too many would
        // go unnoticed by the bounds checks (every access is in bounds); the requirement catches it.
        const Problem &p = problems[0];
        Buffer<void> q = f16_buffer(p.q, {p.dim, p.seq_q, p.q_heads, p.batch});
        Buffer<void> k = f16_buffer(p.k, {p.dim, p.seq_kv, p.kv_heads, p.batch});
        Buffer<void> v = f16_buffer(p.v, {p.dim, p.seq_kv, p.kv_heads, p.batch});
        Buffer<float> five(std::vector<int>{5}), four(std::vector<int>{4});
        Buffer<void> out(halide_type_t(halide_type_float, 16), {p.dim, p.seq_q, p.q_heads, p.batch});
        const int rc = lesson_10_decay_host(q, k, v, five, four, out);
        std::printf("5 temperatures for 4 heads: %d  %s\n", rc, last_message.c_str());
        ok = ok && rc == halide_error_code_requirement_failed;
        // Prints: 5 temperatures for 4 heads: -27  Requirement Failed: (...) inv_temp and decay must have one value per query head (4)
    }

    if (!ok) {
        std::printf("lesson 10: a check failed\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
