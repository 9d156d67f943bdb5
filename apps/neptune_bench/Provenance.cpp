#include "Provenance.h"

#include <unistd.h>

#include <ctime>

#include <nvrtc.h>

#include "Process.h"
#include "neptune/runtime/NeptuneRuntime.h"

namespace neptune::bench {

using nlohmann::json;

namespace {

// The first line of an nvidia-smi query, split at commas; empty when nvidia-smi is absent or fails.
std::vector<std::string> smi(const std::string &fields) {
    const CommandOutput o =
        capture_command({"nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader,nounits", "-i", "0"});
    std::vector<std::string> out;
    if (o.status != 0) return out;
    const std::string line = o.output.substr(0, o.output.find('\n'));
    for (size_t b = 0; b <= line.size();) {
        size_t e = line.find(',', b);
        if (e == std::string::npos) e = line.size();
        std::string f = line.substr(b, e - b);
        f.erase(0, f.find_first_not_of(' '));
        f.erase(f.find_last_not_of(' ') + 1);
        out.push_back(f);
        b = e + 1;
    }
    return out;
}

json field(const std::vector<std::string> &v, size_t i) {
    return i < v.size() && !v[i].empty() && v[i] != "[N/A]" ? json(v[i]) : json(nullptr);
}

}  // namespace

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

json provenance(const std::vector<std::string> &command) {
    json gpu = nullptr;
    neptune_device_info info{};
    if (neptune_get_device_info(&info) == NEPTUNE_OK)
        gpu = {{"name", info.name},
               {"sms", info.sm_count},
               {"compute_capability", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor)},
               {"memory_bytes", info.total_memory},
               {"l2_bytes", info.l2_bytes}};
    int major = 0, minor = 0;
    const json nvrtc = nvrtcVersion(&major, &minor) == NVRTC_SUCCESS
                           ? json(std::to_string(major) + "." + std::to_string(minor))
                           : json(nullptr);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const std::vector<std::string> s = smi("driver_version,clocks.max.sm,clocks.max.mem");
    return {{"gpu", gpu},     {"driver", field(s, 0)}, {"max_sm_mhz", field(s, 1)}, {"max_mem_mhz", field(s, 2)},
            {"nvrtc", nvrtc}, {"host", host},          {"date", utc_now()},         {"command", command}};
}

json sm_clocks() {
    const std::vector<std::string> s = smi("clocks.sm,clocks.max.sm");
    return {{"sm_mhz", field(s, 0)}, {"max_sm_mhz", field(s, 1)}};
}

void add_baseline_provenance(json &run, const json &doc) {
    for (const auto &[mine, theirs] : {std::pair<const char *, const char *>{"torch", "torch"},
                                       {"triton", "triton"},
                                       {"cudnn", "cudnn"},
                                       {"torch_cuda", "cuda"}})
        if ((!run.contains(mine) || run[mine].is_null()) && doc.contains(theirs)) run[mine] = doc[theirs];
}

}  // namespace neptune::bench
