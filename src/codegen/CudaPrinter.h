#ifndef NEPTUNE_CODEGEN_CUDA_PRINTER_H
#define NEPTUNE_CODEGEN_CUDA_PRINTER_H
/** \file
 * What every CUDA emitter shares: identifiers, element types and literals as CUDA spells them, a
 * kernel's signature, and the printer of Halide expressions over a kernel's values. */
#include <map>
#include <string>

#include "tir/IR.h"

namespace neptune::internal {

/** `n` with every character that C++ does not allow in a name replaced by '_'. */
std::string ident(const std::string &n);
/** The device library's type of a tensor element. */
const char *elem_type(DType t);
/** A float literal (infinities through nd::neg_inf()). */
std::string float_literal(double v);
/** The per-row copy of a warp-rows row vector that a tile map reads (every lane, all 16 rows). */
std::string row_copy(const std::string &n);
/** The kernel's declaration up to its opening brace, parameters in the order launchers pass them. */
std::string signature(const tir::Kernel &k);

/** How a Variable reads inside an elementwise map. */
enum class Context { Scalar, Tile, Row };

/** Halide expressions as CUDA over the values of one kernel. */
class ExprPrinter {
public:
    ExprPrinter(const tir::Kernel &k, Context c) : k_(k), ctx_(c) {}
    /** Reads the named 1-D tensors, each read at `t(col)` or at one `t(offset + col)` only, from a
     * local array of the thread's vector, `array[e]` (row strips: the tensor's columns loaded a
     * vector at a time from the offset). */
    ExprPrinter &with_column_vectors(const std::map<std::string, std::string> *arrays) {
        column_vectors_ = arrays;
        return *this;
    }

    std::string print(const Halide::Expr &e) const;

private:
    std::string bin(const Halide::Expr &a, const char *op, const Halide::Expr &b) const;
    std::string call(const Halide::Internal::Call *c) const;
    std::string variable(const std::string &n) const;

    const tir::Kernel &k_;
    Context ctx_;
    const std::map<std::string, std::string> *column_vectors_ = nullptr;
};

}  // namespace neptune::internal

#endif
