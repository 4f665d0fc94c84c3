// The CPU backend: the reference every other backend is tested against, and the embedded
// default. Checks shapes and dtypes at the interface, then calls the kernels in this folder.
#include <algorithm>
#include <concepts>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sampling.h"
#include "shared/error.h"

namespace flashq {
namespace {

// Checks run on every op of the decode loop, so a message is built only when one fails: a
// literal as it is, anything composed from a callable.
[[noreturn]] void fail(const std::string& what) { throw Error(ErrorCode::kInternal, "cpu backend: " + what); }

void require(bool ok, const char* what) {
  if (!ok) fail(what);
}

template <std::invocable MakeMessage>
void require(bool ok, MakeMessage&& make_message) {
  if (!ok) fail(make_message());
}

void require_f32(const Tensor& t, const char* name) {
  require(t.defined() && t.dtype() == DType::kF32,
          [&] { return std::string(name) + " must be a float32 tensor"; });
}

cpu::WeightVector weight_vector(const Tensor& w) { return {w.raw(), w.dtype()}; }

// For gather_rows and store_rows: `listed` has a row per entry of `rows`, int32 indices into the
// rows of `indexed`, and both have rows of one size.
void require_row_index(const Tensor& listed, const Tensor& indexed, const Tensor& rows, const char* op) {
  const auto row_size = [](const Tensor& t) { return t.numel() / std::max<int64_t>(t.dim(0), 1); };
  require(listed.rank() >= 1 && indexed.rank() >= 1 && rows.dtype() == DType::kI32 && rows.numel() == listed.dim(0) &&
              (listed.dim(0) == 0 || row_size(listed) == row_size(indexed)),
          [&] { return std::string(op) + " shapes"; });
}

// Row i of src to row rows[i] of dst (`scatter`), or row rows[i] of src to row i of dst. The
// indices are read here, when the op runs, as on a GPU.
void copy_indexed_rows(const Tensor& src, const Tensor& dst, const Tensor& rows, bool scatter) {
  const int32_t* index = rows.data<int32_t>();
  const Tensor& indexed = scatter ? dst : src;
  const Tensor& listed = scatter ? src : dst;  // a row per index
  const size_t row_bytes = rows.numel() == 0 ? 0 : listed.nbytes() / static_cast<size_t>(rows.numel());
  for (int64_t i = 0; i < rows.numel(); ++i) {
    require(index[i] >= 0 && index[i] < indexed.dim(0),
            scatter ? "store_rows: a row outside the destination" : "gather_rows: a row outside the source");
    const auto to = static_cast<size_t>(scatter ? index[i] : i);
    const auto from = static_cast<size_t>(scatter ? i : index[i]);
    std::memcpy(static_cast<char*>(dst.raw()) + to * row_bytes,
                static_cast<const char*>(src.raw()) + from * row_bytes, row_bytes);
  }
}

// What CpuBackend::capture records: each op as a closure holding its tensors (so their memory
// outlives the recording, as a CUDA graph's does not need) and its arguments as they were.
class CpuCapturedOps final : public CapturedOps {
 public:
  std::vector<std::function<void()>> ops;
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  std::string name() const override { return "cpu"; }

  Tensor allocate(DType dtype, Shape shape) override {
    refuse_while_recording("allocate");
    return Tensor::zeros_cpu(dtype, std::move(shape));
  }
  Tensor upload_weight(const Tensor& host) override {
    refuse_while_recording("upload_weight");
    return host;
  }
  void copy_to_host(const Tensor& src, void* dst) override {
    refuse_while_recording("copy_to_host");
    std::memcpy(dst, src.raw(), src.nbytes());
  }
  void copy_from_host(const void* src, Tensor& dst) override {
    refuse_while_recording("copy_from_host");
    std::memcpy(dst.raw(), src, dst.nbytes());
  }

  void copy_rows(const Tensor& src, Tensor& dst, int64_t first_row) override {
    auto row_elements = [](const Tensor& t) { return t.dim(0) == 0 ? 0 : t.numel() / t.dim(0); };
    require(src.dtype() == dst.dtype() && (src.dim(0) == 0 || row_elements(src) == row_elements(dst)),
            "copy_rows: dtypes or row sizes differ");
    require(first_row >= 0 && first_row + src.dim(0) <= dst.dim(0), "copy_rows: rows out of range");
    run([src, target = dst.slice_rows(first_row, src.dim(0))] {
      std::memcpy(target.raw(), src.raw(), src.nbytes());
    });
  }

  void gather_rows(const Tensor& src, const Tensor& rows, Tensor& dst) override {
    require_f32(src, "gather_rows src");
    require_f32(dst, "gather_rows dst");
    require_row_index(dst, src, rows, "gather_rows");
    run([src, dst, rows] { copy_indexed_rows(src, dst, rows, false); });
  }

  // dst[rows[i]] = src[i]: gather_rows the other way.
  void store_rows(const Tensor& src, Tensor& dst, const Tensor& rows) override {
    require_f32(src, "store_rows src");
    require_f32(dst, "store_rows dst");
    require_row_index(src, dst, rows, "store_rows");
    run([src, dst, rows] { copy_indexed_rows(src, dst, rows, true); });
  }

  void copy_columns(const Tensor& src, Tensor& dst, int64_t first_col) override {
    require(src.dtype() == dst.dtype() && src.rows() == dst.rows() && first_col >= 0 &&
                first_col + src.cols() <= dst.cols(),
            [&] {
              return "copy_columns: shapes " + shape_to_string(src.shape()) + " into " + shape_to_string(dst.shape());
            });
    run([src, dst, first_col] {
      const size_t element = dtype_size(src.dtype());
      const char* from = static_cast<const char*>(src.raw());
      char* to = static_cast<char*>(dst.raw());
      for (int64_t m = 0; m < src.rows(); ++m) {
        std::memcpy(to + (m * dst.cols() + first_col) * element, from + m * src.cols() * element,
                    src.cols() * element);
      }
    });
  }

  void matmul(const Tensor& x, const Tensor& w, Tensor& y) override {
    require_f32(x, "matmul x");
    require_f32(y, "matmul y");
    require(w.rank() == 2 && x.cols() == w.dim(1) && y.rows() == x.rows() && y.cols() == w.dim(0),
            [&] {
              return "matmul shapes x" + shape_to_string(x.shape()) + " w" + shape_to_string(w.shape()) + " y" +
                     shape_to_string(y.shape());
            });
    run([x, w, y] { cpu::matmul(x.data<float>(), w.raw(), w.dtype(), y.data<float>(), x.rows(), w.dim(0), w.dim(1)); });
  }

  void rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& y) override {
    require_f32(x, "rmsnorm x");
    require(x.numel() == y.numel() && w.numel() == x.cols(), "rmsnorm shapes");
    run([x, w, eps, y] { cpu::rmsnorm(x.data<float>(), weight_vector(w), eps, y.data<float>(), x.rows(), x.cols()); });
  }

  void add_rmsnorm(Tensor& h, const Tensor& delta, const Tensor& w, float eps, Tensor& y) override {
    require_f32(h, "add_rmsnorm h");
    require(h.numel() == delta.numel() && h.numel() == y.numel() && w.numel() == h.cols(), "add_rmsnorm shapes");
    run([h, delta, w, eps, y] {
      cpu::add_rmsnorm(h.data<float>(), delta.data<float>(), weight_vector(w), eps, y.data<float>(), h.rows(),
                       h.cols());
    });
  }

  void add(Tensor& h, const Tensor& delta) override {
    require_f32(h, "add h");
    require(h.numel() == delta.numel(), "add shapes");
    run([h, delta] { cpu::add(h.data<float>(), delta.data<float>(), h.numel()); });
  }

  void rope(Tensor& x, const Tensor& positions, float theta) override {
    require_f32(x, "rope x");
    require(x.rank() == 3 && positions.dtype() == DType::kI32 && positions.numel() == x.dim(0), "rope shapes");
    run([x, positions, theta] {
      cpu::rope(x.data<float>(), positions.data<int32_t>(), theta, x.dim(0), x.dim(1), x.dim(2));
    });
  }

  void head_norm_rope(Tensor& x, const Tensor& w, float eps, const Tensor& positions, float theta) override {
    require_f32(x, "head_norm_rope x");
    require(x.rank() == 3 && w.numel() == x.dim(2) && positions.dtype() == DType::kI32 &&
                positions.numel() == x.dim(0),
            "head_norm_rope shapes");
    // On the CPU the two passes are cache-resident per row block already: the twin is the pair.
    run([x, w, eps, positions, theta] {
      cpu::rmsnorm(x.data<float>(), weight_vector(w), eps, x.data<float>(), x.dim(0) * x.dim(1), x.dim(2));
      cpu::rope(x.data<float>(), positions.data<int32_t>(), theta, x.dim(0), x.dim(1), x.dim(2));
    });
  }

  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_counts,
                 Tensor& out) override {
    require(q.rank() == 3 && k.rank() == 3 && v.shape() == k.shape() && out.shape() == q.shape(),
            "attention shapes");
    require(q.dim(2) == k.dim(2) && k.dim(1) > 0 && q.dim(1) % k.dim(1) == 0, "attention heads");
    require(key_counts.dtype() == DType::kI32 && key_counts.numel() == q.dim(0), "attention key_counts");
    run([q, k, v, key_counts, out] {
      const int32_t* counts = key_counts.data<int32_t>();  // read when the op runs, as on a GPU
      for (int64_t m = 0; m < q.dim(0); ++m) require(counts[m] <= k.dim(0), "attention key count beyond keys");
      cpu::attention(q.data<float>(), k.data<float>(), v.data<float>(), counts, out.data<float>(),
                     {q.dim(0), q.dim(1), k.dim(1), q.dim(2)});
    });
  }

  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    require(gate.numel() == up.numel() && gate.numel() == out.numel(), "swiglu shapes");
    run([gate, up, out] { cpu::swiglu(gate.data<float>(), up.data<float>(), out.data<float>(), gate.numel()); });
  }

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    require(table.rank() == 2 && ids.dtype() == DType::kI32 && out.rows() == ids.numel() &&
                out.cols() == table.dim(1),
            "embedding shapes");
    run([table, ids, out] {
      const int32_t* id = ids.data<int32_t>();
      for (int64_t m = 0; m < ids.numel(); ++m) {
        if (id[m] < 0 || id[m] >= table.dim(0)) {
          throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id[m]) +
                                                       " is outside the embedding table of " +
                                                       std::to_string(table.dim(0)) + " rows");
        }
      }
      cpu::embedding(table.raw(), table.dtype(), id, out.data<float>(), ids.numel(), table.dim(1));
    });
  }

  void argmax(const Tensor& logits, Tensor& ids) override {
    require(ids.dtype() == DType::kI32 && ids.numel() == logits.rows(), "argmax shapes");
    run([logits, ids] { cpu::argmax(logits.data<float>(), ids.data<int32_t>(), logits.rows(), logits.cols()); });
  }

  void sample(const Tensor& logits, const Tensor& params, Tensor& ids) override {
    require(logits.dtype() == DType::kF32 && params.dtype() == DType::kF32 && ids.dtype() == DType::kI32 &&
                ids.numel() == logits.rows() && params.numel() == cpu::kSampleParams * logits.rows(),
            "sample shapes");
    run([logits, params, ids] {
      cpu::sample_rows(logits.data<float>(), params.data<float>(), ids.data<int32_t>(), logits.rows(),
                       logits.cols());
    });
  }

  // The CPU twin of a CUDA graph: ops are recorded with their arguments as they were, so a
  // replay sees exactly what a graph would (new contents, the old addresses and sizes).
  std::unique_ptr<CapturedOps> capture(const std::function<void()>& work) override {
    require(recording_ == nullptr, "capture while capturing");
    auto captured = std::make_unique<CpuCapturedOps>();
    recording_ = &captured->ops;
    try {
      work();
    } catch (...) {
      recording_ = nullptr;
      throw;
    }
    recording_ = nullptr;
    return captured;
  }

  void replay(CapturedOps& ops) override {
    require(recording_ == nullptr, "replay while capturing");
    auto* recorded = dynamic_cast<CpuCapturedOps*>(&ops);
    require(recorded != nullptr, "replay of ops another backend captured");
    for (const std::function<void()>& op : recorded->ops) op();
  }

 private:
  // Runs an op now, or records it while capturing.
  template <typename Op>
  void run(Op&& op) {
    if (recording_ != nullptr) {
      recording_->emplace_back(std::forward<Op>(op));
    } else {
      op();
    }
  }

  void refuse_while_recording(const char* what) const {
    require(recording_ == nullptr, [&] {
      return std::string(what) + " while capturing ops: upload before capture() and replay(), read back after";
    });
  }

  std::vector<std::function<void()>>* recording_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace flashq
