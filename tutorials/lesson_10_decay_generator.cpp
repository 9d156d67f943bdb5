// Neptune tutorial lesson 10, the generator: attention with a score modifier no library has, written
// in plain Halide (README: "Add your own generator", step 1). lesson_10_custom_score_modifier.cpp
// follows the steps and checks the libraries built from it.
//
// The modifier: a temperature per query head and a penalty that grows with the log of the distance
// between query and key (a logarithmic bias in the style of KERPLE), also per head:
//   s(j, i, h, b) = (q . k) / sqrt(D) * inv_temp[h] - decay[h] * log(1 + |p_i - j|)
// with p_i = seq_kv - seq_q + i the query's position and no mask: every query sees every key.
//
// The tile backend lowers any score that is an elementwise function of the dot product, the query
// row, the key column, the head and batch, and 1-D f32 inputs indexed by the query head; the CPU
// form (backend=host) lowers anything Halide does.
#include <cmath>
#include <limits>

#include "GeneratorSupport.h"  // generators/: backend_names, lower_fused, schedule_host, require_attention_shapes
#include "Halide.h"
#include "neptune/Directives.h"

namespace {

using namespace Halide;

using neptune::generators::Backend;

class DecayAttention : public Generator<DecayAttention> {
public:
    GeneratorParam<Backend> backend{"backend", Backend::Gpu, neptune::generators::backend_names()};
    GeneratorParam<int> head_dim{"head_dim", 64};

    Input<Buffer<float16_t, 4>> q{"q"}, k{"k"}, v{"v"};  // q(d, i, h, b); k, v(d, j, hkv, b)
    Input<Buffer<float, 1>> inv_temp{"inv_temp"}, decay{"decay"};  // per query head
    Output<Buffer<float16_t, 4>> out{"out"};  // out(e, i, h, b)

    void generate() {
        Var d("d"), e("e"), i("i"), j("j"), h("h"), b("b");
        const Expr seq_q = q.dim(1).extent(), seq_kv = k.dim(1).extent();
        const Expr hk = h / (q.dim(2).extent() / k.dim(2).extent());  // the KV head of query head h

        // The scores: a dot product over the head dim, then the modifier.
        RDom rd(0, int(head_dim), "rd");
        Func qk("qk"), score("score");
        qk(j, i, h, b) = 0.0f;
        qk(j, i, h, b) += cast<float>(q(rd, i, h, b)) * cast<float>(k(rd, j, hk, b));
        const Expr distance = abs(cast<float>(seq_kv - seq_q + i) - cast<float>(j));
        score(j, i, h, b) =
            qk(j, i, h, b) * (1.0f / std::sqrt(float(int(head_dim)))) * inv_temp(h) - decay(h) * log(1.0f + distance);

        // Softmax over the keys, and the weighted sum of V: row_sum and acc need the final row_max.
        RDom kv(0, seq_kv, "kv");
        Func row_max("row_max"), row_sum("row_sum"), acc("acc"), attn("out");
        row_max(i, h, b) = -std::numeric_limits<float>::infinity();
        row_max(i, h, b) = max(row_max(i, h, b), score(kv, i, h, b));
        const Expr p = exp(score(kv, i, h, b) - row_max(i, h, b));
        row_sum(i, h, b) = 0.0f;
        row_sum(i, h, b) += p;
        acc(e, i, h, b) = 0.0f;
        acc(e, i, h, b) += p * cast<float>(v(e, kv, hk, b));
        attn(e, i, h, b) = cast<float16_t>(acc(e, i, h, b) / row_sum(i, h, b));

        // The Neptune schedule: fuse the sum and the accumulator with the max they read, rolling
        // over tiles of 64 keys. Neptune derives the rescaling exp(m - m') and proves it. Then the
        // group's backend: the fused CPU form (lower_to_cpu) or Neptune's kernels as an extern stage
        // (extern_stages), by the backend parameter.
        neptune::fuse_reduction({acc, row_sum}, RVar(kv.x)).rolling_update(64);
        neptune::ExternOptions o;
        o.head_dim_qk = head_dim;  // the kernels are compiled for it
        result_ = neptune::generators::lower_fused(attn, backend, get_target(), o, name());
        out = result_;

        // Checked on every call: head dims, and shapes that agree.
        for (Input<Buffer<float16_t, 4>> *t : {&q, &k, &v}) (*t).dim(0).set_extent(int(head_dim));
        neptune::generators::require_attention_shapes(*this, q, k, v);
        add_requirement(inv_temp.dim(0).extent() == q.dim(2).extent() && decay.dim(0).extent() == q.dim(2).extent(),
                        "inv_temp and decay must have one value per query head:", q.dim(2).extent());
    }

    void schedule() {
        if (backend == Backend::Host) { neptune::generators::schedule_host(result_); }
    }

private:
    Func result_;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(DecayAttention, decay_attention)
