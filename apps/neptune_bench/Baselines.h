#ifndef NEPTUNE_BENCH_BASELINES_H
#define NEPTUNE_BENCH_BASELINES_H
/** \file
 * The PyTorch baselines (apps/neptune_bench/baselines.py) as a long-lived child process: it imports
 * torch and creates its CUDA context once, then serves one request per point (`--serve`: a JSON
 * line with baselines.py's command line in, the driver's own output and then one answer line
 * "@@neptune-baselines {json}" out). A sweep thus pays Python's start-up once rather than per point.
 * A request that times out, or a server that dies, fails that request only: the next one starts a
 * fresh server. */
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "Process.h"

namespace neptune::bench {

/** The marker of an answer line on the server's stdout. */
inline constexpr const char *baselines_answer_marker = "@@neptune-baselines ";

/** A request failed: timed out, the server died or could not start, or the driver reported an error. */
class BaselineError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class BaselineServer {
public:
    /** `python` runs `script --serve`; each request may take up to `timeout_s` seconds. Nothing
     * starts until the first request. */
    BaselineServer(std::string python, std::string script, double timeout_s);
    ~BaselineServer();
    BaselineServer(const BaselineServer &) = delete;
    BaselineServer &operator=(const BaselineServer &) = delete;

    /** Sends one request (baselines.py's arguments, without --serve) and returns the driver's result
     * document (what --json FILE would hold). Output lines other than the answer are copied to stdout
     * as they come. Throws BaselineError with the reason. */
    nlohmann::json request(const std::vector<std::string> &args);

    /** Starts of the server so far (1 after the first request, more after restarts). */
    int starts() const { return starts_; }

private:
    void start();
    void stop(bool kill_now);

    std::string python_, script_;
    double timeout_s_;
    Child child_;
    std::string pending_;  // bytes read after the last complete line
    int starts_ = 0;
};

}  // namespace neptune::bench

#endif
