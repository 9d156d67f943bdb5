// The JIT entry point on the GPU: an algorithm, its directives and compile_gpu(), realized on Halide
// buffers and compared with the fp64 reference; modifiers of the test's own reading 1-D int32 and f32
// inputs, against the algorithm unfused on Halide's CPU backend; and a JIT pipeline where Halide CUDA
// stages run on both sides of Neptune's stage (q pre-scaled before it, the output doubled after it)
// in one CUDA context, on device buffers throughout. Skips (77) without a GPU; links libHalide (shipped with
// scripts/gpu/prepare.sh), as the other JIT GPU tests do.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include <sstream>
#include <string>

#include "Compare.h"
#include "CustomAttention.h"
#include "neptune/GpuPipeline.h"
#include "neptune/Half.h"
#include "neptune/HalideCpu.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/reference/Reference.h"
#include "neptune/runtime/NeptuneHalide.h"
#include "neptune/runtime/NeptuneRuntime.h"

using namespace neptune;
using namespace neptune::testing;

namespace {

const Tolerance attention_tolerance{2e-3, 2e-2};  // as correctness/gpu_attention (P rounded to f16)

OperatorInstance instance(const std::string &op, int q_heads, int kv_heads, int64_t batch, int64_t seq) {
    OperatorSpec s = *find_operator(op);
    s.attention.q_heads = q_heads;
    s.attention.kv_heads = kv_heads;
    return instantiate(s, batch, seq);
}

HostTensor read(Halide::Buffer<> &b, const TensorDesc &d) {
    const bool copied = b.raw_buffer()->device_interface == nullptr || b.copy_to_host() == 0;
    REQUIRE_MESSAGE(copied, "copying " << d.name << " back failed");
    HostTensor t(d);
    t.load(b.data());
    return t;
}

void check_operator(const OperatorInstance &inst, int group) {
    INFO(inst.spec.name << " at " << inst.batch << "," << inst.seq);
    algorithms::OperatorFuncs f = algorithms::build(inst.spec);
    algorithms::FusionChoice choice;
    if (inst.spec.attention.decode) {
        choice.variant = algorithms::FusionVariant::SplitK;
        choice.tile = 32;
    }
    algorithms::fuse_operator(inst.spec, f, choice);
    ExternOptions o;
    o.head_dim_qk = inst.spec.attention.head_dim_qk;
    o.group = group;
    GpuPipeline p = compile_gpu(f.outputs, o);
    const std::vector<HostTensor> in = make_inputs(inst, 9, InputStyle::RisingScores);
    std::vector<Halide::Buffer<>> bound;
    for (size_t i = 0; i < in.size(); i++) {
        bound.push_back(to_halide_buffer(in[i]));
        f.inputs[i].set(bound.back());
    }
    Halide::Buffer<> out = to_halide_buffer(make_outputs(inst)[0]);
    p.realize(out);
    check_close("out", read(out, inst.outputs[0]), reference::compute(inst, in)[0], attention_tolerance);
}

// What Neptune's stage was handed, for the failure message: every buffer's memory, flags and
// dimensions, and the RMS of the first f16 values of the device memory of each input (read after the
// stage ran, so a zero RMS says the producer's values were not there).
std::string extern_calls;
void record_call(const neptune_halide_trace_event *e) {
    if (e->bounds_query) return;
    std::ostringstream os;
    os << e->stage << " (" << e->kernel_set << ") returned " << e->result << ":";
    neptune_synchronize();
    for (int i = 0; i < e->num_buffers; i++) {
        const halide_buffer_t *b = e->buffers[i];
        os << "\n  " << e->buffer_names[i] << ": device " << (b->device ? "yes" : "no") << ", host "
           << (b->host ? "yes" : "no") << ", host dirty " << b->host_dirty() << ", device dirty " << b->device_dirty()
           << ", dims";
        for (int d = 0; d < b->dimensions; d++)
            os << " [" << b->dim[d].min << ", " << b->dim[d].extent << ", stride " << b->dim[d].stride << "]";
        if (b->device && b->type.bits == 16) {
            std::vector<uint16_t> first(4096);
            if (neptune_memcpy_dtoh(first.data(), reinterpret_cast<void *>(uintptr_t(b->device)), first.size() * 2) ==
                0) {
                double ss = 0;
                for (uint16_t h : first) ss += double(f16_to_float(h)) * f16_to_float(h);
                os << ", rms of its first 4096 values on the device " << std::sqrt(ss / 4096);
            }
        }
    }
    extern_calls += os.str() + "\n";
}

/** A JIT pipeline with Halide CUDA stages around Neptune's: q pre-scaled by 0.5 before it (the
 * score scale doubled to match), the output doubled after it; on device buffers throughout. */
void check_mixed_pipeline(bool before, bool after) {
    INFO("Halide CUDA stage before: " << before << ", after: " << after);
    const OperatorInstance inst = instance("prefill_causal", 4, 2, 1, 129);
    Halide::ImageParam q(Halide::Float(16), 4, "q"), k(Halide::Float(16), 4, "k"), v(Halide::Float(16), 4, "v");
    Halide::Var d("d"), i("i"), h("h"), b("b"), di, ii;
    Halide::Func q_in("q_in");
    AttentionSpec a = inst.spec.attention;
    if (before) {
        q_in(d, i, h, b) = Halide::cast<Halide::float16_t>(Halide::cast<float>(q(d, i, h, b)) * 0.5f);
        q_in.compute_root().gpu_tile(d, i, di, ii, 32, 4, Halide::TailStrategy::GuardWithIf);
        a.scale = a.score_scale() / 0.5;  // a power of two: the result equals plain attention
    } else {
        q_in = q;  // the buffer itself: the kernels read it
    }
    algorithms::AttentionInputs ai{q_in,
                                   k,
                                   v,
                                   Halide::Func(),
                                   q.dim(1).extent(),
                                   k.dim(1).extent(),
                                   q.dim(2).extent(),
                                   k.dim(2).extent(),
                                   q.dim(0).extent()};
    algorithms::AttentionFuncs attn = algorithms::attention(a, DType::F16, ai);
    fuse_reduction({attn.acc, attn.row_sum}, Halide::RVar(attn.kv.x)).rolling_update(64);
    Halide::Func result = attn.out;
    if (after) {
        Halide::Func doubled("doubled");
        doubled(d, i, h, b) = attn.out(d, i, h, b) * Halide::float16_t(2.0f);
        doubled.gpu_tile(d, i, di, ii, 32, 4, Halide::TailStrategy::GuardWithIf);
        result = doubled;
    }
    const std::vector<HostTensor> in = make_inputs(inst, 4);
    std::vector<Halide::Buffer<>> bound;
    Halide::ImageParam params[] = {q, k, v};
    for (size_t t = 0; t < 3; t++) {
        bound.push_back(to_halide_buffer(in[t]));
        REQUIRE(bound.back().copy_to_device(Halide::DeviceAPI::CUDA, gpu_jit_target()) == 0);
        params[t].set(bound.back());
    }
    // Halide's stage alone in a JIT pipeline of its own: q halved (exact in f16), before and after
    // compile_gpu, which separates what compile_gpu changes from what the mixed pipeline does.
    // NEPTUNE_TEST_HALIDE_DEBUG=1 realizes it with Halide's Debug runtime (every CUDA call logged).
    auto check_halved = [&](const std::string &when) {
        INFO("q_in realized alone " << when << " compile_gpu");
        Halide::Target t = gpu_jit_target();
        if (std::getenv("NEPTUNE_TEST_HALIDE_DEBUG")) t = t.with_feature(Halide::Target::Debug);
        Halide::Buffer<> halved = to_halide_buffer(in[0]);
        q_in.realize(halved, t);
        HostTensor want_q = in[0];
        for (double &x : want_q.values) x *= 0.5;
        check_close("q_in", read(halved, inst.inputs[0]), want_q, Tolerance{1e-6, 1e-6});
    };
    if (before) check_halved("before");
    ExternOptions o;
    o.head_dim_qk = 128;
    GpuPipeline p = compile_gpu({result}, o);
    if (before) check_halved("after");
    Halide::Buffer<> out = to_halide_buffer(make_outputs(inst)[0]);
    extern_calls.clear();
    neptune_halide_set_trace(record_call);
    p.realize(out);
    neptune_halide_set_trace(nullptr);
    INFO("Neptune's stage was called with:\n" << extern_calls);
    HostTensor want = reference::compute(inst, in)[0];
    if (after)
        for (double &x : want.values) x *= 2;
    check_close("out", read(out, inst.outputs[0]), want, attention_tolerance);
}

/** A modifier of the test's own reading 1-D int32 and f32 inputs over the batch and heads, fused by
 * rolling_update (or split_k_update in 4 chunks for one query row), against the same algorithm
 * unfused on Halide's CPU backend. */
void check_custom(const Modifier &modifier, const AttentionShape &s, bool split_k) {
    INFO((split_k ? "split-K" : "rolling") << " B=" << s.batch << " H=" << s.q_heads << "/" << s.kv_heads
                                           << " Sq=" << s.seq_q << " Skv=" << s.seq_kv << " D=" << s.dim);
    const std::vector<HostTensor> in = custom_inputs(s);
    const HostTensor want = unfused_output(modifier, s, in);
    CustomAttention a(modifier, s.dim);
    a.fuse(split_k ? 4 : 0);
    ExternOptions o;
    o.head_dim_qk = s.dim;
    o.group = split_k ? s.q_heads / s.kv_heads : 0;
    GpuPipeline p = compile_gpu({a.out}, o);
    std::vector<Halide::ImageParam> params = a.params();
    std::vector<Halide::Buffer<>> bound;
    for (size_t i = 0; i < in.size(); i++) {
        bound.push_back(to_halide_buffer(in[i]));
        params[i].set(bound.back());
    }
    HostTensor got(want.desc);
    Halide::Buffer<> out = to_halide_buffer(got);
    p.realize(out);
    check_close("out", read(out, want.desc), want, attention_tolerance);
}

const float neg_inf = -std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("gpu jit extern: (a child process of the exit test) JIT pipelines run, then the program exits" *
          doctest::skip()) {
    check_operator(instance("prefill_causal", 4, 2, 1, 100), 0);
    check_operator(instance("decode_gqa", 8, 2, 1, 300), 4);
    std::puts("the pipelines ran");
}

TEST_CASE("gpu jit extern: a program that ran JIT pipelines on the GPU exits without a word on stderr") {
    // Halide's JIT pipelines and buffers free their kernels and memory in destructors that run after
    // the driver shut down at exit: the test runs the case above in a child and reads its stderr.
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
    const std::filesystem::path out = std::filesystem::temp_directory_path() / "neptune_exit_child.txt";
    const std::string command = "'" + self.string() + "' --no-skip=true --test-case='*(a child process of the exit" +
                                " test)*' 2>&1 >'" + out.string() + "'";
    FILE *child = popen(command.c_str(), "r");
    REQUIRE(child != nullptr);
    std::string err;
    char chunk[4096];
    for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, child)) > 0;) err.append(chunk, n);
    const int status = pclose(child);
    std::ifstream report(out);
    const std::string stdout_text((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
    INFO("the child's stdout:\n" << stdout_text << "\nits stderr:\n" << err);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(stdout_text.find("the pipelines ran") != std::string::npos);
    CHECK(stdout_text.find("Status: SUCCESS!") != std::string::npos);
    CHECK(err.empty());
    std::filesystem::remove(out);
}

TEST_CASE("gpu jit extern: masks and modifiers reading int32 and f32 inputs over the batch and heads") {
    // Batches hold seq_kv - 29, 5 and seq_kv keys (a padded KV cache: int32 over the batch).
    const Modifier keys_per_batch = [](const ScoreArgs &x) {
        return Halide::select(x.j < x.kv_len(x.n), x.s, neg_inf);
    };
    check_custom(keys_per_batch, {3, 8, 2, 200, 333, 128}, false);
    check_custom(keys_per_batch, {3, 32, 4, 1, 1000, 128}, true);
    // A causal window as wide as an int32 input over the heads, and an f32 temperature per batch.
    const Modifier window_per_head = [](const ScoreArgs &x) {
        return Halide::select(x.j <= x.pos && x.j > x.pos - x.window(x.h), x.s * x.temperature(x.n), neg_inf);
    };
    check_custom(window_per_head, {2, 4, 2, 150, 200, 64}, false);
    check_custom(window_per_head, {2, 8, 2, 1, 700, 64}, true);
}

TEST_CASE("gpu jit extern: prefill and decode attention through compile_gpu match the fp64 reference") {
    check_operator(instance("prefill_causal", 8, 2, 2, 333), 0);
    check_operator(instance("prefill_windowed", 8, 2, 1, 700), 0);
    check_operator(instance("decode_gqa", 32, 4, 2, 1000), 8);
}

TEST_CASE("gpu jit extern: paged decode and prefill through compile_gpu read each sequence's pages, to fp64") {
    // Five sequences of 1000, 971, 507, 5 and 1000 keys in 16 shuffled pages of 64 each.
    check_operator(instance("decode_paged", 32, 8, 5, 1000), 4);
    check_operator(instance("decode_paged", 16, 2, 3, 64), 8);  // one page per sequence
    check_operator(instance("prefill_paged", 8, 2, 5, 700), 0);  // 512 queries at the end of each sequence
}

TEST_CASE("gpu jit extern: attention's out with its log-sum-exp, entropy and largest probability, one kernel") {
    for (int64_t seq : {1, 333}) {
        const OperatorInstance inst = instance("attention_row_stats", 8, 8, 2, seq);
        INFO("seq " << seq);
        algorithms::OperatorFuncs f = algorithms::build(inst.spec);
        algorithms::fuse_operator(inst.spec, f, algorithms::FusionChoice());
        ExternOptions o;
        o.head_dim_qk = inst.spec.attention.head_dim_qk;
        GpuPipeline p = compile_gpu(f.outputs, o);
        const std::vector<HostTensor> in = make_inputs(inst, 4, InputStyle::RisingScores);
        for (size_t i = 0; i < in.size(); i++) f.inputs[i].set(to_halide_buffer(in[i]));
        std::vector<Halide::Buffer<>> outs;
        for (const HostTensor &t : make_outputs(inst)) outs.push_back(to_halide_buffer(t));
        Halide::Realization r(outs);
        p.realize(r);
        const std::vector<HostTensor> want = reference::compute(inst, in);
        for (size_t i = 0; i < outs.size(); i++)
            check_close(inst.outputs[i].name, read(outs[i], inst.outputs[i]), want[i], attention_tolerance);
    }
}

TEST_CASE("gpu jit extern: Halide CUDA stages before and after Neptune's stage share its context and buffers") {
    check_mixed_pipeline(true, false);
    check_mixed_pipeline(false, true);
    check_mixed_pipeline(true, true);
}
