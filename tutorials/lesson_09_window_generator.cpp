// Neptune tutorial lesson 9, the generator: sliding-window attention as a Halide Generator with a
// Neptune schedule. lesson_09_generator.cpp narrates it and calls the libraries built from it.
//
// A Generator is a class that declares its parameters (fixed when the library is built), its
// input and output buffers (whose extents are run-time arguments), and a generate() that defines
// the pipeline. Halide's generator main compiles it ahead of time into a static library and a C
// header; the build runs it once per entry of the table in generators/meson.build:
//
//   'lesson_09_window':      {'generator': 'window_attention', 'sources': files('../tutorials/lesson_09_window_generator.cpp'),
//                             'params': ['window=96']},
//   'lesson_09_window_host': {'generator': 'window_attention', 'sources': files('../tutorials/lesson_09_window_generator.cpp'),
//                             'params': ['window=96', 'backend=host']},
//
// The algorithm is the suite's attention (include/neptune/algorithms/Algorithms.h) with the window
// mask: query row i (at position p = seq_kv - seq_q + i) sees the keys p - window < kv <= p.
#include "GeneratorSupport.h"  // generators/: backend_names, lower_fused, schedule_host, require_attention_shapes
#include "Halide.h"
#include "neptune/Directives.h"
#include "neptune/algorithms/Algorithms.h"

namespace {

using namespace Halide;

using neptune::generators::Backend;

class WindowAttention : public Generator<WindowAttention> {
public:
    // Parameters: `key=value` on the generator's command line ('params' in the table).
    // backend=gpu: Neptune's kernels, an extern stage of the pipeline; host: the fused CPU form.
    GeneratorParam<Backend> backend{"backend", Backend::Gpu, neptune::generators::backend_names()};
    GeneratorParam<int> window{"window", 128};  // keys a query sees, itself included
    GeneratorParam<int> head_dim{"head_dim", 64};  // the kernels are compiled for one head dim
    GeneratorParam<int> tile{"tile", 64};  // keys per tile of the rolling update

    // Tensors in Halide's order, innermost first: q(d, i, h, b) is Q[b, h, i, d] of a row-major
    // [batch, heads, sequence, head_dim] tensor. K and V may have fewer heads than Q (GQA).
    Input<Buffer<float16_t, 4>> q{"q"}, k{"k"}, v{"v"};
    Output<Buffer<float16_t, 4>> out{"out"};

    void generate() {
        // 1. The algorithm: plain Halide Funcs, over the inputs as Funcs and their run-time extents.
        neptune::AttentionSpec spec;
        spec.mask = neptune::Mask::Window;
        spec.window = window;
        spec.head_dim_qk = spec.head_dim_v = head_dim;
        neptune::algorithms::AttentionInputs in;
        in.q = q;
        in.k = k;
        in.v = v;
        in.seq_q = q.dim(1).extent();
        in.seq_kv = k.dim(1).extent();
        in.q_heads = q.dim(2).extent();
        in.kv_heads = k.dim(2).extent();
        in.head_dim_qk = head_dim;
        const neptune::algorithms::AttentionFuncs a = neptune::algorithms::attention(spec, neptune::DType::F16, in);

        // 2. The Neptune schedule: FlashAttention's recurrence over tiles of keys (lesson 7).
        neptune::fuse_reduction({a.acc, a.row_sum}, RVar(a.kv.x)).rolling_update(tile);

        // 3. The group's backend: for host, neptune::lower_to_cpu({a.out}), the fused CPU form (tiles
        // with the carried state, lesson 3); for gpu, neptune::extern_stages({a.out}, o), the group
        // as an extern stage of the pipeline that launches Neptune's kernels, compiled now by nvcc
        // for each GPU family and embedded in the library. lower_fused picks one. The stage replaces
        // the output Func, which Halide allows only while the Generator's outputs are being
        // defined: here in generate(), not in schedule().
        neptune::ExternOptions o;
        o.head_dim_qk = head_dim;  // the kernels are compiled for it
        // The kernels take the directive's tile. o.family_tile = true would give each GPU family its
        // own (128 keys under this window on sm_90a, 64 on sm_80), the directive's then shaping the
        // CPU form only: the attention generator does that when its tile is left at 0.
        result_ = neptune::generators::lower_fused(a.out, backend, get_target(), o, name());
        out = result_;

        // 4. What the library checks on every call, before any work: a wrong shape is an error code
        // and a message, never a silently wrong result. Constraints on extents...
        for (Input<Buffer<float16_t, 4>> *t : {&q, &k, &v}) (*t).dim(0).set_extent(int(head_dim));
        // ...and requirements between the buffers' shapes.
        neptune::generators::require_attention_shapes(*this, q, k, v);
    }

    void schedule() {
        // Neptune's extern stage schedules itself; the CPU form needs Halide schedules: its
        // reductions at root (the fused state carried from tile to tile), the output's batch in
        // parallel.
        if (backend == Backend::Host) { neptune::generators::schedule_host(result_); }
    }

private:
    Func result_;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(WindowAttention, window_attention)
