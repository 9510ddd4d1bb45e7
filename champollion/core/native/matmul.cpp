// Float32 matrix products whose every value is one fixed sequence of
// operations, whatever the other rows multiplied with it:
//
//     out[i][j] = fma(x[i][K-1], w[K-1][j], ... fma(x[i][1], w[1][j], fma(x[i][0], w[0][j], 0)))
//
// each fma rounded once, in order of k. A BLAS product rounds its partial
// sums in an order its kernels choose by the row's place among the rows
// multiplied together and by the thread count (OpenBLAS on a Zen CPU: which
// half of a 12-row tile, a tile's edge, the threads' share of the rows), so
// the same row comes out differently in another batch. The sentence
// encoder (champollion/core/encoder/forward.py) needs a row's value to depend on
// that row alone.
//
// Three paths: AVX-512 where the CPU has it, AVX2 and FMA, and plain
// C++'s std::fma (correctly rounded, like the instructions): all give the
// same bits (tests/test_native_matmul.py holds each to the definition
// above). The inner index is walked in blocks whose part of the weights
// stays in the L1 cache; between blocks a value's running sum waits in
// `out` as a float32, which changes no rounding.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CHAMPOLLION_X86 1
#endif

namespace py = pybind11;

namespace {

constexpr int kPanelWidth = 16;  // columns of `w` stored together (one AVX-512 register, two AVX ones)
constexpr int kMaxTileRows = 12;  // rows of `out` a tile computes at most
constexpr int kBlockRows = 48;   // rows kept in cache while every panel passes over them
// Inner indices per pass: a panel's part (16 KiB) stays in L1 while the
// tiles of a block pass over it. Deeper products (1,280 in the encoder's
// widest convolution) ran at half speed, their panels read from L2.
constexpr std::ptrdiff_t kDepthBlock = 256;

using Index = std::ptrdiff_t;

// One tile: `rows` (at most its path's tile rows) rows of x (`depth`
// values each, rows `x_stride` apart) times one panel (depth x kPanelWidth,
// row after row), added to the sums already in `out` when `resume`.
void tile_portable(int rows, Index depth, const float* x, Index x_stride, const float* panel, float* out,
                   Index out_stride, bool resume) {
    for (int r = 0; r < rows; ++r) {
        float sums[kPanelWidth] = {};
        if (resume) {
            for (int j = 0; j < kPanelWidth; ++j) sums[j] = out[r * out_stride + j];
        }
        const float* row = x + r * x_stride;
        for (Index k = 0; k < depth; ++k) {
            for (int j = 0; j < kPanelWidth; ++j) sums[j] = std::fma(row[k], panel[k * kPanelWidth + j], sums[j]);
        }
        for (int j = 0; j < kPanelWidth; ++j) out[r * out_stride + j] = sums[j];
    }
}

#ifdef CHAMPOLLION_X86
// Rows past `rows` read row 0 again; their sums are not stored. Named
// accumulators: kept in registers, which arrays of them are not.
#define CHAMPOLLION_ROW(r) const float* x##r = x + (rows > (r) ? (r) : 0) * x_stride

__attribute__((target("avx2,fma"))) void tile_avx2(int rows, Index depth, const float* x, Index x_stride,
                                                   const float* panel, float* out, Index out_stride, bool resume) {
    CHAMPOLLION_ROW(0); CHAMPOLLION_ROW(1); CHAMPOLLION_ROW(2); CHAMPOLLION_ROW(3); CHAMPOLLION_ROW(4);
    CHAMPOLLION_ROW(5);
    __m256 s[6][2];
    for (int r = 0; r < 6; ++r) {
        const float* found = out + (r < rows ? r : 0) * out_stride;
        s[r][0] = resume ? _mm256_loadu_ps(found) : _mm256_setzero_ps();
        s[r][1] = resume ? _mm256_loadu_ps(found + 8) : _mm256_setzero_ps();
    }
    __m256 s0l = s[0][0], s0h = s[0][1], s1l = s[1][0], s1h = s[1][1], s2l = s[2][0], s2h = s[2][1];
    __m256 s3l = s[3][0], s3h = s[3][1], s4l = s[4][0], s4h = s[4][1], s5l = s[5][0], s5h = s[5][1];
    for (Index k = 0; k < depth; ++k) {
        const __m256 low = _mm256_loadu_ps(panel + k * kPanelWidth);
        const __m256 high = _mm256_loadu_ps(panel + k * kPanelWidth + 8);
        __m256 value = _mm256_broadcast_ss(x0 + k);
        s0l = _mm256_fmadd_ps(value, low, s0l);
        s0h = _mm256_fmadd_ps(value, high, s0h);
        value = _mm256_broadcast_ss(x1 + k);
        s1l = _mm256_fmadd_ps(value, low, s1l);
        s1h = _mm256_fmadd_ps(value, high, s1h);
        value = _mm256_broadcast_ss(x2 + k);
        s2l = _mm256_fmadd_ps(value, low, s2l);
        s2h = _mm256_fmadd_ps(value, high, s2h);
        value = _mm256_broadcast_ss(x3 + k);
        s3l = _mm256_fmadd_ps(value, low, s3l);
        s3h = _mm256_fmadd_ps(value, high, s3h);
        value = _mm256_broadcast_ss(x4 + k);
        s4l = _mm256_fmadd_ps(value, low, s4l);
        s4h = _mm256_fmadd_ps(value, high, s4h);
        value = _mm256_broadcast_ss(x5 + k);
        s5l = _mm256_fmadd_ps(value, low, s5l);
        s5h = _mm256_fmadd_ps(value, high, s5h);
    }
    const __m256 sums[6][2] = {{s0l, s0h}, {s1l, s1h}, {s2l, s2h}, {s3l, s3h}, {s4l, s4h}, {s5l, s5h}};
    for (int r = 0; r < rows; ++r) {
        _mm256_storeu_ps(out + r * out_stride, sums[r][0]);
        _mm256_storeu_ps(out + r * out_stride + 8, sums[r][1]);
    }
}

// Twelve rows of one register each: a panel row loaded once feeds twelve
// fused multiply-adds (the AVX2 tile's six rows of two registers: six).
__attribute__((target("avx512f"))) void tile_avx512(int rows, Index depth, const float* x, Index x_stride,
                                                    const float* panel, float* out, Index out_stride, bool resume) {
    CHAMPOLLION_ROW(0); CHAMPOLLION_ROW(1); CHAMPOLLION_ROW(2); CHAMPOLLION_ROW(3); CHAMPOLLION_ROW(4);
    CHAMPOLLION_ROW(5); CHAMPOLLION_ROW(6); CHAMPOLLION_ROW(7); CHAMPOLLION_ROW(8); CHAMPOLLION_ROW(9);
    CHAMPOLLION_ROW(10); CHAMPOLLION_ROW(11);
    __m512 s[12];
    for (int r = 0; r < 12; ++r) {
        s[r] = resume ? _mm512_loadu_ps(out + (r < rows ? r : 0) * out_stride) : _mm512_setzero_ps();
    }
    __m512 s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3], s4 = s[4], s5 = s[5];
    __m512 s6 = s[6], s7 = s[7], s8 = s[8], s9 = s[9], s10 = s[10], s11 = s[11];
    for (Index k = 0; k < depth; ++k) {
        const __m512 w = _mm512_loadu_ps(panel + k * kPanelWidth);
        s0 = _mm512_fmadd_ps(_mm512_set1_ps(x0[k]), w, s0);
        s1 = _mm512_fmadd_ps(_mm512_set1_ps(x1[k]), w, s1);
        s2 = _mm512_fmadd_ps(_mm512_set1_ps(x2[k]), w, s2);
        s3 = _mm512_fmadd_ps(_mm512_set1_ps(x3[k]), w, s3);
        s4 = _mm512_fmadd_ps(_mm512_set1_ps(x4[k]), w, s4);
        s5 = _mm512_fmadd_ps(_mm512_set1_ps(x5[k]), w, s5);
        s6 = _mm512_fmadd_ps(_mm512_set1_ps(x6[k]), w, s6);
        s7 = _mm512_fmadd_ps(_mm512_set1_ps(x7[k]), w, s7);
        s8 = _mm512_fmadd_ps(_mm512_set1_ps(x8[k]), w, s8);
        s9 = _mm512_fmadd_ps(_mm512_set1_ps(x9[k]), w, s9);
        s10 = _mm512_fmadd_ps(_mm512_set1_ps(x10[k]), w, s10);
        s11 = _mm512_fmadd_ps(_mm512_set1_ps(x11[k]), w, s11);
    }
    const __m512 sums[12] = {s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11};
    for (int r = 0; r < rows; ++r) _mm512_storeu_ps(out + r * out_stride, sums[r]);
}
#undef CHAMPOLLION_ROW

// __builtin_cpu_supports takes only a literal.
#define CHAMPOLLION_CPU_HAS(feature) (__builtin_cpu_init(), __builtin_cpu_supports(feature))
#endif

using TileFunction = void (*)(int, Index, const float*, Index, const float*, float*, Index, bool);

struct Path {
    const char* name;
    TileFunction tile;
    int rows;  // of `out` per tile
};

const Path kPortable = {"portable", tile_portable, 6};

// The paths this CPU runs, fastest first; the portable one always last.
std::vector<Path> available_paths() {
    std::vector<Path> paths;
#ifdef CHAMPOLLION_X86
    if (CHAMPOLLION_CPU_HAS("avx512f")) paths.push_back({"avx512", tile_avx512, 12});
    if (CHAMPOLLION_CPU_HAS("avx2") && CHAMPOLLION_CPU_HAS("fma")) paths.push_back({"avx2", tile_avx2, 6});
#endif
    paths.push_back(kPortable);
    return paths;
}

const std::vector<Path> kPaths = available_paths();

class Matrix {
   public:
    explicit Matrix(const py::array_t<float, py::array::c_style | py::array::forcecast>& weight) {
        if (weight.ndim() != 2) throw std::invalid_argument("a Matrix is made from a 2-D array");
        inner_ = weight.shape(0);
        columns_ = weight.shape(1);
        if (inner_ < 1 || columns_ < 1 || columns_ % kPanelWidth != 0) {
            throw std::invalid_argument("a Matrix needs at least one row and a multiple of " +
                                        std::to_string(kPanelWidth) + " columns, not " + std::to_string(inner_) +
                                        " x " + std::to_string(columns_));
        }
        // Panels of kPanelWidth columns, each stored row after row: a tile reads one contiguously.
        panels_.resize(static_cast<size_t>(inner_ * columns_));
        const float* source = weight.data();
        for (Index panel = 0; panel < columns_ / kPanelWidth; ++panel) {
            for (Index k = 0; k < inner_; ++k) {
                for (int j = 0; j < kPanelWidth; ++j) {
                    panels_[(panel * inner_ + k) * kPanelWidth + j] = source[k * columns_ + panel * kPanelWidth + j];
                }
            }
        }
    }

    py::array_t<float> times(py::array_t<float, py::array::forcecast> rows, const std::string& path_name) const {
        if (rows.ndim() != 2 || rows.shape(1) != inner_) {
            throw std::invalid_argument("rows must be a 2-D array of " + std::to_string(inner_) + " columns");
        }
        const Path& path = find_path(path_name);
        // A row's values side by side; rows any whole number of floats apart (a
        // column slice of a wider array is read in place), else a copy.
        constexpr Index kFloat = sizeof(float);
        if (rows.strides(1) != kFloat || rows.strides(0) < 0 || rows.strides(0) % kFloat != 0) {
            rows = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(rows);
        }
        const Index count = rows.shape(0);
        const Index stride = rows.strides(0) / kFloat;
        py::array_t<float> out({count, columns_});
        const float* x = rows.data();
        float* result = out.mutable_data();
        {
            py::gil_scoped_release unlocked;
            for (Index block = 0; block < count; block += kBlockRows) {
                const Index block_end = std::min(count, block + kBlockRows);
                // Every value's inner indices in order: the blocks of them one after another.
                for (Index first_k = 0; first_k < inner_; first_k += kDepthBlock) {
                    const Index depth = std::min(kDepthBlock, inner_ - first_k);
                    for (Index panel = 0; panel < columns_ / kPanelWidth; ++panel) {
                        const float* weights = panels_.data() + (panel * inner_ + first_k) * kPanelWidth;
                        for (Index first = block; first < block_end; first += path.rows) {
                            const int tile_rows = static_cast<int>(std::min<Index>(path.rows, block_end - first));
                            path.tile(tile_rows, depth, x + first * stride + first_k, stride, weights,
                                      result + first * columns_ + panel * kPanelWidth, columns_, first_k > 0);
                        }
                    }
                }
            }
        }
        return out;
    }

    Index inner() const { return inner_; }
    Index columns() const { return columns_; }

   private:
    static const Path& find_path(const std::string& name) {
        if (name.empty()) return kPaths.front();
        for (const Path& path : kPaths) {
            if (name == path.name) return path;
        }
        throw std::invalid_argument("no matrix product path '" + name + "' on this CPU");
    }

    Index inner_ = 0;
    Index columns_ = 0;
    std::vector<float> panels_;
};

py::list path_names() {
    py::list names;
    for (const Path& path : kPaths) names.append(path.name);
    return names;
}

}  // namespace

PYBIND11_MODULE(_matmul, module) {
    module.doc() = "Float32 matrix products computed the same way for a row whatever the other rows (matmul.cpp)";
    py::class_<Matrix>(module, "Matrix")
        .def(py::init<const py::array_t<float, py::array::c_style | py::array::forcecast>&>(), py::arg("weight"))
        .def("times", &Matrix::times, py::arg("rows"), py::arg("path") = "",
             "rows @ weight as float32: each value fma after fma in order of the inner index, from 0; "
             "`path` one of PATHS (default the first, the fastest: every path gives the same bits)")
        .def_property_readonly("inner", &Matrix::inner)
        .def_property_readonly("columns", &Matrix::columns);
    // The code paths this CPU runs, fastest first ("avx512", "avx2", "portable").
    module.attr("PATHS") = path_names();
}
