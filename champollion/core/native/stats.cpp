// sacreBLEU 2.6's per-segment TER, chrF(++) and BLEU statistics, compiled.
//
// Python keeps sacreBLEU's own preprocessing (tokenizers, lowercasing); this
// module receives the preprocessed strings and does what sacreBLEU does after
// `str.split()`: TER's beam edit distance with its shift heuristic
// (sacrebleu/metrics/lib_ter.py), chrF's character and word n-gram matches
// (metrics/chrf.py) and BLEU's clipped n-gram counts (metrics/bleu.py).
// Every branch, limit and tie-break mirrors the Python so the statistics are
// bit-identical; tests/test_native_stats.py checks that.
//
// Strings are read as Python code points (any str, lone surrogates included),
// so "equal token" means exactly what Python's `==` means.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

using Text = std::u32string;
using View = std::u32string_view;

// ---------------------------------------------------------------- input ----

// The code points Python's str.split() splits on (Py_UNICODE_ISSPACE).
bool is_python_space(char32_t c) {
    switch (c) {
        case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
        case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
        case 0x85: case 0xA0: case 0x1680:
        case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
            return true;
        default:
            return c >= 0x2000 && c <= 0x200A;
    }
}

Text to_text(py::handle object, const char* what) {
    PyObject* s = object.ptr();
    if (!PyUnicode_Check(s)) {
        throw py::type_error(std::string(what) + " must be str, not " + Py_TYPE(s)->tp_name);
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) throw py::error_already_set();
#endif
    const Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const int kind = PyUnicode_KIND(s);
    const void* data = PyUnicode_DATA(s);
    Text out(static_cast<size_t>(n), U'\0');
    for (Py_ssize_t i = 0; i < n; ++i) out[i] = PyUnicode_READ(kind, data, i);
    return out;
}

// Hypotheses and per-entry reference lists, copied out of Python objects so
// the computation can run without the GIL.
struct Batch {
    std::vector<Text> hypotheses;
    std::vector<std::vector<Text>> references;
};

Batch read_batch(const py::sequence& hypotheses, const py::sequence& references) {
    if (py::len(hypotheses) != py::len(references)) {
        throw py::value_error("hypotheses and references_per_entry differ in length");
    }
    Batch batch;
    const size_t n = py::len(hypotheses);
    batch.hypotheses.reserve(n);
    batch.references.resize(n);
    for (size_t i = 0; i < n; ++i) {
        batch.hypotheses.push_back(to_text(hypotheses[i], "hypothesis"));
        py::sequence refs = py::reinterpret_borrow<py::sequence>(references[i]);
        if (py::len(refs) == 0) throw py::value_error("an entry has no reference");
        for (auto ref : refs) batch.references[i].push_back(to_text(ref, "reference"));
    }
    return batch;
}

// str.split(): views into `text`.
std::vector<View> split(const Text& text) {
    std::vector<View> words;
    size_t i = 0;
    const size_t n = text.size();
    while (i < n) {
        while (i < n && is_python_space(text[i])) ++i;
        const size_t start = i;
        while (i < n && !is_python_space(text[i])) ++i;
        if (i > start) words.emplace_back(text.data() + start, i - start);
    }
    return words;
}

// Words to small integer ids (equal ids <=> equal strings) within one entry;
// the ids, as char32_t, make word sequences comparable like character ones.
class Interner {
  public:
    Text ids(const std::vector<View>& words) {
        Text out;
        out.reserve(words.size());
        for (View w : words) out.push_back(id(w));
        return out;
    }
    char32_t id(View word) {
        auto [it, inserted] = table_.emplace(word, static_cast<char32_t>(table_.size()));
        return it->second;
    }
    size_t size() const { return table_.size(); }
  private:
    std::unordered_map<View, char32_t> table_;
};

// ------------------------------------------------------------------ TER ----

constexpr int64_t kInfinity = 10000000000000000LL;  // lib_ter._INT_INFINITY
constexpr int kMaxShiftSize = 10;
constexpr int kMaxShiftDist = 50;
constexpr int kBeamWidth = 25;
constexpr int kMaxShiftCandidates = 1000;

enum Op : char { kNop = ' ', kSub = 's', kIns = 'i', kDel = 'd', kUndef = 'x' };

// lib_ter.BeamEditDistance for one reference and one hypothesis length (shifts
// keep the length). Its trie cache only saves work: a matrix row depends on the
// hypothesis prefix alone, so candidates here restart from the base
// hypothesis's row at their common prefix instead.
class BeamEditDistance {
  public:
    BeamEditDistance(const Text& ref, size_t hyp_length)
        : ref_(ref), nr_(ref.size()), nh_(hyp_length), width_(nr_ + 1) {
        ratio_ = nh_ ? static_cast<double>(nr_) / static_cast<double>(nh_) : 1.0;
        beam_ = kBeamWidth;
        if (kBeamWidth < ratio_ / 2) beam_ = static_cast<int64_t>(std::ceil(ratio_ / 2 + kBeamWidth));
        cost_.assign((nh_ + 1) * width_, kInfinity);
        op_.assign((nh_ + 1) * width_, kUndef);
        for (size_t j = 0; j <= nr_; ++j) {
            cost_[j] = static_cast<int64_t>(j);
            op_[j] = kIns;
        }
        rolling_[0].assign(width_, kInfinity);
        rolling_[1].assign(width_, kInfinity);
    }

    // Full matrix for `hyp` (kept as the base for candidates) and its trace.
    int64_t base(const Text& hyp, std::string& trace) {
        base_ = hyp;
        for (size_t i = 1; i <= nh_; ++i) {
            std::fill(cost_.begin() + i * width_, cost_.begin() + (i + 1) * width_, kInfinity);
            std::fill(op_.begin() + i * width_, op_.begin() + (i + 1) * width_, kUndef);
        }
        for (size_t i = 1; i <= nh_; ++i) {
            fill_row(i, hyp, &cost_[(i - 1) * width_], &cost_[i * width_], &op_[i * width_]);
        }
        trace.clear();
        size_t i = nh_, j = nr_;
        while (i > 0 || j > 0) {
            const char op = op_[i * width_ + j];
            trace.push_back(op);
            if (op == kSub || op == kNop) {
                --i;
                --j;
            } else if (op == kIns) {
                --j;
            } else if (op == kDel) {
                --i;
            } else {
                throw std::runtime_error("unknown operation 'x'");
            }
        }
        std::reverse(trace.begin(), trace.end());
        return cost_[nh_ * width_ + nr_];
    }

    // Edit distance of `hyp`, reusing the base's rows over the common prefix.
    int64_t cost(const Text& hyp) {
        size_t prefix = 0;
        while (prefix < nh_ && hyp[prefix] == base_[prefix]) ++prefix;
        if (prefix == nh_) return cost_[nh_ * width_ + nr_];
        const int64_t* previous = &cost_[prefix * width_];
        int slot = 0;
        for (size_t i = prefix + 1; i <= nh_; ++i) {
            std::vector<int64_t>& row = rolling_[slot];
            // Reset only what the last use of this buffer wrote.
            std::fill(row.begin() + written_[slot].first, row.begin() + written_[slot].second, kInfinity);
            written_[slot] = fill_row(i, hyp, previous, row.data(), nullptr);
            previous = row.data();
            slot ^= 1;
        }
        return previous[nr_];
    }

  private:
    // Row i from row i-1, over the beam; returns the written column range.
    std::pair<size_t, size_t> fill_row(size_t i, const Text& hyp, const int64_t* prev, int64_t* cur, char* ops) {
        const int64_t diagonal = static_cast<int64_t>(std::floor(static_cast<double>(i) * ratio_));
        const int64_t min_j = std::max<int64_t>(0, diagonal - beam_);
        int64_t max_j = std::min<int64_t>(static_cast<int64_t>(nr_) + 1, diagonal + beam_);
        if (i == nh_) max_j = static_cast<int64_t>(nr_) + 1;
        if (min_j >= max_j) return {0, 0};
        const char32_t word = hyp[i - 1];
        for (int64_t j = min_j; j < max_j; ++j) {
            if (j == 0) {
                cur[0] = prev[0] + 1;
                if (ops) ops[0] = kDel;
                continue;
            }
            // Preference as sacreBLEU: substitution/no-op, deletion, insertion.
            const bool same = word == ref_[j - 1];
            int64_t best = cur[j];
            char best_op = ops ? ops[j] : static_cast<char>(kUndef);
            const int64_t diag = prev[j - 1] + (same ? 0 : 1);
            if (best > diag) { best = diag; best_op = same ? kNop : kSub; }
            const int64_t up = prev[j] + 1;
            if (best > up) { best = up; best_op = kDel; }
            const int64_t left = cur[j - 1] + 1;
            if (best > left) { best = left; best_op = kIns; }
            cur[j] = best;
            if (ops) ops[j] = best_op;
        }
        return {static_cast<size_t>(min_j), static_cast<size_t>(max_j)};
    }

    const Text& ref_;
    size_t nr_, nh_, width_;
    double ratio_;
    int64_t beam_;
    Text base_;
    std::vector<int64_t> cost_;
    std::vector<char> op_;
    std::vector<int64_t> rolling_[2];
    std::pair<size_t, size_t> written_[2] = {{0, 0}, {0, 0}};
};

// lib_ter._perform_shift, with Python's clamped slicing.
void append_slice(Text& out, const Text& words, int64_t a, int64_t b) {
    const int64_t n = static_cast<int64_t>(words.size());
    a = std::clamp<int64_t>(a, 0, n);
    b = std::clamp<int64_t>(b, 0, n);
    if (a < b) out.append(words, static_cast<size_t>(a), static_cast<size_t>(b - a));
}

void perform_shift(const Text& words, int64_t start, int64_t length, int64_t target, Text& out) {
    out.clear();
    const int64_t n = static_cast<int64_t>(words.size());
    if (target < start) {
        append_slice(out, words, 0, target);
        append_slice(out, words, start, start + length);
        append_slice(out, words, target, start);
        append_slice(out, words, start + length, n);
    } else if (target > start + length) {
        append_slice(out, words, 0, start);
        append_slice(out, words, start + length, target);
        append_slice(out, words, start, start + length);
        append_slice(out, words, target, n);
    } else {
        append_slice(out, words, 0, start);
        append_slice(out, words, start + length, length + target);
        append_slice(out, words, start, start + length);
        append_slice(out, words, length + target, n);
    }
}

struct ShiftResult {
    int64_t delta;
    Text words;
};

// lib_ter._shift: the best shift of `hyp` (delta <= 0: none helps).
ShiftResult best_shift(const Text& hyp, const Text& ref, BeamEditDistance& ed, int64_t& checked,
                       int64_t& pre_score) {
    std::string trace;
    pre_score = ed.base(hyp, trace);
    const int64_t nh = static_cast<int64_t>(hyp.size());
    const int64_t nr = static_cast<int64_t>(ref.size());

    // trace_to_alignment of the flipped trace: 'i' and 'd' swap roles.
    std::vector<int64_t> align(static_cast<size_t>(nr), 0);
    std::vector<int> hyp_err, ref_err;
    hyp_err.reserve(nh);
    ref_err.reserve(nr);
    int64_t pos_hyp = -1, pos_ref = -1;
    for (char op : trace) {
        if (op == kNop || op == kSub) {
            ++pos_hyp;
            ++pos_ref;
            align[pos_ref] = pos_hyp;
            const int err = op == kSub ? 1 : 0;
            hyp_err.push_back(err);
            ref_err.push_back(err);
        } else if (op == kDel) {  // flipped: insertion, a hypothesis word
            ++pos_hyp;
            hyp_err.push_back(1);
        } else {  // kIns, flipped: deletion, a reference word
            ++pos_ref;
            align[pos_ref] = pos_hyp;
            ref_err.push_back(1);
        }
    }

    bool found = false;
    int64_t best_delta = 0, best_length = 0, best_start = 0, best_idx = 0;
    Text shifted, best_words;
    // lib_ter._find_shifted_pairs, in its order.
    for (int64_t start_h = 0; start_h < nh; ++start_h) {
        bool stop = false;
        for (int64_t start_r = 0; start_r < nr && !stop; ++start_r) {
            if (std::llabs(start_r - start_h) > kMaxShiftDist) continue;
            int64_t length = 0;
            while (hyp[start_h + length] == ref[start_r + length] && length < kMaxShiftSize) {
                ++length;
                // --- the body of _shift's loop for (start_h, start_r, length)
                bool skip = false;
                int hyp_wrong = 0, ref_wrong = 0;
                for (int64_t k = start_h; k < start_h + length; ++k) hyp_wrong += hyp_err[k];
                for (int64_t k = start_r; k < start_r + length; ++k) ref_wrong += ref_err[k];
                if (hyp_wrong == 0 || ref_wrong == 0) skip = true;
                if (!skip && start_h <= align[start_r] && align[start_r] < start_h + length) skip = true;
                if (!skip) {
                    int64_t prev_idx = -1;
                    for (int64_t offset = -1; offset < length; ++offset) {
                        const int64_t r = start_r + offset;
                        int64_t idx;
                        if (r == -1) {
                            idx = 0;
                        } else if (r >= 0 && r < nr) {
                            idx = align[r] + 1;
                        } else {
                            break;
                        }
                        if (idx == prev_idx) continue;
                        prev_idx = idx;
                        perform_shift(hyp, start_h, length, idx, shifted);
                        const int64_t delta = pre_score - ed.cost(shifted);
                        ++checked;
                        // Tercom's ranking: largest gain, longest, earliest start, earliest target.
                        const bool better = !found || delta > best_delta ||
                            (delta == best_delta && (length > best_length ||
                            (length == best_length && (-start_h > -best_start ||
                            (start_h == best_start && -idx > -best_idx)))));
                        if (better) {
                            found = true;
                            best_delta = delta;
                            best_length = length;
                            best_start = start_h;
                            best_idx = idx;
                            best_words = shifted;
                        }
                    }
                    if (checked >= kMaxShiftCandidates) {
                        stop = true;
                        break;
                    }
                }
                // ---
                if (nh == start_h + length || nr == start_r + length) break;
            }
        }
        if (stop) break;
    }
    if (!found) return {0, hyp};
    return {best_delta, best_words};
}

// lib_ter.translation_edit_rate: (number of edits, reference length).
std::pair<int64_t, int64_t> translation_edit_rate(const Text& hyp, const Text& ref) {
    const int64_t nr = static_cast<int64_t>(ref.size());
    if (nr == 0) return {static_cast<int64_t>(hyp.size()), 0};
    BeamEditDistance ed(ref, hyp.size());
    int64_t shifts = 0, checked = 0, pre_score = 0;
    Text input = hyp;
    while (true) {
        ShiftResult result = best_shift(input, ref, ed, checked, pre_score);
        if (checked >= kMaxShiftCandidates) break;
        if (result.delta <= 0) break;
        ++shifts;
        input = std::move(result.words);
    }
    // pre_score is the edit distance of `input` (the last base).
    return {shifts + pre_score, nr};
}

// ---------------------------------------------------------------- n-grams --

// The n-grams of one order of a sequence, sorted so equal ones are adjacent.
// Up to 6 symbols below 2^21 (every code point; word ids of any sane
// segment) pack into one 128-bit integer, which sorts far faster than views.
using Packed = unsigned __int128;
constexpr size_t kMaxPacked = 6;
constexpr char32_t kPackedSymbols = 1u << 21;

struct Grams {
    bool packed = true;
    std::vector<Packed> keys;
    std::vector<View> views;
    size_t size() const { return packed ? keys.size() : views.size(); }
};

Grams sorted_ngrams(const Text& sequence, size_t n, bool packed) {
    Grams grams;
    grams.packed = packed && n <= kMaxPacked;
    if (sequence.size() < n) return grams;
    const size_t count = sequence.size() - n + 1;
    if (grams.packed) {
        grams.keys.resize(count);
        for (size_t i = 0; i < count; ++i) {
            Packed key = 0;
            for (size_t k = 0; k < n; ++k) key = (key << 21) | static_cast<Packed>(sequence[i + k]);
            grams.keys[i] = key;
        }
        std::sort(grams.keys.begin(), grams.keys.end());
    } else {
        grams.views.reserve(count);
        for (size_t i = 0; i < count; ++i) grams.views.emplace_back(sequence.data() + i, n);
        std::sort(grams.views.begin(), grams.views.end());
    }
    return grams;
}

bool below_packed_limit(char32_t largest) { return largest < kPackedSymbols; }

// For each distinct n-gram of `hyp` (k-th, in sorted order): visit(k, its
// count, its count in `ref`).
template <typename T, typename Visit>
void walk_sorted(const std::vector<T>& hyp, const std::vector<T>& ref, Visit& visit) {
    size_t i = 0, j = 0, distinct = 0;
    while (i < hyp.size()) {
        size_t run = i + 1;
        while (run < hyp.size() && hyp[run] == hyp[i]) ++run;
        while (j < ref.size() && ref[j] < hyp[i]) ++j;
        size_t count = 0;
        while (j < ref.size() && ref[j] == hyp[i]) {
            ++j;
            ++count;
        }
        visit(distinct, run - i, count);
        ++distinct;
        i = run;
    }
}

template <typename Visit>
void walk_matches(const Grams& hyp, const Grams& ref, Visit visit) {
    if (hyp.packed) {
        walk_sorted(hyp.keys, ref.keys, visit);
    } else {
        walk_sorted(hyp.views, ref.views, visit);
    }
}

// ------------------------------------------------------------------ chrF ---

bool is_chrf_punct(char32_t c) {  // CHRF._PUNCTS
    return c < 128 && std::string_view("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~").find(static_cast<char>(c)) !=
        std::string_view::npos;
}

// CHRF._remove_punctuation.
std::vector<View> chrf_words(const Text& sentence) {
    std::vector<View> words;
    for (View w : split(sentence)) {
        if (w.size() == 1) {
            words.push_back(w);
        } else if (is_chrf_punct(w.back())) {
            words.push_back(w.substr(0, w.size() - 1));
            words.push_back(w.substr(w.size() - 1));
        } else if (is_chrf_punct(w.front())) {
            words.push_back(w.substr(0, 1));
            words.push_back(w.substr(1));
        } else {
            words.push_back(w);
        }
    }
    return words;
}

Text without_whitespace(const Text& text) {
    Text out;
    out.reserve(text.size());
    for (char32_t c : text) if (!is_python_space(c)) out.push_back(c);
    return out;
}

struct ChrfConfig {
    int char_order, word_order, beta;
    bool whitespace, eps_smoothing;
};

// CHRF._compute_f_score, operation for operation (built without FMA contraction).
double chrf_f_score(const std::vector<int64_t>& stats, const ChrfConfig& config) {
    const double eps = 1e-16;
    const int order = config.char_order + config.word_order;
    const int64_t factor = static_cast<int64_t>(config.beta) * config.beta;
    double score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
    int64_t effective_order = 0;
    for (int i = 0; i < order; ++i) {
        const int64_t n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
        const double prec = n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : eps;
        const double rec = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : eps;
        const double denom = static_cast<double>(factor) * prec + rec;
        score += denom > 0 ? static_cast<double>(1 + factor) * prec * rec / denom : eps;
        if (n_hyp > 0 && n_ref > 0) {
            avg_prec += prec;
            avg_rec += rec;
            ++effective_order;
        }
    }
    if (config.eps_smoothing) return 100 * score / order;
    if (effective_order == 0) {
        avg_prec = avg_rec = 0.0;
    } else {
        avg_prec /= static_cast<double>(effective_order);
        avg_rec /= static_cast<double>(effective_order);
    }
    if (avg_prec + avg_rec != 0.0) {
        score = static_cast<double>(1 + factor) * avg_prec * avg_rec;
        score /= (static_cast<double>(factor) * avg_prec) + avg_rec;
        return 100 * score;
    }
    return 0.0;
}

// The n-gram lists of one sentence, character orders then word orders.
std::vector<Grams> chrf_ngrams(const Text& chars, const Text& word_ids, bool pack_words, const ChrfConfig& config) {
    std::vector<Grams> all;
    for (int n = 1; n <= config.char_order; ++n) all.push_back(sorted_ngrams(chars, n, true));
    for (int n = 1; n <= config.word_order; ++n) all.push_back(sorted_ngrams(word_ids, n, pack_words));
    return all;
}

std::vector<int64_t> chrf_segment(const Text& hyp, const std::vector<Text>& refs, const ChrfConfig& config) {
    // Word ids first, so every sentence of the entry packs (or not) alike.
    Interner interner;
    const Text hyp_words = config.word_order > 0 ? interner.ids(chrf_words(hyp)) : Text();
    std::vector<Text> ref_words;
    for (const Text& ref : refs) ref_words.push_back(config.word_order > 0 ? interner.ids(chrf_words(ref)) : Text());
    const bool pack_words = below_packed_limit(static_cast<char32_t>(interner.size()));

    const Text hyp_chars = config.whitespace ? hyp : without_whitespace(hyp);
    const auto hyp_grams = chrf_ngrams(hyp_chars, hyp_words, pack_words, config);

    std::vector<int64_t> best_stats;
    double best_f = -1.0;
    for (size_t r = 0; r < refs.size(); ++r) {
        const Text ref_chars = config.whitespace ? refs[r] : without_whitespace(refs[r]);
        const auto ref_grams = chrf_ngrams(ref_chars, ref_words[r], pack_words, config);
        std::vector<int64_t> stats;
        for (size_t k = 0; k < hyp_grams.size(); ++k) {
            int64_t match = 0;
            walk_matches(hyp_grams[k], ref_grams[k], [&](size_t, size_t h, size_t r) {
                match += static_cast<int64_t>(std::min(h, r));
            });
            const int64_t ref_count = static_cast<int64_t>(ref_grams[k].size());
            stats.push_back(ref_count > 0 ? static_cast<int64_t>(hyp_grams[k].size()) : 0);
            stats.push_back(ref_count);
            stats.push_back(match);
        }
        const double f = chrf_f_score(stats, config);
        if (f > best_f) {
            best_f = f;
            best_stats = std::move(stats);
        }
    }
    return best_stats;
}

// ------------------------------------------------------------------ BLEU ---

std::vector<int64_t> bleu_segment(const Text& hyp, const std::vector<Text>& refs, int max_order) {
    Interner interner;
    const Text hyp_ids = interner.ids(split(hyp));
    const int64_t hyp_len = static_cast<int64_t>(hyp_ids.size());
    std::vector<Text> ref_ids;
    for (const Text& ref : refs) ref_ids.push_back(interner.ids(split(ref)));

    // BLEU._get_closest_ref_len.
    int64_t closest_diff = -1, closest_len = -1;
    for (const Text& ref : ref_ids) {
        const int64_t ref_len = static_cast<int64_t>(ref.size());
        const int64_t diff = std::llabs(hyp_len - ref_len);
        if (closest_diff == -1 || diff < closest_diff) {
            closest_diff = diff;
            closest_len = ref_len;
        } else if (diff == closest_diff && ref_len < closest_len) {
            closest_len = ref_len;
        }
    }

    const bool pack = below_packed_limit(static_cast<char32_t>(interner.size()));
    std::vector<int64_t> correct(max_order, 0), total(max_order, 0);
    for (int n = 1; n <= max_order; ++n) {
        const Grams hyp_grams = sorted_ngrams(hyp_ids, n, pack);
        total[n - 1] = static_cast<int64_t>(hyp_grams.size());
        // Clip each hypothesis n-gram by its largest count in any reference.
        std::vector<size_t> hyp_counts, max_ref;
        walk_matches(hyp_grams, Grams{hyp_grams.packed, {}, {}}, [&](size_t, size_t h, size_t) {
            hyp_counts.push_back(h);
        });
        max_ref.assign(hyp_counts.size(), 0);
        for (const Text& ref : ref_ids) {
            const Grams ref_grams = sorted_ngrams(ref, n, pack);
            walk_matches(hyp_grams, ref_grams, [&](size_t k, size_t, size_t r) {
                max_ref[k] = std::max(max_ref[k], r);
            });
        }
        for (size_t k = 0; k < hyp_counts.size(); ++k) {
            correct[n - 1] += static_cast<int64_t>(std::min(hyp_counts[k], max_ref[k]));
        }
    }
    std::vector<int64_t> stats = {hyp_len, closest_len};
    stats.insert(stats.end(), correct.begin(), correct.end());
    stats.insert(stats.end(), total.begin(), total.end());
    return stats;
}

// --------------------------------------------------------------- bindings --

py::list int_rows(const std::vector<std::vector<int64_t>>& rows) {
    py::list out(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        py::list row(rows[i].size());
        for (size_t k = 0; k < rows[i].size(); ++k) row[k] = py::int_(rows[i][k]);
        out[i] = std::move(row);
    }
    return out;
}

py::list ter_statistics(const py::sequence& hypotheses, const py::sequence& references) {
    const Batch batch = read_batch(hypotheses, references);
    std::vector<std::pair<int64_t, double>> rows(batch.hypotheses.size());
    {
        py::gil_scoped_release release;
        for (size_t i = 0; i < rows.size(); ++i) {
            // TER._compute_segment_statistics: fewest edits, mean reference length.
            Interner interner;
            const Text hyp = interner.ids(split(batch.hypotheses[i]));
            int64_t best = kInfinity, lengths = 0;
            for (const Text& ref_text : batch.references[i]) {
                const Text ref = interner.ids(split(ref_text));
                const auto [edits, length] = translation_edit_rate(hyp, ref);
                lengths += length;
                if (edits < best) best = edits;
            }
            rows[i] = {best, static_cast<double>(lengths) / static_cast<double>(batch.references[i].size())};
        }
    }
    py::list out(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        py::list row(2);
        row[0] = py::int_(rows[i].first);
        row[1] = py::float_(rows[i].second);
        out[i] = std::move(row);
    }
    return out;
}

py::list chrf_statistics(const py::sequence& hypotheses, const py::sequence& references, int char_order,
                         int word_order, int beta, bool whitespace, bool eps_smoothing) {
    const Batch batch = read_batch(hypotheses, references);
    const ChrfConfig config{char_order, word_order, beta, whitespace, eps_smoothing};
    std::vector<std::vector<int64_t>> rows(batch.hypotheses.size());
    {
        py::gil_scoped_release release;
        for (size_t i = 0; i < rows.size(); ++i) {
            rows[i] = chrf_segment(batch.hypotheses[i], batch.references[i], config);
        }
    }
    return int_rows(rows);
}

py::list bleu_statistics(const py::sequence& hypotheses, const py::sequence& references, int max_order) {
    const Batch batch = read_batch(hypotheses, references);
    std::vector<std::vector<int64_t>> rows(batch.hypotheses.size());
    {
        py::gil_scoped_release release;
        for (size_t i = 0; i < rows.size(); ++i) {
            rows[i] = bleu_segment(batch.hypotheses[i], batch.references[i], max_order);
        }
    }
    return int_rows(rows);
}

}  // namespace

PYBIND11_MODULE(_stats, m) {
    m.doc() = "sacreBLEU 2.6's TER, chrF and BLEU segment statistics, compiled (see stats.cpp)";
    m.def("ter_statistics", &ter_statistics, py::arg("hypotheses"), py::arg("references_per_entry"),
          "Per entry [best edits (int), mean reference length (float)] from TER-preprocessed strings.");
    m.def("chrf_statistics", &chrf_statistics, py::arg("hypotheses"), py::arg("references_per_entry"),
          py::arg("char_order"), py::arg("word_order"), py::arg("beta"), py::arg("whitespace"),
          py::arg("eps_smoothing"), "Per entry chrF [hyp, ref, match] counts per order, best reference.");
    m.def("bleu_statistics", &bleu_statistics, py::arg("hypotheses"), py::arg("references_per_entry"),
          py::arg("max_order"), "Per entry BLEU [hyp_len, ref_len, correct..., total...] from tokenized strings.");
    m.def("is_whitespace", [](uint32_t c) { return is_python_space(static_cast<char32_t>(c)); },
          "Whether str.split() splits on this code point (as the module assumes).");
}
