#include "OpsCheck.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "Compare.h"
#include "HeadsLayout.h"
#include "neptune/reference/Reference.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "ops/OpsDType.h"

namespace neptune::testing {

namespace {

using ops::ops_dtype;

/** Device copies of a case's tensors, freed at the end of the check. */
struct DeviceCopies {
    std::vector<void *> ptrs;
    ~DeviceCopies() {
        for (void *p : ptrs) neptune_free(p);
    }
    void *put(const OpsTensor &t) {
        void *p = nullptr;
        REQUIRE_MESSAGE(neptune_malloc(&p, t.bytes.size()) == NEPTUNE_OK, neptune_last_error());
        ptrs.push_back(p);
        REQUIRE(neptune_memcpy_htod(p, t.bytes.data(), t.bytes.size()) == NEPTUNE_OK);
        return p;
    }
};

}  // namespace

OpsTensor ops_tensor(const HostTensor &h) {
    OpsTensor o;
    o.bytes.resize(size_t(h.desc.numel()) * size_t(dtype_bytes(h.desc.dtype)));
    h.store(o.bytes.data());
    o.t.data = o.bytes.data();
    o.t.dtype = ops_dtype(h.desc.dtype);
    o.t.device = NEPTUNE_OPS_HOST;
    o.t.ndim = int32_t(h.desc.shape.size());
    o.t.abi = NEPTUNE_OPS_ABI_VERSION;
    for (size_t i = 0; i < h.desc.shape.size(); i++) o.t.shape[i] = h.desc.shape[i];
    return o;
}

OpsTensor ops_output(const TensorDesc &d) {
    HostTensor h(d);
    for (double &v : h.values) v = d.dtype == DType::I32 ? -1.0 : std::nan("");
    return ops_tensor(h);
}

HostTensor read_ops(const OpsTensor &o, const TensorDesc &d) {
    HostTensor h(d);
    h.load(o.bytes.data());
    return h;
}

void to_bshd(OpsTensor &o, int64_t pad) {
    REQUIRE(o.t.ndim == 4);
    const int64_t B = o.t.shape[0], H = o.t.shape[1], S = o.t.shape[2], D = o.t.shape[3];
    const size_t e = o.t.dtype == NEPTUNE_OPS_F32 || o.t.dtype == NEPTUNE_OPS_I32 ? 4 : 2;
    const HeadsStrides st = bshd_strides(H, S, D, pad, 0);
    std::vector<unsigned char> m(size_t(B * st.batch) * e, 0xff);  // NaN in the padding
    for_each_head_row(B, H, S, D, st, [&](int64_t dense, int64_t strided) {
        std::memcpy(&m[size_t(strided) * e], &o.bytes[size_t(dense) * e], size_t(D) * e);
    });
    o.bytes = std::move(m);
    o.t.data = o.bytes.data();
    const int64_t strides[4] = {st.batch, st.head, st.row, 1};
    std::copy(strides, strides + 4, o.t.strides);
}

void from_bshd(OpsTensor &o) {
    const int64_t B = o.t.shape[0], H = o.t.shape[1], S = o.t.shape[2], D = o.t.shape[3];
    const size_t e = o.t.dtype == NEPTUNE_OPS_F32 || o.t.dtype == NEPTUNE_OPS_I32 ? 4 : 2;
    const HeadsStrides st{o.t.strides[0], o.t.strides[1], o.t.strides[2]};
    std::vector<unsigned char> d(size_t(B * H * S * D) * e);
    for_each_head_row(B, H, S, D, st, [&](int64_t dense, int64_t strided) {
        std::memcpy(&d[size_t(dense) * e], &o.bytes[size_t(strided) * e], size_t(D) * e);
    });
    o.bytes = std::move(d);
    o.t.data = o.bytes.data();
    std::fill(std::begin(o.t.strides), std::end(o.t.strides), int64_t(0));
}

OpsCase ops_case(const OperatorInstance &inst, uint64_t seed, InputStyle style) {
    OpsCase c;
    c.inputs = make_inputs(inst, seed, style);
    for (const HostTensor &h : c.inputs) c.in.push_back(ops_tensor(h));
    for (const TensorDesc &d : inst.outputs) c.out.push_back(ops_output(d));
    return c;
}

int call_entry(const std::string &op, const OpsCase &c, void *stream) {
    const neptune_ops_tensor *i[5] = {}, *o = &c.out.at(0).t;
    for (size_t k = 0; k < c.in.size() && k < 5; k++) i[k] = &c.in[k].t;
    using Fn3 = int (*)(const neptune_ops_tensor *, const neptune_ops_tensor *, const neptune_ops_tensor *,
                        const neptune_ops_tensor *, void *);
    using Fn4 = int (*)(const neptune_ops_tensor *, const neptune_ops_tensor *, const neptune_ops_tensor *,
                        const neptune_ops_tensor *, const neptune_ops_tensor *, void *);
    static const std::map<std::string, Fn3> three = {{"prefill_global", neptune_ops_prefill_global},
                                                     {"prefill_causal", neptune_ops_prefill_causal},
                                                     {"prefill_gqa", neptune_ops_prefill_gqa},
                                                     {"prefill_softcap", neptune_ops_prefill_softcap},
                                                     {"prefill_windowed", neptune_ops_prefill_windowed},
                                                     {"decode_causal", neptune_ops_decode_causal},
                                                     {"decode_gqa", neptune_ops_decode_gqa},
                                                     {"decode_softcap", neptune_ops_decode_softcap},
                                                     {"layernorm", neptune_ops_layernorm}};
    static const std::map<std::string, Fn4> four = {{"prefill_alibi", neptune_ops_prefill_alibi},
                                                    {"decode_alibi", neptune_ops_decode_alibi},
                                                    {"performer", neptune_ops_performer}};
    if (three.count(op)) return three.at(op)(i[0], i[1], i[2], o, stream);
    if (four.count(op)) return four.at(op)(i[0], i[1], i[2], i[3], o, stream);
    if (op == "decode_paged") return neptune_ops_decode_paged(i[0], i[1], i[2], i[3], i[4], o, stream);
    if (op == "prefill_paged") return neptune_ops_prefill_paged(i[0], i[1], i[2], i[3], i[4], o, stream);
    if (op == "softmax") return neptune_ops_softmax(i[0], o, stream);
    if (op == "logsumexp") return neptune_ops_logsumexp(i[0], o, stream);
    if (op == "cross_entropy") return neptune_ops_cross_entropy(i[0], i[1], o, stream);
    if (op == "rmsnorm") return neptune_ops_rmsnorm(i[0], i[1], o, stream);
    FAIL("no entry for " << op);
    return -1;
}

OperatorInstance attention_instance(const std::string &op, int q_heads, int kv_heads, int64_t batch, int64_t seq) {
    OperatorSpec s = *find_operator(op);
    s.attention.q_heads = q_heads;
    s.attention.kv_heads = kv_heads;
    return instantiate(s, batch, seq);
}

void check_op(const OperatorInstance &inst, const std::string &expect, const CheckOptions &o) {
    INFO(inst.spec.name << " at " << inst.batch << "," << inst.seq << " on the "
                        << (o.device == NEPTUNE_OPS_CUDA ? "GPU" : "host"));
    OpsCase c = ops_case(inst, 7, o.style);
    if (o.bshd_pad >= 0)
        for (std::vector<OpsTensor> *ts : {&c.in, &c.out})
            for (OpsTensor &t : *ts)
                if (t.t.ndim == 4) to_bshd(t, o.bshd_pad);
    DeviceCopies copies;
    if (o.device == NEPTUNE_OPS_CUDA)
        for (std::vector<OpsTensor> *ts : {&c.in, &c.out})
            for (OpsTensor &t : *ts) {
                t.t.data = copies.put(t);  // outputs as NaN too
                t.t.device = NEPTUNE_OPS_CUDA;
            }
    std::vector<neptune_ops_tensor> in;
    for (const OpsTensor &t : c.in) in.push_back(t.t);
    int index = -1;
    REQUIRE_MESSAGE(neptune_ops_select(inst.spec.name.c_str(), in.data(), int(in.size()), &index) == NEPTUNE_OPS_OK,
                    neptune_ops_last_error());
    neptune_ops_variant v{};
    REQUIRE(neptune_ops_get_variant(index, &v) == NEPTUNE_OPS_OK);
    CHECK(std::string(v.name) == expect);
    REQUIRE_MESSAGE(call_entry(inst.spec.name, c) == NEPTUNE_OPS_OK, neptune_ops_last_error());
    if (o.device == NEPTUNE_OPS_CUDA) {
        // A kernel's failure surfaces here at the latest (launches are asynchronous).
        REQUIRE_MESSAGE(neptune_ops_synchronize() == NEPTUNE_OPS_OK, neptune_ops_last_error());
        for (OpsTensor &t : c.out) REQUIRE(neptune_memcpy_dtoh(t.bytes.data(), t.t.data, t.bytes.size()) == NEPTUNE_OK);
    }
    if (o.bshd_pad >= 0)
        for (OpsTensor &t : c.out)
            if (t.t.ndim == 4) from_bshd(t);
    const int64_t first = o.first_row, count = o.rows < 0 ? inst.rows - first : o.rows;
    std::vector<HostTensor> ref = make_outputs(inst);
    reference::compute_rows(inst, c.inputs, ref, first, count);
    for (size_t k = 0; k < inst.outputs.size(); k++) {
        const HostTensor got = read_ops(c.out[k], inst.outputs[k]);
        const int64_t per_row = inst.outputs[k].numel() / inst.rows;
        int64_t unwritten = 0;
        for (double x : got.values) unwritten += std::isnan(x) ? 1 : 0;
        CHECK(unwritten == 0);
        const DType t = inst.outputs[k].dtype;
        check_close(inst.outputs[k].name, got, ref[k], o.tolerance ? o.tolerance(t) : tolerance_for(t), first * per_row,
                    (first + count) * per_row);
    }
}

}  // namespace neptune::testing
