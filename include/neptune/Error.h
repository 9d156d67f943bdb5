#ifndef NEPTUNE_ERROR_H
#define NEPTUNE_ERROR_H
/** \file
 * Neptune's two error types: CompileError for the user's mistakes (an illegal
 * directive, a chain with no derivable repair), InternalError for Neptune's
 * bugs. InternalError does not derive from CompileError, so it can never pass
 * for a user error in a test. */
#include <stdexcept>
#include <string>

namespace neptune {

class CompileError : public std::runtime_error {
public:
    explicit CompileError(const std::string &msg) : std::runtime_error(msg) {}
};

class InternalError : public std::runtime_error {
public:
    explicit InternalError(const std::string &msg) : std::runtime_error("Neptune internal error: " + msg) {}
};

}  // namespace neptune

#endif
