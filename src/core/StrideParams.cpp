#include "core/StrideParams.h"

#include <cctype>

namespace neptune::internal {

namespace {
constexpr const char *kInfix = "_vstride_";
}

std::string stride_param(const std::string &tensor, int dim) { return tensor + kInfix + std::to_string(dim); }

bool parse_stride_param(const std::string &param, std::string *tensor, int *dim) {
    const size_t at = param.rfind(kInfix);
    if (at == std::string::npos || at == 0) return false;
    const std::string digits = param.substr(at + std::string(kInfix).size());
    if (digits.empty() || digits.size() > 1 || !std::isdigit(static_cast<unsigned char>(digits[0]))) return false;
    const int d = digits[0] - '0';
    if (d < 1) return false;
    *tensor = param.substr(0, at);
    *dim = d;
    return true;
}

}  // namespace neptune::internal
