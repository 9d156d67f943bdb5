#include "Baselines.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace neptune::bench {

BaselineServer::BaselineServer(std::string python, std::string script, double timeout_s)
    : python_(std::move(python)), script_(std::move(script)), timeout_s_(timeout_s) {}

BaselineServer::~BaselineServer() { stop(false); }

void BaselineServer::start() {
    // A write to a server that has died must fail with EPIPE, not kill the benchmark.
    signal(SIGPIPE, SIG_IGN);
    try {
        child_ = spawn_piped({python_, script_, "--serve"}, {"PYTHONUNBUFFERED=1"});
    } catch (const std::runtime_error &e) {
        throw BaselineError(std::string("cannot start the baseline driver: ") + e.what());
    }
    pending_.clear();
    starts_++;
}

void BaselineServer::stop(bool kill_now) {
    if (child_.pid < 0) return;
    close(child_.to_stdin);  // end of requests: the server's loop ends
    close(child_.from_stdout);
    int st = 0;
    // Give a server at rest a moment to exit by itself; a hung or timed-out one is killed.
    for (int i = 0; !kill_now && i < 50; i++) {
        if (waitpid(child_.pid, &st, WNOHANG) == child_.pid) {
            child_ = {};
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(child_.pid, SIGKILL);
    waitpid(child_.pid, &st, 0);
    child_ = {};
}

nlohmann::json BaselineServer::request(const std::vector<std::string> &args) {
    if (child_.pid < 0) start();
    const std::string line = nlohmann::json({{"argv", args}}).dump() + "\n";
    for (size_t off = 0; off < line.size();) {
        const ssize_t n = write(child_.to_stdin, line.data() + off, line.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            stop(true);
            throw BaselineError(std::string("the baseline driver is not reading requests (") + std::strerror(errno) +
                                "); it has probably exited: see its messages above");
        }
        off += size_t(n);
    }
    std::fflush(stdout);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    const std::string marker = baselines_answer_marker;
    for (;;) {
        // Every complete line: the answer, or the driver's own output to pass on.
        for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
            const std::string got = pending_.substr(0, nl);
            pending_.erase(0, nl + 1);
            if (got.compare(0, marker.size(), marker) != 0) {
                std::printf("%s\n", got.c_str());
                continue;
            }
            std::fflush(stdout);
            nlohmann::json answer;
            try {
                answer = nlohmann::json::parse(got.substr(marker.size()));
            } catch (const nlohmann::json::exception &e) {
                throw BaselineError(std::string("the baseline driver's answer is not JSON: ") + e.what());
            }
            const int rc = answer.value("rc", 1);
            if (rc != 0 || !answer.contains("result") || !answer["result"].is_object())
                throw BaselineError("the baseline driver failed (exit status " + std::to_string(rc) +
                                    "): " + answer.value("error", std::string("no reason given")));
            return answer["result"];
        }
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            stop(true);
            throw BaselineError("the baseline driver did not answer within " + std::to_string(int(timeout_s_)) +
                                " s; it was stopped (the next request starts a new one)");
        }
        pollfd pfd{child_.from_stdout, POLLIN, 0};
        const int r = poll(&pfd, 1, int(std::min<long long>(left.count(), 1000)));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        char buf[4096];
        const ssize_t n = read(child_.from_stdout, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (!pending_.empty()) std::printf("%s\n", pending_.c_str());
            close(child_.to_stdin);
            close(child_.from_stdout);
            int st = 0;
            waitpid(child_.pid, &st, 0);
            child_ = {};
            const std::string how = WIFEXITED(st) ? "exited with status " + std::to_string(WEXITSTATUS(st))
                                                  : "was killed by signal " + std::to_string(WTERMSIG(st));
            throw BaselineError("the baseline driver " + how + " before answering (see its messages above)");
        }
        pending_.append(buf, size_t(n));
    }
}

}  // namespace neptune::bench
