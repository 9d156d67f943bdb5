#include "interop/Descriptor.h"

#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace neptune::interop {

// ---- Integer expressions ------------------------------------------------------------------------

struct IntExpr::Node {
    enum Kind { Const, Name, Op } kind = Const;
    int64_t value = 0;
    std::string name;  // Name: the variable; Op: the operator
    std::vector<std::shared_ptr<const Node>> args;
};

namespace {

using NodePtr = std::shared_ptr<const IntExpr::Node>;

class Parser {
public:
    explicit Parser(const std::string &t) : text_(t) {}

    NodePtr parse_all() {
        NodePtr n = parse();
        skip();
        if (pos_ != text_.size()) fail("text after the expression");
        return n;
    }

private:
    [[noreturn]] void fail(const std::string &why) const {
        throw std::invalid_argument("integer expression '" + text_ + "': " + why + " at offset " +
                                    std::to_string(pos_));
    }
    void skip() {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) pos_++;
    }
    std::string token() {
        skip();
        const size_t begin = pos_;
        while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_])) && text_[pos_] != '(' &&
               text_[pos_] != ')')
            pos_++;
        if (begin == pos_) fail("expected a name, a number or an operator");
        return text_.substr(begin, pos_ - begin);
    }
    NodePtr parse() {
        skip();
        if (pos_ >= text_.size()) fail("unexpected end");
        auto n = std::make_shared<IntExpr::Node>();
        if (text_[pos_] == '(') {
            pos_++;
            n->kind = IntExpr::Node::Op;
            n->name = token();
            static const std::map<std::string, std::pair<size_t, size_t>> arity = {
                {"+", {2, 2}},   {"-", {2, 2}},   {"*", {2, 2}},  {"/", {2, 2}},  {"%", {2, 2}},
                {"min", {2, 2}}, {"max", {2, 2}}, {"==", {2, 2}}, {"!=", {2, 2}}, {"<", {2, 2}},
                {"<=", {2, 2}},  {"&&", {2, 2}},  {"||", {2, 2}}, {"!", {1, 1}},  {"?", {3, 3}}};
            auto a = arity.find(n->name);
            if (a == arity.end()) fail("unknown operator '" + n->name + "'");
            for (;;) {
                skip();
                if (pos_ < text_.size() && text_[pos_] == ')') break;
                n->args.push_back(parse());
            }
            pos_++;
            if (n->args.size() < a->second.first || n->args.size() > a->second.second)
                fail("'" + n->name + "' takes " + std::to_string(a->second.first) + " operands");
            return n;
        }
        const std::string t = token();
        if (std::isdigit(static_cast<unsigned char>(t[0])) || (t[0] == '-' && t.size() > 1)) {
            size_t used = 0;
            n->value = std::stoll(t, &used);
            if (used != t.size()) fail("bad number '" + t + "'");
        } else {
            n->kind = IntExpr::Node::Name;
            n->name = t;
        }
        return n;
    }

    const std::string &text_;
    size_t pos_ = 0;
};

// Halide's Euclidean division: the remainder is never negative; division by zero gives zero.
int64_t euclid_div(int64_t a, int64_t b) {
    if (b == 0) return 0;
    int64_t q = a / b, r = a % b;
    if (r < 0) q += b > 0 ? -1 : 1;
    return q;
}
int64_t euclid_mod(int64_t a, int64_t b) {
    if (b == 0) return 0;
    const int64_t r = a % b;
    return r < 0 ? r + (b > 0 ? b : -b) : r;
}

int64_t eval_node(const IntExpr::Node &n, const std::map<std::string, int64_t> &vars, const std::string &text) {
    switch (n.kind) {
    case IntExpr::Node::Const: return n.value;
    case IntExpr::Node::Name: {
        auto it = vars.find(n.name);
        if (it == vars.end()) throw std::invalid_argument("integer expression '" + text + "': no value for " + n.name);
        return it->second;
    }
    case IntExpr::Node::Op: break;
    }
    const std::string &op = n.name;
    const int64_t a = eval_node(*n.args[0], vars, text);
    if (op == "!") return !a;
    if (op == "?") return a ? eval_node(*n.args[1], vars, text) : eval_node(*n.args[2], vars, text);
    const int64_t b = eval_node(*n.args[1], vars, text);
    if (op == "+") return a + b;
    if (op == "-") return a - b;
    if (op == "*") return a * b;
    if (op == "/") return euclid_div(a, b);
    if (op == "%") return euclid_mod(a, b);
    if (op == "min") return a < b ? a : b;
    if (op == "max") return a > b ? a : b;
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    if (op == "<") return a < b;
    if (op == "<=") return a <= b;
    if (op == "&&") return a && b;
    return a || b;  // "||": the parser admits no other operator
}

// ---- base64 (RFC 4648). No Debian package ships a header-only codec; libb64 would add a shared
// library that the GPU machine lacks. -------------------------------------------------------------

const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

IntExpr IntExpr::parse(const std::string &text) {
    IntExpr e;
    e.text_ = text;
    e.root_ = Parser(text).parse_all();
    return e;
}

int64_t IntExpr::eval(const std::map<std::string, int64_t> &vars) const {
    if (!root_) throw std::invalid_argument("integer expression: empty");
    return eval_node(*root_, vars, text_);
}

std::string content_hash(const std::string &text) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 1099511628211ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

std::string base64_encode(const std::string &bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const uint32_t v =
            uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
        for (int s = 18; s >= 0; s -= 6) out += alphabet[(v >> s) & 63];
    }
    if (i < bytes.size()) {
        uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
        if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
        out += alphabet[(v >> 18) & 63];
        out += alphabet[(v >> 12) & 63];
        out += i + 1 < bytes.size() ? alphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::string base64_decode(const std::string &text) {
    std::string out;
    out.reserve(text.size() / 4 * 3);
    uint32_t acc = 0;
    int bits = 0;
    for (char c : text) {
        if (c == '=') break;
        const char *p = c ? std::char_traits<char>::find(alphabet, 64, c) : nullptr;
        if (!p) throw std::invalid_argument("base64: unexpected character");
        acc = acc << 6 | uint32_t(p - alphabet);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += char((acc >> bits) & 0xff);
        }
    }
    return out;
}

namespace {

using nlohmann::json;

json to_json(const GroupDescriptor &d, bool with_images) {
    json j = {{"format", "neptune-extern-7"},
              {"name", d.name},
              {"jit", d.jit},
              {"scalars", d.scalars},
              {"chunks", d.chunks},
              {"split_blocks", d.split_blocks},
              {"split_keys", d.split_keys},
              {"copy_of_group", d.copy_of_group},
              {"copy_of_workspace", d.copy_of_workspace}};
    j["buffers"] = json::array();
    for (const TensorSpec &t : d.buffers)
        j["buffers"].push_back({{"name", t.name},
                                {"output", t.output},
                                {"type_code", t.type_code},
                                {"bits", t.bits},
                                {"dims", t.dims},
                                {"strided", t.strided}});
    j["constraints"] = json::array();
    for (const Constraint &c : d.constraints)
        j["constraints"].push_back({{"expr", c.expr}, {"message", c.message}, {"strides", c.strides}});
    j["sets"] = json::array();
    for (const KernelSet &s : d.sets) {
        json js = {{"arch", s.arch},       {"codes", s.codes},         {"min_cc", s.min_cc},
                   {"max_cc", s.max_cc},   {"tile_keys", s.tile_keys}, {"stages", s.stages},
                   {"cluster", s.cluster}, {"when", s.when},           {"image_of", s.image_of}};
        if (with_images) js["image"] = base64_encode(s.image);
        js["source"] = s.source;
        js["kernels"] = json::array();
        for (const KernelSpec &k : s.kernels) {
            json maps = json::array();
            for (const TensorMapSpec &m : k.maps)
                maps.push_back({{"tensor", m.tensor},
                                {"dims", {m.dims[0], m.dims[1], m.dims[2], m.dims[3]}},
                                {"strides", {m.strides[0], m.strides[1], m.strides[2]}},
                                {"box_rows", m.box_rows},
                                {"l2_promotion", m.l2_promotion}});
            js["kernels"].push_back({{"name", k.name},
                                     {"grid", {k.grid[0], k.grid[1], k.grid[2]}},
                                     {"threads", k.threads},
                                     {"shared_bytes", k.shared_bytes},
                                     {"tensors", k.tensors},
                                     {"maps", maps},
                                     {"ints", k.ints},
                                     {"cluster", k.cluster}});
        }
        js["workspaces"] = json::array();
        for (const WorkspaceSpec &w : s.workspaces)
            js["workspaces"].push_back({{"name", w.name},
                                        {"elements", w.elements},
                                        {"zeroed", w.zeroed},
                                        {"element_bytes", w.element_bytes},
                                        {"per_thread", w.per_thread}});
        j["sets"].push_back(js);
    }
    return j;
}

}  // namespace

std::string write_descriptor(const GroupDescriptor &d) {
    const std::string body = to_json(d, true).dump();
    // The id comes first (json would sort it among the keys): the launcher's cache compares a blob's
    // leading bytes.
    return "{\"id\":\"" + content_hash(body) + "\"," + body.substr(1);
}

GroupDescriptor read_descriptor(const std::string &text) {
    GroupDescriptor d;
    try {
        const json j = json::parse(text);
        if (j.at("format") != "neptune-extern-7")
            throw std::invalid_argument("unknown format " + j.at("format").dump());
        d.id = j.at("id").get<std::string>();
        d.name = j.at("name").get<std::string>();
        d.jit = j.at("jit").get<bool>();
        d.scalars = j.at("scalars").get<std::vector<std::string>>();
        d.chunks = j.at("chunks").get<int>();
        d.split_blocks = j.at("split_blocks").get<std::string>();
        d.split_keys = j.at("split_keys").get<std::string>();
        d.copy_of_group = j.at("copy_of_group").get<std::string>();
        d.copy_of_workspace = j.at("copy_of_workspace").get<std::string>();
        for (const json &b : j.at("buffers"))
            d.buffers.push_back({b.at("name"), b.at("output"), b.at("type_code"), b.at("bits"),
                                 b.at("dims").get<std::vector<std::string>>(), b.at("strided").get<bool>()});
        for (const json &c : j.at("constraints"))
            d.constraints.push_back({c.at("expr"), c.at("message"), c.at("strides").get<bool>()});
        for (const json &js : j.at("sets")) {
            KernelSet s;
            s.arch = js.at("arch");
            s.codes = js.at("codes");
            s.min_cc = js.at("min_cc");
            s.max_cc = js.at("max_cc");
            s.tile_keys = js.at("tile_keys");
            s.stages = js.at("stages");
            s.cluster = js.at("cluster").get<bool>();
            s.when = js.at("when").get<std::string>();
            s.image_of = js.at("image_of").get<int>();
            s.image = base64_decode(js.at("image").get<std::string>());
            s.source = js.at("source").get<std::string>();
            for (const json &k : js.at("kernels")) {
                KernelSpec ks;
                ks.name = k.at("name");
                for (int g = 0; g < 3; g++) ks.grid[g] = k.at("grid").at(g);
                ks.threads = k.at("threads");
                ks.shared_bytes = k.at("shared_bytes");
                ks.tensors = k.at("tensors").get<std::vector<std::string>>();
                for (const json &m : k.at("maps")) {
                    TensorMapSpec ms;
                    ms.tensor = m.at("tensor");
                    for (int i = 0; i < 4; i++) ms.dims[i] = m.at("dims").at(i);
                    for (int i = 0; i < 3; i++) ms.strides[i] = m.at("strides").at(i);
                    ms.box_rows = m.at("box_rows");
                    ms.l2_promotion = m.at("l2_promotion");
                    ks.maps.push_back(ms);
                }
                ks.ints = k.at("ints").get<std::vector<std::string>>();
                ks.cluster = k.at("cluster").get<std::string>();
                s.kernels.push_back(ks);
            }
            for (const json &w : js.at("workspaces"))
                s.workspaces.push_back({w.at("name"), w.at("elements"), w.at("zeroed").get<bool>(),
                                        w.at("element_bytes").get<int>(), w.at("per_thread").get<bool>()});
            d.sets.push_back(std::move(s));
        }
    } catch (const std::exception &e) {  // json's errors and ours alike
        throw std::invalid_argument(std::string("Neptune extern descriptor: ") + e.what());
    }
    return d;
}

}  // namespace neptune::interop
