// The sentence encoder's token rows (champollion/core/encoder/row_cache.py)
// moved and summed without a copy in between:
//
//   copy_rows   rows of one float32 table copied to rows of another, by index
//               (the row cache's gathers and stores: numpy's fancy indexing
//               goes through a temporary array);
//   row_sums    each sentence's rows, picked from several tables, summed as
//               np.add.reduceat sums them down a column: the first row plus
//               numpy's pairwise sum of the others (loops_utils.h: below 8
//               rows one by one from -0.0, up to 128 in 8 interleaved partial
//               sums, above that halves at a multiple of 8), float32 at every
//               step. forward.row_sums does the same in numpy; the tests hold
//               this one to it bit for bit. The rows held in the cache are
//               summed where they lie, not first copied beside the rows just
//               computed.
//
// Only additions, in the order written (built with -ffp-contract=off, no
// -ffast-math): a column's sum does not depend on the other columns.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

using Index = std::ptrdiff_t;
using Table = py::array_t<float, py::array::c_style | py::array::forcecast>;
using Indices = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

constexpr Index kUnroll = 8;
constexpr Index kPairwiseBlock = 128;

// numpy's pairwise sum of `count` rows of `width` floats into `out`.
void pairwise(const float* const* rows, Index count, Index width, float* out) {
    if (count < kUnroll) {
        for (Index j = 0; j < width; ++j) out[j] = -0.0f;  // numpy's start: a sum of -0.0s stays so
        for (Index r = 0; r < count; ++r) {
            for (Index j = 0; j < width; ++j) out[j] += rows[r][j];
        }
        return;
    }
    if (count <= kPairwiseBlock) {
        std::vector<float> partial(static_cast<size_t>(kUnroll * width));
        for (Index k = 0; k < kUnroll; ++k) std::memcpy(&partial[k * width], rows[k], width * sizeof(float));
        const Index whole = count - count % kUnroll;
        for (Index start = kUnroll; start < whole; start += kUnroll) {
            for (Index k = 0; k < kUnroll; ++k) {
                float* sums = &partial[k * width];
                const float* row = rows[start + k];
                for (Index j = 0; j < width; ++j) sums[j] += row[j];
            }
        }
        const float* p = partial.data();
        for (Index j = 0; j < width; ++j) {
            out[j] = ((p[j] + p[width + j]) + (p[2 * width + j] + p[3 * width + j])) +
                     ((p[4 * width + j] + p[5 * width + j]) + (p[6 * width + j] + p[7 * width + j]));
        }
        for (Index r = whole; r < count; ++r) {
            for (Index j = 0; j < width; ++j) out[j] += rows[r][j];
        }
        return;
    }
    Index half = count / 2;
    half -= half % kUnroll;
    std::vector<float> right(static_cast<size_t>(width));
    pairwise(rows, half, width, out);
    pairwise(rows + half, count - half, width, right.data());
    for (Index j = 0; j < width; ++j) out[j] += right[j];
}

Index width_of(const Table& table, const char* name) {
    if (table.ndim() != 2) throw std::invalid_argument(std::string(name) + ": a 2-D float32 array");
    return table.shape(1);
}

void check_index(std::int64_t index, Index size, const char* name) {
    if (index < 0 || index >= size) {
        throw std::invalid_argument(std::string(name) + ": row " + std::to_string(index) + " of " +
                                    std::to_string(size));
    }
}

py::array_t<float> row_sums(const std::vector<Table>& tables, const Indices& picks, const Indices& lengths) {
    if (tables.empty()) throw std::invalid_argument("tables: at least one");
    const Index width = width_of(tables[0], "tables");
    for (const Table& table : tables) {
        if (width_of(table, "tables") != width) throw std::invalid_argument("tables: rows of one width");
    }
    if (picks.ndim() != 2 || picks.shape(1) != 2) throw std::invalid_argument("picks: (rows, 2): table, row");
    if (lengths.ndim() != 1) throw std::invalid_argument("lengths: one per sentence");
    // Each pick's row, checked, as a pointer.
    std::vector<const float*> rows(static_cast<size_t>(picks.shape(0)));
    const std::int64_t* pick = picks.data();
    for (Index i = 0; i < picks.shape(0); ++i) {
        check_index(pick[2 * i], static_cast<Index>(tables.size()), "picks: table");
        const Table& table = tables[static_cast<size_t>(pick[2 * i])];
        check_index(pick[2 * i + 1], table.shape(0), "picks");
        rows[static_cast<size_t>(i)] = table.data() + pick[2 * i + 1] * width;
    }
    Index total = 0;
    for (Index t = 0; t < lengths.shape(0); ++t) {
        if (lengths.data()[t] < 1) throw std::invalid_argument("lengths: a sentence has a row at least");
        total += lengths.data()[t];
    }
    if (total != picks.shape(0)) throw std::invalid_argument("lengths: they add up to the picks");
    py::array_t<float> out({lengths.shape(0), width});
    float* sums = out.mutable_data();
    const std::int64_t* length = lengths.data();
    {
        py::gil_scoped_release unlocked;
        std::vector<float> rest(static_cast<size_t>(width));
        Index start = 0;
        for (Index t = 0; t < lengths.shape(0); ++t) {
            pairwise(rows.data() + start + 1, length[t] - 1, width, rest.data());
            const float* first = rows[static_cast<size_t>(start)];
            for (Index j = 0; j < width; ++j) sums[t * width + j] = first[j] + rest[j];
            start += length[t];
        }
    }
    return out;
}

void copy_rows(const Table& source, const Indices& source_rows, py::array_t<float, py::array::c_style> target,
               const Indices& target_rows) {
    const Index width = width_of(source, "source");
    if (target.ndim() != 2 || target.shape(1) != width) throw std::invalid_argument("target: rows of the source's width");
    if (source_rows.ndim() != 1 || target_rows.ndim() != 1 || source_rows.shape(0) != target_rows.shape(0)) {
        throw std::invalid_argument("source_rows, target_rows: as many of each");
    }
    const Index count = source_rows.shape(0);
    for (Index i = 0; i < count; ++i) {
        check_index(source_rows.data()[i], source.shape(0), "source_rows");
        check_index(target_rows.data()[i], target.shape(0), "target_rows");
    }
    const float* from = source.data();
    float* to = target.mutable_data();
    {
        py::gil_scoped_release unlocked;
        for (Index i = 0; i < count; ++i) {
            std::memcpy(to + target_rows.data()[i] * width, from + source_rows.data()[i] * width, width * sizeof(float));
        }
    }
}

}  // namespace

PYBIND11_MODULE(_rows, module) {
    module.doc() = "The sentence encoder's token rows copied between tables and summed per sentence (rows.cpp)";
    // noconvert: a table that is not C-ordered float32 is refused, not copied (the cache is 640 MiB).
    module.def("row_sums", &row_sums, py::arg("tables").noconvert(), py::arg("picks").noconvert(),
               py::arg("lengths").noconvert(),
               "(len(lengths), width) float32: sentence after sentence, the sum of its rows, picks[i] = "
               "(table, row), as np.add.reduceat sums them");
    module.def("copy_rows", &copy_rows, py::arg("source").noconvert(), py::arg("source_rows").noconvert(),
               py::arg("target").noconvert(), py::arg("target_rows").noconvert(), "target[target_rows[i]] = source[source_rows[i]], without a temporary");
}
