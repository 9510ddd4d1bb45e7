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
// One path uses AVX2 and FMA where the CPU has them, the other plain C++'s
// std::fma (correctly rounded, like the instruction): both give the same
// bits (tests/test_native_matmul.py holds both to the definition above).
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

constexpr int kTileRows = 6;     // rows of `out` computed together (12 accumulator registers)
constexpr int kPanelWidth = 16;  // columns of `w` stored together (two AVX registers)
constexpr int kBlockRows = 48;   // rows kept in cache while every panel passes over them

using Index = std::ptrdiff_t;

// One tile: `rows` (at most kTileRows) rows of x (`depth` values each, rows
// `x_stride` apart) times one panel (depth x kPanelWidth, row after row).
void tile_portable(int rows, Index depth, const float* x, Index x_stride, const float* panel, float* out,
                   Index out_stride) {
    for (int r = 0; r < rows; ++r) {
        float sums[kPanelWidth] = {};
        const float* row = x + r * x_stride;
        for (Index k = 0; k < depth; ++k) {
            for (int j = 0; j < kPanelWidth; ++j) sums[j] = std::fma(row[k], panel[k * kPanelWidth + j], sums[j]);
        }
        for (int j = 0; j < kPanelWidth; ++j) out[r * out_stride + j] = sums[j];
    }
}

#ifdef CHAMPOLLION_X86
__attribute__((target("avx2,fma"))) void tile_avx2(int rows, Index depth, const float* x, Index x_stride,
                                                   const float* panel, float* out, Index out_stride) {
    // Rows past `rows` read row 0 again; their sums are not stored. Twelve
    // named accumulators: kept in registers, which arrays of them are not.
    const float* x0 = x;
    const float* x1 = x + (rows > 1 ? 1 : 0) * x_stride;
    const float* x2 = x + (rows > 2 ? 2 : 0) * x_stride;
    const float* x3 = x + (rows > 3 ? 3 : 0) * x_stride;
    const float* x4 = x + (rows > 4 ? 4 : 0) * x_stride;
    const float* x5 = x + (rows > 5 ? 5 : 0) * x_stride;
    __m256 s0l = _mm256_setzero_ps(), s0h = s0l, s1l = s0l, s1h = s0l, s2l = s0l, s2h = s0l;
    __m256 s3l = s0l, s3h = s0l, s4l = s0l, s4h = s0l, s5l = s0l, s5h = s0l;
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
    const __m256 sums[kTileRows][2] = {{s0l, s0h}, {s1l, s1h}, {s2l, s2h}, {s3l, s3h}, {s4l, s4h}, {s5l, s5h}};
    for (int r = 0; r < rows; ++r) {
        _mm256_storeu_ps(out + r * out_stride, sums[r][0]);
        _mm256_storeu_ps(out + r * out_stride + 8, sums[r][1]);
    }
}

bool cpu_has_avx2_fma() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

using Tile = void (*)(int, Index, const float*, Index, const float*, float*, Index);

Tile fastest_tile() {
#ifdef CHAMPOLLION_X86
    if (cpu_has_avx2_fma()) return tile_avx2;
#endif
    return tile_portable;
}

const Tile kFastestTile = fastest_tile();

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

    py::array_t<float> times(py::array_t<float, py::array::forcecast> rows, bool portable) const {
        if (rows.ndim() != 2 || rows.shape(1) != inner_) {
            throw std::invalid_argument("rows must be a 2-D array of " + std::to_string(inner_) + " columns");
        }
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
        const Tile tile = portable ? tile_portable : kFastestTile;
        {
            py::gil_scoped_release unlocked;
            for (Index block = 0; block < count; block += kBlockRows) {
                const Index block_end = std::min(count, block + kBlockRows);
                for (Index panel = 0; panel < columns_ / kPanelWidth; ++panel) {
                    const float* weights = panels_.data() + panel * inner_ * kPanelWidth;
                    for (Index first = block; first < block_end; first += kTileRows) {
                        const int tile_rows = static_cast<int>(std::min<Index>(kTileRows, block_end - first));
                        tile(tile_rows, inner_, x + first * stride, stride, weights,
                             result + first * columns_ + panel * kPanelWidth, columns_);
                    }
                }
            }
        }
        return out;
    }

    Index inner() const { return inner_; }
    Index columns() const { return columns_; }

   private:
    Index inner_ = 0;
    Index columns_ = 0;
    std::vector<float> panels_;
};

}  // namespace

PYBIND11_MODULE(_matmul, module) {
    module.doc() = "Float32 matrix products computed the same way for a row whatever the other rows (matmul.cpp)";
    py::class_<Matrix>(module, "Matrix")
        .def(py::init<const py::array_t<float, py::array::c_style | py::array::forcecast>&>(), py::arg("weight"))
        .def("times", &Matrix::times, py::arg("rows"), py::arg("portable") = false,
             "rows @ weight as float32: each value fma after fma in order of the inner index, from 0; "
             "portable=True takes the plain C++ path (the same bits)")
        .def_property_readonly("inner", &Matrix::inner)
        .def_property_readonly("columns", &Matrix::columns);
#ifdef CHAMPOLLION_X86
    module.attr("VECTORISED") = cpu_has_avx2_fma();
#else
    module.attr("VECTORISED") = false;
#endif
}
