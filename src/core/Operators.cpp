#include "neptune/Operators.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace neptune {

const char *dtype_name(DType t) {
    switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    }
    return "?";
}

const char *mask_name(Mask m) {
    switch (m) {
    case Mask::None: return "none";
    case Mask::Causal: return "causal";
    case Mask::Window: return "window";
    }
    return "?";
}

const char *score_mod_name(ScoreMod m) {
    switch (m) {
    case ScoreMod::None: return "none";
    case ScoreMod::Alibi: return "alibi";
    case ScoreMod::Softcap: return "softcap";
    }
    return "?";
}

int dtype_bytes(DType t) { return (t == DType::F16 || t == DType::BF16) ? 2 : 4; }

int64_t paged_seq_len(int64_t b, int64_t seq) {
    const int64_t lens[4] = {seq, seq - 29, seq / 2 + 7, 5};
    return std::max<int64_t>(1, std::min(seq, lens[b % 4]));
}

double AttentionSpec::score_scale() const { return scale ? *scale : 1.0 / std::sqrt(double(head_dim_qk)); }

int64_t TensorDesc::numel() const {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    return n;
}

namespace {

OperatorSpec make_op(const std::string &name, Family f, const std::string &what) {
    OperatorSpec s;
    s.name = name;
    s.family = f;
    s.description = what;
    return s;
}

OperatorSpec attention_op(const std::string &name, const std::string &what, int hq, int hkv, Mask mask, ScoreMod mod,
                          bool decode) {
    OperatorSpec s = make_op(name, Family::Attention, what);
    s.attention.q_heads = hq;
    s.attention.kv_heads = hkv;
    s.attention.mask = mask;
    s.attention.mod = mod;
    s.attention.decode = decode;
    return s;
}

std::vector<OperatorSpec> make_suite() {
    std::vector<OperatorSpec> ops = {
        attention_op("prefill_global", "attention, 32/32 heads, no mask (ViT-L)", 32, 32, Mask::None, ScoreMod::None,
                     false),
        attention_op("prefill_causal", "attention, 32/32 heads, causal (GPT-3 6.7B)", 32, 32, Mask::Causal,
                     ScoreMod::None, false),
        attention_op("prefill_alibi", "attention, 32/32 heads, causal, ALiBi (MPT-7B)", 32, 32, Mask::Causal,
                     ScoreMod::Alibi, false),
        attention_op("prefill_gqa", "attention, 64/8 heads, causal (Llama-3 70B)", 64, 8, Mask::Causal, ScoreMod::None,
                     false),
        attention_op("prefill_softcap", "attention, 32/16 heads, causal, softcap 50 (Gemma-2 27B)", 32, 16,
                     Mask::Causal, ScoreMod::Softcap, false),
        attention_op("prefill_windowed", "attention, 32/8 heads, causal window 4096, softcap 50 (Gemma-2 local)", 32, 8,
                     Mask::Window, ScoreMod::Softcap, false),
        attention_op("decode_causal", "decode attention, 32/32 heads, one query row", 32, 32, Mask::Causal,
                     ScoreMod::None, true),
        attention_op("decode_alibi", "decode attention, 32/32 heads, ALiBi", 32, 32, Mask::Causal, ScoreMod::Alibi,
                     true),
        attention_op("decode_gqa", "decode attention, 64/8 heads", 64, 8, Mask::Causal, ScoreMod::None, true),
        attention_op("decode_softcap", "decode attention, 32/16 heads, softcap 50", 32, 16, Mask::Causal,
                     ScoreMod::Softcap, true),
    };
    OperatorSpec paged =
        attention_op("decode_paged",
                     "decode attention, 32/8 heads, paged KV cache (64-key pages), per-sequence lengths (Llama-3 8B)",
                     32, 8, Mask::Causal, ScoreMod::None, true);
    paged.attention.page_size = 64;
    ops.push_back(paged);
    OperatorSpec chunk = attention_op("prefill_paged",
                                      "chunked prefill, 32/8 heads, causal: 512 new queries per sequence at the end of "
                                      "its paged KV cache (64-key pages), per-sequence lengths",
                                      32, 8, Mask::Causal, ScoreMod::None, false);
    chunk.attention.page_size = 64;
    chunk.attention.seq_q = 512;
    ops.push_back(chunk);
    OperatorSpec stats =
        attention_op("attention_row_stats",
                     "causal attention that also returns log-sum-exp, entropy and largest probability per row", 32, 32,
                     Mask::Causal, ScoreMod::None, false);
    stats.row_stats = RowStats::All;
    ops.push_back(stats);
    OperatorSpec lse = attention_op("prefill_causal_lse",
                                    "causal attention that also returns log-sum-exp per row (as training reads it)", 32,
                                    32, Mask::Causal, ScoreMod::None, false);
    lse.row_stats = RowStats::Lse;
    ops.push_back(lse);
    ops.push_back(make_op("softmax", Family::Softmax, "softmax over the last axis of [rows, cols]"));
    ops.push_back(make_op("logsumexp", Family::LogSumExp, "log-sum-exp over the last axis of [rows, cols]"));
    ops.push_back(make_op("cross_entropy", Family::CrossEntropy,
                          "per-row cross-entropy of logits [rows, cols] and int32 labels"));
    ops.push_back(make_op("layernorm", Family::LayerNorm, "LayerNorm over the last axis of [rows, cols]"));
    ops.push_back(
        make_op("layernorm_matmul", Family::LayerNormMatmul, "LayerNorm of [rows, cols] times W [cols, 1024]"));
    ops.push_back(make_op("rmsnorm", Family::RmsNorm, "RMSNorm over the last axis of [rows, cols]"));
    ops.push_back(make_op("rmsnorm_matmul", Family::RmsNormMatmul, "RMSNorm of [rows, cols] times W [cols, 1024]"));
    ops.push_back(
        make_op("performer", Family::Performer, "Performer (FAVOR+) linear attention, 32 heads, 256 features"));
    // bf16, as language models are trained.
    OperatorSpec lce = make_op("linear_cross_entropy", Family::LinearCrossEntropy,
                               "per-token loss and log-sum-exp of logits h [tokens, 4096] * weight [vocab, 4096]^T, "
                               "int32 labels, bf16; the logits are never stored");
    lce.dtype = DType::BF16;
    ops.push_back(lce);
    return ops;
}

void require(bool ok, const std::string &msg) {
    if (!ok) throw std::invalid_argument(msg);
}

}  // namespace

const std::vector<OperatorSpec> &operator_suite() {
    static const std::vector<OperatorSpec> suite = make_suite();
    return suite;
}

std::optional<OperatorSpec> find_operator(const std::string &name) {
    for (const OperatorSpec &s : operator_suite())
        if (s.name == name) return s;
    return std::nullopt;
}

const TensorDesc &OperatorInstance::input(const std::string &n) const {
    for (const TensorDesc &t : inputs)
        if (t.name == n) return t;
    throw std::invalid_argument(spec.name + " has no input called " + n);
}

const TensorDesc &OperatorInstance::output(const std::string &n) const {
    for (const TensorDesc &t : outputs)
        if (t.name == n) return t;
    throw std::invalid_argument(spec.name + " has no output called " + n);
}

OperatorInstance instantiate(const OperatorSpec &spec, int64_t batch, int64_t seq) {
    require(batch > 0 && seq > 0,
            spec.name + ": extents must be positive, got " + std::to_string(batch) + "," + std::to_string(seq));
    OperatorInstance in;
    in.spec = spec;
    in.batch = batch;
    in.seq = seq;
    const DType t = spec.dtype;
    require(t == DType::F16 || t == DType::BF16, spec.name + ": element type must be f16 or bf16");
    const AttentionSpec &a = spec.attention;
    switch (spec.family) {
    case Family::Attention: {
        require(a.q_heads > 0 && a.kv_heads > 0 && a.q_heads % a.kv_heads == 0,
                spec.name + ": q_heads must be a positive multiple of kv_heads");
        require(a.head_dim_qk > 0 && a.head_dim_v > 0, spec.name + ": head dims must be positive");
        require(a.mask != Mask::Window || a.window > 0, spec.name + ": the window must be positive");
        require(a.seq_q >= 0, spec.name + ": seq_q must not be negative");
        const int64_t sq = a.decode ? 1 : (a.seq_q > 0 ? a.seq_q : seq);
        require(a.page_size >= 0, spec.name + ": the page size must not be negative");
        if (a.page_size > 0) {
            const int64_t max_pages = (seq + a.page_size - 1) / a.page_size;
            const int64_t pages = a.pages > 0 ? a.pages : batch * max_pages;
            in.inputs = {{"q", t, {batch, a.q_heads, sq, a.head_dim_qk}},
                         {"k_cache", t, {pages, a.kv_heads, a.page_size, a.head_dim_qk}},
                         {"v_cache", t, {pages, a.kv_heads, a.page_size, a.head_dim_v}},
                         {"page_table", DType::I32, {batch, max_pages}},
                         {"seq_lens", DType::I32, {batch}}};
        } else {
            in.inputs = {{"q", t, {batch, a.q_heads, sq, a.head_dim_qk}},
                         {"k", t, {batch, a.kv_heads, seq, a.head_dim_qk}},
                         {"v", t, {batch, a.kv_heads, seq, a.head_dim_v}}};
        }
        if (a.mod == ScoreMod::Alibi) in.inputs.push_back({"slopes", DType::F32, {a.q_heads}});
        in.outputs = {{"out", t, {batch, a.q_heads, sq, a.head_dim_v}}};
        if (spec.row_stats != RowStats::None) in.outputs.push_back({"lse", DType::F32, {batch, a.q_heads, sq}});
        if (spec.row_stats == RowStats::All)
            for (const char *n : {"entropy", "max_prob"}) in.outputs.push_back({n, DType::F32, {batch, a.q_heads, sq}});
        in.rows = batch * a.q_heads * sq;
        in.row_block = sq;
        in.row_dims = 3;
        break;
    }
    case Family::Performer:
        in.inputs = {{"q", t, {batch, a.q_heads, seq, a.head_dim_qk}},
                     {"k", t, {batch, a.q_heads, seq, a.head_dim_qk}},
                     {"v", t, {batch, a.q_heads, seq, a.head_dim_v}},
                     {"features", DType::F32, {spec.features, a.head_dim_qk}}};
        in.outputs = {{"out", t, {batch, a.q_heads, seq, a.head_dim_v}}};
        in.rows = batch * a.q_heads * seq;
        in.row_block = seq;
        in.row_dims = 3;
        break;
    case Family::Softmax:
        in.inputs = {{"x", t, {batch, seq}}};
        in.outputs = {{"y", t, {batch, seq}}};
        if (spec.row_stats != RowStats::None) in.outputs.push_back({"lse", DType::F32, {batch}});
        break;
    case Family::LogSumExp:
        in.inputs = {{"x", t, {batch, seq}}};
        in.outputs = {{"lse", DType::F32, {batch}}};
        break;
    case Family::CrossEntropy:
        in.inputs = {{"x", t, {batch, seq}}, {"labels", DType::I32, {batch}}};
        in.outputs = {{"loss", DType::F32, {batch}}};
        break;
    case Family::LayerNorm:
        in.inputs = {{"x", t, {batch, seq}}, {"gamma", t, {seq}}, {"beta", t, {seq}}};
        in.outputs = {{"y", t, {batch, seq}}};
        break;
    case Family::LayerNormMatmul:
        in.inputs = {{"x", t, {batch, seq}}, {"gamma", t, {seq}}, {"beta", t, {seq}}, {"w", t, {seq, spec.matmul_n}}};
        in.outputs = {{"y", t, {batch, spec.matmul_n}}};
        break;
    case Family::RmsNorm:
        in.inputs = {{"x", t, {batch, seq}}, {"gamma", t, {seq}}};
        in.outputs = {{"y", t, {batch, seq}}};
        break;
    case Family::RmsNormMatmul:
        in.inputs = {{"x", t, {batch, seq}}, {"gamma", t, {seq}}, {"w", t, {seq, spec.matmul_n}}};
        in.outputs = {{"y", t, {batch, spec.matmul_n}}};
        break;
    case Family::LinearCrossEntropy:
        require(spec.hidden > 0, spec.name + ": the hidden size must be positive");
        in.inputs = {
            {"h", t, {batch, spec.hidden}}, {"weight", t, {seq, spec.hidden}}, {"labels", DType::I32, {batch}}};
        in.outputs = {{"loss", DType::F32, {batch}}, {"lse", DType::F32, {batch}}};
        break;
    }
    if (spec.family != Family::Attention && spec.family != Family::Performer) {
        in.rows = batch;
        in.row_block = batch;
    }
    if (spec.f32_outputs)
        for (TensorDesc &o : in.outputs) o.dtype = DType::F32;
    return in;
}

bool row_wise(Family f) {
    switch (f) {
    case Family::Softmax:
    case Family::LogSumExp:
    case Family::CrossEntropy:
    case Family::LayerNorm:
    case Family::RmsNorm: return true;
    default: return false;
    }
}

bool memory_bound(const OperatorSpec &spec) {
    switch (spec.family) {
    case Family::Attention: return spec.attention.decode;
    case Family::LayerNormMatmul:
    case Family::RmsNormMatmul:
    case Family::LinearCrossEntropy:
    case Family::Performer: return false;
    default: return true;
    }
}

int64_t attention_keys(const OperatorInstance &in) {
    const int page = in.spec.attention.page_size;
    return page > 0 ? in.input("page_table").shape[1] * page : in.input("k").shape[2];
}

double operator_flops(const OperatorInstance &in) {
    const AttentionSpec &a = in.spec.attention;
    const double B = double(in.batch), S = double(in.seq);
    switch (in.spec.family) {
    case Family::Attention: {
        const double sq = double(in.input("q").shape[2]);
        const double d = a.head_dim_qk;  // docs/design/operators.md counts one D for both GEMMs
        if (a.page_size > 0) {  // the (query, key) pairs visible in the keys each sequence holds
            double pairs = 0;
            for (int64_t b = 0; b < in.batch; b++) {
                const int64_t held = paged_seq_len(b, in.seq), q = int64_t(sq);
                for (int64_t i = 0; i < q; i++)
                    pairs += double(a.mask == Mask::None ? held : std::clamp<int64_t>(held - q + i + 1, 0, held));
            }
            return 4.0 * a.q_heads * pairs * d;
        }
        if (a.mask == Mask::Window && !a.decode) return 2.0 * B * a.q_heads * S * std::min<double>(S, a.window) * d;
        double f = 4.0 * B * a.q_heads * sq * S * d;
        return (a.mask != Mask::None && !a.decode) ? f / 2 : f;
    }
    case Family::Performer: return 8.0 * B * a.q_heads * S * in.spec.features * a.head_dim_qk;
    case Family::LayerNormMatmul:
    case Family::RmsNormMatmul: return 2.0 * B * S * in.spec.matmul_n;
    case Family::LinearCrossEntropy: return 2.0 * B * S * in.spec.hidden;
    default: return 5.0 * B * S;  // a handful of flops per element; these are judged in TB/s
    }
}

double operator_bytes(const OperatorInstance &in) {
    const AttentionSpec &a = in.spec.attention;
    if (in.spec.family == Family::Attention && a.page_size > 0) {  // the keys the sequences hold
        double keys = 0;
        for (int64_t b = 0; b < in.batch; b++) keys += double(paged_seq_len(b, in.seq));
        return keys * a.kv_heads * (a.head_dim_qk + a.head_dim_v) * dtype_bytes(in.spec.dtype);
    }
    if (in.spec.family == Family::Attention && a.decode) {
        return double(in.input("k").numel() * dtype_bytes(in.input("k").dtype) +
                      in.input("v").numel() * dtype_bytes(in.input("v").dtype));
    }
    double b = 0;
    for (const TensorDesc &t : in.inputs) b += double(t.numel()) * dtype_bytes(t.dtype);
    for (const TensorDesc &t : in.outputs) b += double(t.numel()) * dtype_bytes(t.dtype);
    return b;
}

std::pair<int64_t, int64_t> parse_shape(const std::string &text) {
    const std::string hint = "expected B,S as two positive integers, e.g. 1,8192; got '" + text + "'";
    const size_t comma = text.find(',');
    require(comma != std::string::npos && text.find(',', comma + 1) == std::string::npos, hint);
    auto parse = [&](const std::string &part) {
        require(!part.empty() && part.size() <= 10 && part.find_first_not_of("0123456789") == std::string::npos, hint);
        const int64_t v = std::stoll(part);
        require(v > 0, hint);
        return v;
    };
    return {parse(text.substr(0, comma)), parse(text.substr(comma + 1))};
}

}  // namespace neptune
