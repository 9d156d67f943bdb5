// The GPU libraries (Neptune's kernels as extern stages) where no kernel need run: bounds queries
// through the AOT entry point, what the extern stage sees, and every refusal of wrong buffers with
// Halide's error code and a message naming the buffer, all before any device work. Without a GPU the
// run itself must report the missing driver; with one, gpu_aot runs the kernels.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "AotBuffers.h"
#include "GpuProbe.h"
#include "decode_gqa.h"
#include "layernorm.h"
#include "neptune/runtime/NeptuneHalide.h"
#include "prefill_alibi.h"
#include "prefill_causal.h"
#include "prefill_prescaled.h"

using namespace neptune;
using namespace neptune::testing;
using Halide::Runtime::Buffer;

// Halide's runtime defines it weakly; Neptune's launcher overrides it (NeptuneHalide.h).
extern "C" int halide_cuda_acquire_context(void *user_context, void **cuda_context, bool create);

namespace {

halide_type_t f16() { return halide_type_t(halide_type_float, 16); }

/** A bounds-query buffer: no memory; its extents say what the caller has (q's and k's shapes). */
Buffer<void> query(std::vector<int> extents) {
    std::vector<halide_dimension_t> dims;
    for (int e : extents) dims.push_back({0, e, 0, 0});
    return Buffer<void>(f16(), nullptr, int(dims.size()), dims.data());
}

std::vector<neptune_halide_trace_event> &events() {
    static std::vector<neptune_halide_trace_event> e;
    return e;
}
std::vector<std::string> &seen() {
    static std::vector<std::string> s;
    return s;
}
void trace(const neptune_halide_trace_event *e) {
    events().push_back(*e);
    std::string s = std::string(e->bounds_query ? "query" : "run") + ":";
    for (int i = 0; i < e->num_buffers; i++) {
        s += std::string(" ") + e->buffer_names[i];
        for (int d = 0; d < e->buffers[i]->dimensions; d++)
            s += "[" + std::to_string(e->buffers[i]->dim[d].min) + "," + std::to_string(e->buffers[i]->dim[d].extent) +
                 ")";
    }
    seen().push_back(s);
}

bool has(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

struct Attention {
    Buffer<void> q, k, v, out;
    Attention(int d, int sq, int hq, int skv, int hkv, int b)
        : q(f16(), {d, sq, hq, b}), k(f16(), {d, skv, hkv, b}), v(f16(), {d, skv, hkv, b}), out(f16(), {d, sq, hq, b}) {
        for (Buffer<void> *t : {&q, &k, &v}) {
            std::memset(t->data(), 0, t->size_in_bytes());
            t->set_host_dirty();
        }
    }
};

}  // namespace

TEST_CASE("aot extern: a bounds query fills every input whole from the caller's extents, and does no work") {
    neptune_halide_set_trace(trace);
    seen().clear();
    Buffer<void> q = query({128, 7, 4, 2}), k = query({128, 9, 2, 2}), v = query({128, 9, 2, 2});
    Buffer<void> out = query({128, 7, 4, 2});
    clear_messages();
    REQUIRE(prefill_causal(q, k, v, out) == 0);
    CHECK(all_messages().empty());
    for (int d = 0; d < 4; d++) {
        CHECK(q.dim(d).min() == 0);
        CHECK(k.dim(d).min() == 0);
    }
    CHECK(q.dim(1).extent() == 7);
    CHECK(k.dim(1).extent() == 9);
    CHECK(v.dim(2).extent() == 2);
    REQUIRE(!seen().empty());
    // The stage was asked about the whole output only, and answered without running.
    for (const std::string &s : seen())
        CHECK(s ==
              "query: q[0,128)[0,7)[0,4)[0,2) k[0,128)[0,9)[0,2)[0,2) "
              "v[0,128)[0,9)[0,2)[0,2) out[0,128)[0,7)[0,4)[0,2)");
    neptune_halide_set_trace(nullptr);
}

TEST_CASE("aot extern: ALiBi's slopes are a fifth buffer, asked for over every query head") {
    Buffer<void> q = query({128, 3, 4, 1}), k = query({128, 5, 2, 1}), v = query({128, 5, 2, 1}),
                 out = query({128, 3, 4, 1});
    std::vector<halide_dimension_t> one = {{0, 0, 0, 0}};
    Buffer<void> slopes(halide_type_t(halide_type_float, 32), nullptr, 1, one.data());
    clear_messages();
    REQUIRE(prefill_alibi(q, k, v, slopes, out) == 0);
    CHECK(slopes.dim(0).min() == 0);
    CHECK(slopes.dim(0).extent() == 4);
}

TEST_CASE("aot extern: a Halide stage feeding the group is bounded by the group's query, whole") {
    neptune_halide_set_trace(trace);
    seen().clear();
    Buffer<void> q = query({128, 5, 2, 1}), k = query({128, 6, 1, 1}), v = query({128, 6, 1, 1});
    Buffer<void> out = query({128, 5, 2, 1});
    clear_messages();
    const int rc = prefill_prescaled(q, k, v, out);
    neptune_halide_set_trace(nullptr);
    if (!cuda_device_present()) {
        // A pipeline with Halide CUDA stages loads its kernels first, bounds query or not.
        CHECK(rc == halide_error_code_gpu_device_error);
        CHECK(has(all_messages(), "libcuda.so.1"));
        return;
    }
    REQUIRE(rc == 0);
    CHECK(q.dim(1).extent() == 5);
    CHECK(q.dim(2).extent() == 2);
    REQUIRE(!seen().empty());
    CHECK(has(seen().back(), "q_scaled[0,128)[0,5)[0,2)[0,1)"));
}

TEST_CASE("aot extern: wrong buffers are refused before any device work, naming the buffer") {
    Attention a(128, 7, 4, 9, 2, 2);
    clear_messages();
    CHECK(prefill_causal(a.q, nullptr, a.v, a.out) == halide_error_code_buffer_argument_is_null);
    CHECK(has(all_messages(), "k"));

    Buffer<void> q32(halide_type_t(halide_type_float, 32), {128, 7, 4, 2});
    clear_messages();
    CHECK(prefill_causal(q32, a.k, a.v, a.out) == halide_error_code_bad_type);
    CHECK(has(all_messages(), "Neptune extern stage out: buffer q has type f32, expected f16"));

    Buffer<void> k64(f16(), {64, 9, 2, 2});
    std::memset(k64.data(), 0, k64.size_in_bytes());
    clear_messages();
    CHECK(prefill_causal(a.q, k64, a.v, a.out) == halide_error_code_constraint_violated);
    CHECK(has(all_messages(), "buffer k covers [0, 64) in dimension 0 (128), expected [0, 128)"));

    Buffer<void> k256(f16(), {256, 9, 2, 2});
    std::memset(k256.data(), 0, k256.size_in_bytes());
    clear_messages();
    CHECK(prefill_causal(a.q, k256, a.v, a.out) == halide_error_code_constraint_violated);
    CHECK(has(all_messages(),
              "Neptune extern stage out: buffer k covers [0, 256) in dimension 0 (128), expected [0, 128)"));

    Attention odd(128, 7, 4, 9, 3, 2);
    clear_messages();
    CHECK(prefill_causal(odd.q, odd.k, odd.v, odd.out) == halide_error_code_constraint_violated);
    CHECK(has(all_messages(), "q_heads must be a multiple of kv_heads (batch = 2, q_heads = 4, kv_heads = 3"));

    // Views are read through their strides, as long as rows start on 16 bytes: rows of 130 do not.
    Buffer<void> wide_rows(f16(), {130, 9, 2, 2});
    wide_rows.crop(0, 0, 128);
    clear_messages();
    CHECK(prefill_causal(a.q, wide_rows, a.v, a.out) == halide_error_code_constraint_violated);
    CHECK(has(all_messages(),
              "buffer k has stride 130 in dimension 1: Neptune's kernels take strides that are "
              "positive multiples of 8 elements (16 bytes)"));

    // Decode writes (batch, head) rows one head stride apart: an output whose heads are a crop of 20
    // (batch stride 20 head strides for 16 heads) is refused, before any device work.
    Attention dec(128, 1, 16, 9, 2, 2);
    Buffer<void> out_of_20(f16(), {128, 1, 20, 2});
    out_of_20.crop(2, 0, 16);
    clear_messages();
    CHECK(decode_gqa(dec.q, dec.k, dec.v, out_of_20) == halide_error_code_constraint_violated);
    CHECK(has(all_messages(), "batch stride must be q_heads times its head stride"));
    // With one batch there is no batch stride to speak of: padded heads are fine.
    Attention dec1(128, 1, 16, 9, 2, 1);
    Buffer<void> padded_heads(f16(), {136, 1, 16, 1});
    padded_heads.crop(0, 0, 128);
    clear_messages();
    decode_gqa(dec1.q, dec1.k, dec1.v, padded_heads);  // runs where there is a GPU
    CHECK(!has(all_messages(), "batch stride"));
    CHECK(!has(all_messages(), "has stride"));

    Attention two_rows(128, 2, 16, 9, 2, 1);  // decode takes one query row
    clear_messages();
    CHECK(decode_gqa(two_rows.q, two_rows.k, two_rows.v, two_rows.out) == halide_error_code_constraint_violated);
    CHECK(has(all_messages(), "decode kernels take one query row per head (seq_q must be 1)"));

    Attention wide(128, 1, 24, 9, 1, 1);  // 24 query heads per KV head; compiled for 8
    clear_messages();
    CHECK(decode_gqa(wide.q, wide.k, wide.v, wide.out) == halide_error_code_constraint_violated);
    CHECK(has(all_messages(), "the kernels were compiled for 8 query heads per KV head"));
}

TEST_CASE("aot extern: a row chain's stage asks for x, gamma and beta whole; a gamma too short is refused") {
    Buffer<void> x = query({300, 7}), out = query({300, 7});
    std::vector<halide_dimension_t> one = {{0, 0, 0, 0}};
    Buffer<void> gamma(f16(), nullptr, 1, one.data()), beta(f16(), nullptr, 1, one.data());
    clear_messages();
    REQUIRE(layernorm(x, gamma, beta, out) == 0);
    CHECK(gamma.dim(0).extent() == 300);
    CHECK(beta.dim(0).extent() == 300);
    CHECK(x.dim(1).extent() == 7);

    Buffer<void> xs(f16(), {300, 7}), g(f16(), {299}), b(f16(), {300}), y(f16(), {300, 7});
    std::memset(xs.data(), 0, xs.size_in_bytes());
    std::memset(g.data(), 0, g.size_in_bytes());
    std::memset(b.data(), 0, b.size_in_bytes());
    clear_messages();
    CHECK(layernorm(xs, g, b, y) != 0);
    CHECK(has(all_messages(), "gamma"));
}

TEST_CASE("aot extern: without a GPU, the run reports the missing driver and returns an error") {
    if (cuda_device_present()) return;  // gpu_aot runs the kernels there
    Attention a(128, 7, 4, 9, 2, 2);
    clear_messages();
    CHECK(prefill_causal(a.q, a.k, a.v, a.out) != 0);
    CHECK(has(all_messages(), "libcuda.so.1"));
    void *context = nullptr;
    CHECK(halide_cuda_acquire_context(nullptr, &context, true) ==
          halide_error_code_gpu_device_error);  // Neptune's override
}
