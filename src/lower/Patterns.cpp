#include "lower/Patterns.h"

#include "lower/BuildMatmulChain.h"
#include "lower/BuildRowChain.h"
#include "lower/BuildTileProgram.h"
#include "neptune/Error.h"

namespace neptune::internal {

std::string base_name(const std::string &n) {
    const size_t d = n.find('$');
    return d == std::string::npos ? n : n.substr(0, d);
}

const char *pattern_name(PatternKind k) {
    switch (k) {
    case PatternKind::Attention: return "attention";
    case PatternKind::MatmulChain: return "matmul-fed chain";
    case PatternKind::RowChain: return "row chain";
    }
    return "";
}

std::string PatternMatch::why() const {
    std::string s = "no pattern of the tile backend matches";
    for (size_t i = 0; i < reasons.size(); i++) s += (i ? "; " : ": ") + reasons[i];
    return s;
}

PatternMatch match_pattern(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt) {
    PatternMatch m;
    const std::string attention = attention_mismatch(plan, outputs, opt);
    if (attention.empty()) {
        m.matched = true;
        m.kind = PatternKind::Attention;
        return m;
    }
    const std::string product = matmul_chain_mismatch(plan, outputs);
    if (product.empty()) {
        m.matched = true;
        m.kind = PatternKind::MatmulChain;
        return m;
    }
    const std::string rows = row_chain_mismatch(plan, outputs);
    if (rows.empty()) {
        m.matched = true;
        m.kind = PatternKind::RowChain;
        return m;
    }
    m.reasons = {std::string(pattern_name(PatternKind::Attention)) + ": " + attention,
                 std::string(pattern_name(PatternKind::MatmulChain)) + ": " + product,
                 std::string(pattern_name(PatternKind::RowChain)) + ": " + rows};
    return m;
}

tir::Program build_pattern(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt) {
    const PatternMatch m = match_pattern(plan, outputs, opt);
    if (!m) throw CompileError(plan.directive + ": " + m.why());
    if (m.kind == PatternKind::Attention) return build_tile_program(plan, outputs, opt);
    if (m.kind == PatternKind::MatmulChain) return build_matmul_chain(plan, outputs, opt);
    const RowChainForm form = row_chain_form(plan, outputs);
    RowChainShape shape = default_row_chain_shape(opt.arch, opt.dtype, opt.row_cols, form, opt.rows);
    if (!form.strided && (opt.row_threads || opt.row_cluster))
        shape = row_chain_shape(opt.dtype, opt.row_cols, opt.row_threads ? opt.row_threads : shape.threads_per_row,
                                opt.row_cluster ? opt.row_cluster : shape.cluster);
    return build_row_chain(plan, outputs, opt.arch, shape);
}

}  // namespace neptune::internal
