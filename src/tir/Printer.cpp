// The tile IR as a readable listing: the header of a kernel, then its statements, which read like
// the recurrence they compute ("m_new = max(m_new, row_max(s))").
#include <sstream>

#include "tir/PrettyExpr.h"
#include "tir/IR.h"

namespace neptune::tir {

namespace {

std::string expr(const Halide::Expr &e) { return pretty_expr(e); }

std::string join(const std::vector<std::string> &names) {
    std::string s;
    for (size_t i = 0; i < names.size(); i++) s += (i ? ", " : "") + names[i];
    return s;
}

/** "x[base: r0 * n, stride n, valid rows - r0 x 32]": the global slice a load or store touches;
 * TMA loads name it by batch, head and row ("k[batch b, head h / 4, row j * 128]"). */
std::string slice(const Node &n, bool with_stride, bool with_cols) {
    if (n.rank.defined()) {  // "acc_shared@rank p[row strip * 4, valid 4 x 128]"
        std::string s = n.src + "@rank " + expr(n.rank) + "[row " + expr(n.row) + ", valid " + expr(n.valid_rows);
        if (with_cols) s += " x " + expr(n.valid_cols);
        return s + "]";
    }
    if (n.kind == NodeKind::TileLoad && n.copy == CopyKind::Tma)
        return n.tensor + "[batch " + expr(n.batch) + ", head " + expr(n.head) + ", row " + expr(n.row) + "]";
    std::string s = n.tensor + "[base: " + expr(n.base);
    if (with_stride) s += ", stride " + expr(n.row_stride);
    if (n.col_stride.defined()) s += ", column stride " + expr(n.col_stride);
    s += ", valid " + expr(n.valid_rows);
    if (with_cols) s += " x " + expr(n.valid_cols);
    return s + "]";
}

/** A row-strip map's or reduction's bounds on the elements it computes, or "". */
std::string bounds(const Node &n) {
    std::string s;
    if (n.valid_rows.defined()) s += "rows < " + expr(n.valid_rows);
    if (n.valid_cols.defined()) s += (s.empty() ? "" : ", ") + std::string("cols < ") + expr(n.valid_cols);
    return s.empty() ? s : " for " + s;
}

/** The statement's own line, without its body or trailing comment. */
std::string head(const Node &n) {
    switch (n.kind) {
    case NodeKind::TileLoad: return n.dst + " = load " + slice(n, true, true);
    case NodeKind::TileStore: return "store " + slice(n, true, true) + " = " + n.src;
    case NodeKind::RowLoad: return n.dst + " = row_load " + slice(n, true, false) + " else " + expr(n.value);
    case NodeKind::RowStore: return "row_store " + slice(n, false, false) + " = " + n.src;
    case NodeKind::Fill: return n.dst + " = fill(" + expr(n.value) + ")";
    case NodeKind::TileMap: return n.dst + " = map(" + expr(n.value) + ")" + bounds(n);
    case NodeKind::RowMap: return n.dst + " = row_map(" + expr(n.value) + ")" + bounds(n);
    case NodeKind::TileReduce:
        return (n.op == ReduceOp::Max ? n.dst + " = max(" + n.dst + ", row_max(" + n.src + "))"
                                      : n.dst + " = " + n.dst + " + row_sum(" + n.src + ")") +
               bounds(n);
    case NodeKind::TileDot:
        return n.dst + (n.accumulate ? " += " : " = ") + "dot(" + n.a + ", " + n.b + (n.transpose_b ? "^T)" : ")") +
               (n.restart.defined() ? ", restarting where " + expr(n.restart) : "");
    case NodeKind::Convert:
        return n.dst + " = convert(" + n.src + (n.valid_rows.defined() ? ", valid rows " + expr(n.valid_rows) : "") +
               ")";
    case NodeKind::CarriedLoop: {
        std::string s = "for " + n.var + " in [" + expr(n.begin) + ", " + expr(n.end) + ")";
        if (!n.carried.empty()) s += " carrying " + join(n.carried);
        if (n.unroll > 1) s += " unrolled x" + std::to_string(n.unroll);
        return s + " {";
    }
    case NodeKind::IfThen: return "if (" + expr(n.cond) + ") {";
    case NodeKind::Barrier: return "barrier";
    case NodeKind::Release: return "release " + n.src;
    case NodeKind::WarpgroupTurn: {
        const char *m[] = {"begin", "take", "pass", "end"};
        return std::string("warpgroup_turn ") + m[int(n.turn)];
    }
    case NodeKind::LastArrival:
        return "if last of " + expr(n.value) + " arrivals at " + n.tensor + "[" + expr(n.base) + "] {";
    case NodeKind::ClusterMerge: return "cluster merge, run by rank 0 {";
    case NodeKind::ClusterReduce:
        if (n.value.defined())
            return n.dst + " = cluster_" + (n.op == ReduceOp::Max ? "max" : "sum") + " over ranks of (" +
                   join(n.peers) + " at the rank: " + expr(n.value) + ")";
        return n.dst + " = cluster_" + (n.op == ReduceOp::Max ? "max(" : "sum(") + n.src + ")";
    case NodeKind::DotWait: return "wait_dots(pending " + std::to_string(n.pending) + ": " + join(n.fenced) + ")";
    }
    return "?";
}

/** The trailing comment: the copy mechanism and pipeline stage of a load, then the role in brackets
 * and the note. */
std::string comment(const Node &n) {
    std::vector<std::string> parts;
    if (n.kind == NodeKind::TileLoad) {
        std::string copy;
        if (n.copy == CopyKind::CpAsync) copy = "cp.async";
        if (n.copy == CopyKind::Tma) copy = "tma";
        if (n.stage >= 0) copy += (copy.empty() ? "" : " ") + std::string("stage ") + std::to_string(n.stage);
        if (n.multicast > 1) copy += ", multicast to " + std::to_string(n.multicast) + " blocks";
        if (!copy.empty()) parts.push_back(copy);
    }
    if (n.kind == NodeKind::TileDot && n.mma == MmaKind::Wgmma) parts.push_back(n.async ? "wgmma, async" : "wgmma");
    if (n.ring.defined()) parts.push_back("ring " + expr(n.ring));
    if (n.role != Role::None && n.note != role_name(n.role))
        parts.push_back("[" + std::string(role_name(n.role)) + "]");
    if (!n.note.empty()) parts.push_back(n.note);
    if (parts.empty()) return "";
    std::string s = "  // " + parts[0];
    for (size_t i = 1; i < parts.size(); i++) s += "; " + parts[i];
    return s;
}

void print(std::ostringstream &os, const Stmt &s, int indent, bool with_body) {
    const std::string pad(size_t(indent), ' ');
    os << pad << head(*s) << comment(*s);
    if (s->kind != NodeKind::CarriedLoop && s->kind != NodeKind::IfThen && s->kind != NodeKind::LastArrival &&
        s->kind != NodeKind::ClusterMerge)
        return;
    if (with_body)
        for (const Stmt &b : s->body) {
            os << "\n";
            print(os, b, indent + 2, true);
        }
    os << "\n" << pad << "}";
}

std::string grid_dim(const Halide::Expr &e) { return e.defined() ? expr(e) : "1"; }

}  // namespace

std::string to_string(const Stmt &s, bool with_body) {
    std::ostringstream os;
    print(os, s, 0, with_body);
    return os.str();
}

std::string to_string(const Kernel &k) {
    std::ostringstream os;
    os << "kernel " << k.name << "\n";
    std::vector<std::string> tensors;
    for (const TensorParam &t : k.tensors)
        tensors.push_back(t.name + " " + dtype_name(t.elem) + (t.extent.empty() ? "" : "[" + t.extent + "]") +
                          (t.output ? " (out)" : ""));
    os << "  tensors: " << join(tensors) << "\n";
    if (!k.int_params.empty()) os << "  int params: " << join(k.int_params) << "\n";
    if (!k.float_params.empty()) os << "  float params: " << join(k.float_params) << "\n";
    os << "  grid: (" << grid_dim(k.grid_x) << ", " << grid_dim(k.grid_y) << ", " << grid_dim(k.grid_z) << "), "
       << k.warps << (k.warps == 1 ? " warp" : " warps")
       << (k.strip_threads
               ? " (row strips: " + std::to_string(k.strip_threads) + " threads per row, vectors of " +
                     std::to_string(k.strip_vector) + (k.strip_lanes_along_rows ? ", lanes along rows" : "") + ")"
               : " (" + std::to_string(k.rows()) + " rows)")
       << ", shared " << k.shared_bytes << " bytes, " << k.pipeline_stages
       << (k.pipeline_stages == 1 ? " pipeline stage" : " pipeline stages") << "\n";
    if (k.cluster_x.defined()) os << "  clusters: " << expr(k.cluster_x) << " blocks along x\n";
    if (k.producer_warps)
        os << "  roles: " << k.producer_warps << " producer warps (TMA"
           << (k.producer_registers ? ", " + std::to_string(k.producer_registers) + " registers" : std::string())
           << "), " << k.warps << " compute warps"
           << (k.consumer_registers ? " (" + std::to_string(k.consumer_registers) + " registers)" : std::string())
           << "\n";
    for (const TensorMap &m : k.tensor_maps)
        os << "  tensor map " << m.name << ": " << m.tensor << ", boxes of " << m.box_rows << " x 64, L2 promotion "
           << m.l2_promotion << " B\n";
    if (!k.scalars.empty()) {
        os << "  scalars:\n";
        for (const ScalarDef &d : k.scalars) os << "    " << d.name << " = " << expr(d.value) << "\n";
    }
    if (!k.values.empty()) {
        os << "  values:\n";
        for (const auto &[name, type] : k.values) os << "    " << name << ": " << type.str() << "\n";
    }
    os << "  body:\n";
    for (const Stmt &s : k.body) {
        print(os, s, 4, true);
        os << "\n";
    }
    return os.str();
}

std::string to_string(const Program &p) {
    std::ostringstream os;
    os << "program: " << p.kernels.size() << (p.kernels.size() == 1 ? " kernel" : " kernels") << " for "
       << arch_name(p.arch) << "\n";
    for (const Workspace &w : p.workspaces)
        os << "  workspace " << w.name << ": f32[" << expr(w.elements) << "]" << (w.zeroed ? ", zeroed" : "") << "\n";
    for (const Kernel &k : p.kernels) os << "\n" << to_string(k);
    return os.str();
}

}  // namespace neptune::tir
