// Attention as Halide Generators: prefill (rolling update, FlashAttention-like) and decode (split-K
// update, FlashDecoding-like). backend=gpu compiles the fused group into Neptune's kernels, an extern
// stage of the pipeline; backend=host compiles its fused CPU form; backend=unfused the plain
// algorithm on Halide's CUDA backend, without the directive (the benchmark's "no fusion" ablation).
// Inputs are the suite's tensors (docs/design/operators.md): q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D],
// slopes [Hq] with ALiBi; output out [B, Hq, Sq, Dv]. Batch, heads and sequence lengths are run-time
// extents; the head dims are compile-time (the kernels are specialised for them).
#include "GeneratorSupport.h"
#include "neptune/GpuPipeline.h"
#include "neptune/Directives.h"
#include "neptune/Error.h"
#include "neptune/algorithms/Algorithms.h"
#include "neptune/algorithms/Schedules.h"

namespace neptune::generators {

namespace {

const std::map<std::string, Mask> mask_names = {{mask_name(Mask::None), Mask::None},
                                                {mask_name(Mask::Causal), Mask::Causal},
                                                {mask_name(Mask::Window), Mask::Window}};
const std::map<std::string, ScoreMod> mod_names = {{score_mod_name(ScoreMod::None), ScoreMod::None},
                                                   {score_mod_name(ScoreMod::Alibi), ScoreMod::Alibi},
                                                   {score_mod_name(ScoreMod::Softcap), ScoreMod::Softcap}};

/** What prefill and decode share: parameters, signature, the algorithm, and the two backends. */
template <typename G>
class AttentionGenerator : public NeptuneGenerator<G> {
public:
    using NeptuneGenerator<G>::backend;
    using NeptuneGenerator<G>::dtype;
    using NeptuneGenerator<G>::sig_;
    template <typename T>
    using GeneratorParam = Halide::GeneratorParam<T>;

    GeneratorParam<Mask> mask{"mask", Mask::Causal, mask_names};
    GeneratorParam<int> window{"window", 4096};  // keys a query sees with mask=window, itself included
    GeneratorParam<ScoreMod> score_mod{"score_mod", ScoreMod::None, mod_names};
    GeneratorParam<float> softcap{"softcap", 50.0f};
    /** Query heads per KV head: 0 any (prefill); decode kernels are compiled for it (default 1). */
    GeneratorParam<int> group{"group", 0};
    GeneratorParam<int> head_dim{"head_dim", 128};
    GeneratorParam<int> head_dim_v{"head_dim_v", 0};  // 0: head_dim
    // Tile parameters: keys per tile (the directive's tile; 0: 64 for the CPU form (32 for decode) and
    // each GPU family's own tiles for the kernels, as the JIT's: ExternOptions::family_tile), warps per
    // block, pipelined copies, the register cap's blocks per SM (0 none, -1 the GPU family's default).
    GeneratorParam<int> tile{"tile", 0};
    GeneratorParam<int> warps{"warps", 0};
    GeneratorParam<int> stages{"stages", 0};
    GeneratorParam<int> min_blocks{"min_blocks", -1};
    /** lse: the library also returns each query row's log-sum-exp (lse [B, Hq, Sq], f32); all: its
     * log-sum-exp, entropy and largest probability (lse, entropy, max_prob); written by the same
     * kernels as out. */
    GeneratorParam<RowStats> row_stats{
        "row_stats", RowStats::None, {{"none", RowStats::None}, {"lse", RowStats::Lse}, {"all", RowStats::All}}};

    void configure() { sig_ = declare_signature(*this, spec()); }

    OperatorSpec spec() {
        OperatorSpec s;
        s.name = this->name();
        s.family = Family::Attention;
        s.dtype = element_type(dtype, this->name());
        s.row_stats = row_stats;
        AttentionSpec &a = s.attention;
        a.decode = G::decode;
        a.mask = mask;
        a.window = window;
        a.mod = score_mod;
        a.softcap = softcap;
        a.head_dim_qk = head_dim;
        a.head_dim_v = head_dim_v > 0 ? int(head_dim_v) : int(head_dim);
        a.q_heads = std::max(int(group), 1);  // shapes only: run-time extents decide
        a.kv_heads = 1;
        return s;
    }

    /** The algorithm over `q` (the input, or a Func computed from it) and the other inputs. */
    algorithms::OperatorFuncs algorithm(const OperatorSpec &s, Halide::Func q) {
        std::vector<Halide::Func> in = input_funcs(sig_);
        in[0] = q;
        return algorithms::build_from(s, in, [&](size_t i, int d) { return input_extent(sig_, i, d); });
    }

    /** The Neptune schedule: the directive, then the group's backend. The extern stage replaces the
     * output Func, which Halide allows only while outputs are defined, so this runs in generate();
     * the Halide schedules of the other stages are in schedule(). */
    void fuse_and_lower(const OperatorSpec &s, algorithms::OperatorFuncs &f, int chunks) {
        if (backend == Backend::Unfused) {
            // The ablation: no directive, so row_sum and acc wait for the final row_max and every
            // reduction is a kernel of its own (schedule_output).
            this->require_cuda();
            outputs_ = f.outputs;
            for (size_t o = 0; o < outputs_.size(); o++) *sig_.outputs[o] = outputs_[o];
            require_shapes(s);
            return;
        }
        algorithms::FusionChoice choice;
        choice.variant = G::decode ? algorithms::FusionVariant::SplitK : algorithms::FusionVariant::Rolling;
        choice.tile = tile > 0 ? int(tile) : (G::decode ? 32 : 64);  // with tile 0, the CPU form's only
        choice.chunks = chunks > 0 ? chunks : 4;  // the CPU form's chunks; the GPU picks its own at run time
        algorithms::fuse_operator(s, f, choice);
        ExternOptions o;
        o.head_dim_qk = s.attention.head_dim_qk;
        o.head_dim_v = s.attention.head_dim_v;
        o.group = G::decode ? std::max(int(group), 1) : int(group);
        o.family_tile = tile <= 0;
        o.warps = warps;
        o.stages = stages;
        o.min_blocks = min_blocks;
        o.chunks = chunks;
        outputs_ = lower_fused(f.outputs, backend, this->get_target(), o, this->name());
        for (size_t k = 0; k < outputs_.size(); k++) *sig_.outputs[k] = outputs_[k];
        require_shapes(s);
    }

    void require_shapes(const OperatorSpec &s) {
        require_attention_shapes(*this, *sig_.inputs[0], *sig_.inputs[1], *sig_.inputs[2]);
        if (s.attention.mod == ScoreMod::Alibi)
            this->add_requirement(sig_.inputs[3]->dim(0).extent() == sig_.inputs[0]->dim(2).extent(),
                                  "slopes must have one value per query head:", sig_.inputs[0]->dim(2).extent());
    }

    void schedule_output() {
        for (const Halide::Func &o : outputs_) {
            if (backend == Backend::Host) schedule_host(o);
            if (backend == Backend::Unfused) schedule_cuda(o);
        }
    }

protected:
    std::vector<Halide::Func> outputs_;
};

class PrefillAttention : public AttentionGenerator<PrefillAttention> {
public:
    static constexpr bool decode = false;
    /** Non-zero: q is first scaled by this factor in a Halide stage of its own (on the GPU with
     * backend=gpu), and the score scale divided by it: a pipeline mixing a Halide CUDA stage with
     * Neptune's extern stage. A power of two leaves the result unchanged. */
    GeneratorParam<float> q_scale{"q_scale", 0.0f};

    void generate() {
        OperatorSpec s = spec();
        Halide::Func q = *sig_.inputs[0];
        if (q_scale != 0.0f) {
            Halide::Var d("d"), i("i"), h("h"), b("b");
            q_scaled_ = Halide::Func("q_scaled");
            q_scaled_(d, i, h, b) = Halide::cast(q.type(), Halide::cast<float>(q(d, i, h, b)) * float(q_scale));
            // A stage of its own (the group reads it as an input): decided before the group is lowered.
            q_scaled_.compute_root();
            q = q_scaled_;
            s.attention.scale = s.attention.score_scale() / double(q_scale);
        }
        algorithms::OperatorFuncs f = algorithm(s, q);
        fuse_and_lower(s, f, 0);
    }

    void schedule() {
        if (q_scaled_.defined() && backend != Backend::Host) schedule_gpu_pointwise(q_scaled_);
        schedule_output();
    }

private:
    Halide::Func q_scaled_;
};

class DecodeAttention : public AttentionGenerator<DecodeAttention> {
public:
    static constexpr bool decode = true;
    /** Split-K chunks: 0 chosen at run time from the SM count and the shape (backend=gpu). */
    GeneratorParam<int> chunks{"chunks", 0};

    void generate() {
        const OperatorSpec s = spec();
        algorithms::OperatorFuncs f = algorithm(s, *sig_.inputs[0]);
        fuse_and_lower(s, f, chunks);
    }

    void schedule() { schedule_output(); }
};

}  // namespace

}  // namespace neptune::generators

HALIDE_REGISTER_GENERATOR(neptune::generators::PrefillAttention, prefill_attention)
HALIDE_REGISTER_GENERATOR(neptune::generators::DecodeAttention, decode_attention)
