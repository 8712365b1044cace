// Tensor class: construction, views, copies, casts and random fills.
#include "singa/core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "dispatch.h"

namespace singa {

Tensor::Tensor() : device_(DefaultDevice()) {}

Tensor::Tensor(const Shape& shape, std::shared_ptr<Device> device,
               DataType dtype)
    : shape_(shape),
      strides_(ContiguousStrides(shape)),
      dtype_(dtype),
      device_(device ? std::move(device) : DefaultDevice()) {
  SINGA_CHECK(IsStorableType(dtype), DtypeError, "Tensor: dtype ", DataTypeName(dtype),
              " (code ", static_cast<int>(dtype), ") is not supported; use float32, float16 or int32");
  block_ = device_->NewBlock(Product(shape_) * SizeOf(dtype_));
}

size_t Tensor::shape(size_t i) const {
  SINGA_CHECK(i < shape_.size(), IndexError, "shape: axis ", i,
              " is out of range for a tensor of shape ", shape_);
  return shape_[i];
}

bool Tensor::IsContiguous() const {
  // An empty tensor has no layout to speak of.
  for (size_t d : shape_)
    if (d == 0) return true;
  int64_t expect = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expect) return false;
    expect *= static_cast<int64_t>(shape_[i]);
  }
  return true;
}

void Tensor::ThrowNoStorage() const {
  SINGA_THROW(ValueError, "tensor of shape ", shape_,
              " has no storage (a default-constructed Tensor holds no data)");
}

bool Tensor::IsTransposed() const {
  int64_t prev = INT64_MAX;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] <= 1) continue;
    if (strides_[i] > prev) return true;
    prev = strides_[i];
  }
  return false;
}

Tensor MakeView(const Tensor& base, const Shape& shape, const Strides& strides,
                size_t offset) {
  Tensor t(base);
  t.shape_ = shape;
  t.strides_ = strides;
  t.offset_ = offset;
  return t;
}

Tensor Tensor::View(const Shape& shape, const Strides& strides,
                    size_t offset) const {
  SINGA_CHECK(shape.size() == strides.size(), ValueError, "View: shape ",
              shape, " and strides ", strides, " differ in length");
  SINGA_CHECK(shape.size() <= 64, ValueError, "View: ", shape.size(),
              " dimensions is more than the 64 supported");
  const size_t capacity = block_ ? block_->size() / SizeOf(dtype_) : 0;
  if (Product(shape) > 0) {
    // 128-bit bounds: 64 axes of (2^64 - 1) * 2^63 cannot overflow them, so
    // no shape, stride or offset can wrap the check around.
    __int128 lo = static_cast<__int128>(offset), hi = lo;
    for (size_t i = 0; i < shape.size(); ++i) {
      __int128 span = static_cast<__int128>(shape[i] - 1) * strides[i];
      (span < 0 ? lo : hi) += span;
    }
    SINGA_CHECK(lo >= 0 && hi < static_cast<__int128>(capacity), IndexError,
                "View: shape ", shape, " with strides ", strides,
                " and offset ", offset, " reaches outside storage of ",
                capacity, " elements");
  }
  return MakeView(*this, shape, strides, offset);
}

Tensor Tensor::Reshape(const Shape& shape) const {
  SINGA_CHECK(Product(shape) == Size(), ShapeError,
              "Reshape: cannot reshape a tensor of shape ", shape_, " (",
              Size(), " elements) to ", shape, " (", Product(shape),
              " elements)");
  if (!IsContiguous()) return Contiguous().Reshape(shape);
  return MakeView(*this, shape, ContiguousStrides(shape), offset_);
}

Tensor Tensor::Transpose(const std::vector<size_t>& axes) const {
  SINGA_CHECK(axes.size() == shape_.size(), ValueError, "Transpose: axes ",
              axes, " do not match a tensor of shape ", shape_);
  std::vector<bool> seen(axes.size(), false);
  Shape shape(axes.size());
  Strides strides(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    SINGA_CHECK(axes[i] < shape_.size(), IndexError, "Transpose: axis ",
                axes[i], " is out of range for a tensor of shape ", shape_);
    SINGA_CHECK(!seen[axes[i]], ValueError, "Transpose: axes ", axes,
                " repeat axis ", axes[i]);
    seen[axes[i]] = true;
    shape[i] = shape_[axes[i]];
    strides[i] = strides_[axes[i]];
  }
  return MakeView(*this, shape, strides, offset_);
}

Tensor Tensor::Transpose() const {
  std::vector<size_t> axes(shape_.size());
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = axes.size() - 1 - i;
  return Transpose(axes);
}

Tensor Tensor::Broadcast(const Shape& shape) const {
  return MakeView(*this, shape, BroadcastStrides(*this, shape, "broadcast_to"),
                  offset_);
}

Tensor Tensor::Slice(size_t axis, size_t start, size_t stop,
                     size_t step) const {
  SINGA_CHECK(axis < shape_.size(), IndexError, "Slice: axis ", axis,
              " is out of range for a tensor of shape ", shape_);
  SINGA_CHECK(step >= 1, ValueError, "Slice: step must be positive, got ", step);
  stop = std::min(stop, shape_[axis]);
  start = std::min(start, stop);
  Shape shape = shape_;
  Strides strides = strides_;
  shape[axis] = stop == start ? 0 : (stop - start - 1) / step + 1;
  // With two or more elements step < shape, so the product stays inside the
  // Block's range; a single element keeps its stride (any step would do).
  if (shape[axis] > 1) strides[axis] *= static_cast<int64_t>(step);
  return MakeView(*this, shape, strides,
                  offset_ + start * static_cast<size_t>(strides_[axis]));
}

Tensor Tensor::Contiguous() const {
  if (IsContiguous()) return *this;
  Tensor out(shape_, device_, dtype_);
  out.CopyData(*this);
  return out;
}

Tensor Tensor::Clone(std::shared_ptr<Device> device) const {
  Tensor out(shape_, device ? device : device_, dtype_);
  out.CopyData(*this);
  return out;
}

namespace {
// Converts x (any layout) into out (any layout, same shape and device, any
// dtype).
void CastInto(const Tensor& x, Tensor* out) {
  if (x.Size() == 0) return;
  Tensor src = Unaliased(x, *out);
  ElemSpace sp = MakeElemSpace(out->shape(), {&out->stride(), &src.stride()});
  Tensor o = *out;
  SINGA_LANG_SWITCH(o.device(), Lang, o.device()->Exec(
      [sp, src, o](Context* ctx) mutable {
        auto run = [&](auto in_tag) {
          using TI = decltype(in_tag);
          const TI* xp = src.data<TI>();
          switch (o.data_type()) {
            case kFloat16:
              Math<Lang>::Cast(sp, xp, o.mutable_data<Half>(), ctx);
              break;
            case kFloat32:
              Math<Lang>::Cast(sp, xp, o.mutable_data<float>(), ctx);
              break;
            default:
              Math<Lang>::Cast(sp, xp, o.mutable_data<int32_t>(), ctx);
          }
        };
        switch (src.data_type()) {
          case kFloat16:
            run(Half{});
            break;
          case kFloat32:
            run(float{});
            break;
          default:
            run(int32_t{});
        }
      },
      {src.block()}, {o.block()}));
}

// Copies src into dst when they are on different devices: src is converted
// and made contiguous on its own device, its bytes cross (through the host
// between two GPUs), and dst's device lays them out.
void CopyAcross(const Tensor& src, Tensor* dst) {
  Device* sd = src.device().get();
  Device* dd = dst->device().get();
  // The source is read now, on the host: a device that records a graph has
  // not computed it yet.
  if (src.Size() == 0) return;
  sd->CheckHostRead(("copy_data from " + sd->name() + " to " + dd->name()).c_str());
  Tensor c = src.data_type() == dst->data_type() ? src.Contiguous() : src.AsType(dst->data_type());
  Tensor t = dst->IsContiguous() ? *dst : Tensor(dst->shape(), dst->device(), dst->data_type());
  const size_t nbytes = c.MemSize();
  if (dd->graph_enabled()) {
    // Recorded like any host-to-device copy: a snapshot of the source now,
    // written by every replay.
    std::vector<char> host(nbytes);
    if (sd->is_host())
      std::memcpy(host.data(), c.raw_data(), nbytes);
    else
      sd->CopyDataToFrom(host.data(), c.raw_data(), nbytes, kDeviceToHost);
    t.CopyDataFromHostPtr(host.data(), nbytes);
  } else if (sd->is_host()) {
    // The host device runs its work at once, so c is ready; dd's copy is
    // queued after the work already queued on dd.
    dd->CopyDataToFrom(t.mutable_raw_data(), c.raw_data(), nbytes, kHostToDevice);
  } else if (dd->is_host()) {
    sd->CopyDataToFrom(t.mutable_raw_data(), c.raw_data(), nbytes, kDeviceToHost);
  } else {
    std::vector<char> host(nbytes);
    sd->CopyDataToFrom(host.data(), c.raw_data(), nbytes, kDeviceToHost);
    dd->CopyDataToFrom(t.mutable_raw_data(), host.data(), nbytes, kHostToDevice);
  }
  if (t.block() != dst->block()) CastInto(t, dst);
}
}  // namespace

void Tensor::CopyData(const Tensor& src) {
  SINGA_CHECK(src.Size() == Size(), ShapeError, "copy_data: source of shape ",
              src.shape(), " (", src.Size(), " elements) does not fit shape ",
              shape_, " (", Size(), " elements)");
  Tensor s = src.shape() == shape_ ? src : src.Reshape(shape_);
  if (src.device_ == device_)
    CastInto(s, this);
  else
    CopyAcross(s, this);
}

Tensor Tensor::AsType(DataType dtype) const {
  Tensor out(shape_, device_, dtype);
  out.CopyData(*this);
  return out;
}

void Tensor::ToType(DataType dtype) {
  if (dtype != dtype_) *this = AsType(dtype);
}

void Tensor::ToDevice(std::shared_ptr<Device> device) {
  if (!device) device = DefaultDevice();
  if (device == device_) return;
  *this = Clone(device);
}

void Tensor::SetValue(float x) {
  if (Size() == 0) return;
  ElemSpace sp = MakeElemSpace(shape_, {&strides_});
  Tensor t = *this;
  SINGA_LANG_SWITCH(device_, Lang, device_->Exec(
      [sp, t, x](Context* ctx) mutable {
        switch (t.data_type()) {
          case kFloat16:
            Math<Lang>::Fill(sp, Half{FloatToHalf(x)}, t.mutable_data<Half>(), ctx);
            break;
          case kFloat32:
            Math<Lang>::Fill(sp, x, t.mutable_data<float>(), ctx);
            break;
          default:
            Math<Lang>::Fill(sp, op::ToElem<int32_t>(x), t.mutable_data<int32_t>(), ctx);
        }
      },
      {}, {block()}));
}

void Tensor::CopyDataFromHostPtr(const void* src, size_t nbytes,
                                 size_t elem_offset) {
  const size_t es = SizeOf(dtype_);
  SINGA_CHECK(nbytes % es == 0, ValueError, "copy_from_numpy: ", nbytes,
              " bytes is not a whole number of ", DataTypeName(dtype_),
              " elements");
  // Written so that no offset, however large, can wrap the sum around.
  SINGA_CHECK(elem_offset <= Size() && nbytes / es <= Size() - elem_offset, ValueError,
              "copy_from_numpy: ", nbytes / es, " elements at offset ",
              elem_offset, " do not fit a tensor of shape ", shape_);
  if (nbytes == 0) return;
  if (IsContiguous() && device_->graph_enabled()) {
    // Recorded: the host bytes are copied now, so the caller may reuse its
    // buffer, and every replay writes the same values.
    auto snapshot = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                        static_cast<const char*>(src) + nbytes);
    Tensor t = *this;
    device_->Exec(
        [t, snapshot, elem_offset, es](Context*) mutable {
          t.device()->CopyDataToFrom(static_cast<char*>(t.mutable_raw_data()) + elem_offset * es,
                                     snapshot->data(), snapshot->size(), kHostToDevice);
        },
        {}, {block()});
  } else if (IsContiguous()) {
    device_->CopyDataToFrom(static_cast<char*>(mutable_raw_data()) + elem_offset * es, src,
                            nbytes, kHostToDevice);
  } else {
    Tensor tmp = Contiguous().Clone();
    tmp.CopyDataFromHostPtr(src, nbytes, elem_offset);
    CopyData(tmp);
  }
}

void Tensor::CopyDataToHostPtr(void* dst, size_t nbytes) const {
  SINGA_CHECK(nbytes == MemSize(), ValueError, "to_numpy: buffer of ", nbytes,
              " bytes does not match a tensor of ", MemSize(), " bytes");
  device_->CheckHostRead("to_numpy");
  if (nbytes == 0) return;
  Tensor c = Contiguous();
  device_->Sync();
  device_->CopyDataToFrom(dst, c.raw_data(), nbytes, kDeviceToHost);
}

namespace {
// fill(lang_tag, y, ctx) writes Size() float32 values to y.
template <typename Fill>
void RandomFill(Tensor* t, Fill fill) {
  if (t->Size() == 0) return;
  if (t->data_type() == kFloat32 && t->IsContiguous()) {
    Tensor o = *t;
    Block* rng = o.device()->context()->random_state.get();
    SINGA_LANG_SWITCH(o.device(), Lang, o.device()->Exec(
        [o, fill](Context* ctx) mutable { fill(Lang(), o.mutable_data<float>(), ctx); },
        {rng}, {o.block(), rng}));
    return;
  }
  Tensor tmp(t->shape(), t->device(), kFloat32);
  RandomFill(&tmp, fill);
  t->CopyData(tmp);
}
}  // namespace

void Tensor::Gaussian(float mean, float std) {
  SINGA_CHECK(std > 0 && std::isfinite(std) && std::isfinite(mean), ValueError,
              "gaussian: need a finite mean and a positive std, got mean ",
              mean, " std ", std);
  const int64_t n = static_cast<int64_t>(Size());
  RandomFill(this, [=](auto lang, float* p, Context* ctx) {
    Math<decltype(lang)>::Gaussian(n, mean, std, p, ctx);
  });
}

void Tensor::Uniform(float low, float high) {
  SINGA_CHECK(low <= high && std::isfinite(low) && std::isfinite(high),
              ValueError, "uniform: need finite low <= high, got ", low, " and ",
              high);
  const int64_t n = static_cast<int64_t>(Size());
  RandomFill(this, [=](auto lang, float* p, Context* ctx) {
    Math<decltype(lang)>::Uniform(n, low, high, p, ctx);
  });
}

void Tensor::Bernoulli(float p) {
  SINGA_CHECK(p >= 0 && p <= 1, ValueError,
              "bernoulli: probability must be in [0, 1], got ", p);
  const int64_t n = static_cast<int64_t>(Size());
  RandomFill(this, [=](auto lang, float* y, Context* ctx) {
    Math<decltype(lang)>::Bernoulli(n, p, y, ctx);
  });
}

float Tensor::L1() const {
  device_->CheckHostRead("l1");
  Tensor f = dtype_ == kFloat32 ? *this : AsType(kFloat32);
  return Size() ? SumAll(Abs(f)) / static_cast<float>(Size()) : 0.f;
}

float Tensor::L2() const {
  device_->CheckHostRead("l2");
  Tensor f = dtype_ == kFloat32 ? *this : AsType(kFloat32);
  return Size() ? std::sqrt(SumAll(Square(f))) / static_cast<float>(Size())
                : 0.f;
}

// ---- helpers shared by the op files ----

Strides BroadcastStrides(const Tensor& x, const Shape& out_shape,
                         const char* op) {
  const Shape& xs = x.shape();
  SINGA_CHECK(xs.size() <= out_shape.size(), ShapeError, op, ": shape ", xs,
              " cannot be broadcast to ", out_shape);
  Strides s(out_shape.size(), 0);
  const size_t lead = out_shape.size() - xs.size();
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] == out_shape[lead + i]) {
      s[lead + i] = x.stride()[i];
    } else {
      SINGA_CHECK(xs[i] == 1, ShapeError, op, ": shape ", xs,
                  " cannot be broadcast to ", out_shape);
    }
  }
  return s;
}

Shape BroadcastShape(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    size_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    size_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SINGA_CHECK(da == db || da == 1 || db == 1, ShapeError, op, ": shapes ", a,
                " and ", b, " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

ElemSpace MakeElemSpace(const Shape& out_shape,
                        std::initializer_list<const Strides*> strides) {
  // Built in place, without heap memory: this runs once per element-wise op.
  ElemSpace sp;
  const Strides* st[4];
  int nops = 0;
  for (const Strides* s : strides) st[nops++] = s;
  sp.nops = nops;
  sp.size = static_cast<int64_t>(Product(out_shape));
  int nd = 0;  // loop dimensions; past kMaxElemDims they are only counted
  for (size_t d = 0; d < out_shape.size(); ++d) {
    const int64_t n = static_cast<int64_t>(out_shape[d]);
    if (n == 1) continue;
    bool merge = nd > 0 && nd <= kMaxElemDims;
    for (int k = 0; merge && k < nops; ++k) merge = sp.stride[k][nd - 1] == (*st[k])[d] * n;
    if (merge) {
      sp.shape[nd - 1] *= n;
      for (int k = 0; k < nops; ++k) sp.stride[k][nd - 1] = (*st[k])[d];
      continue;
    }
    if (nd < kMaxElemDims) {
      sp.shape[nd] = n;
      for (int k = 0; k < nops; ++k) sp.stride[k][nd] = (*st[k])[d];
    }
    ++nd;
  }
  SINGA_CHECK(nd <= kMaxElemDims, ValueError, "element-wise op: shape ", out_shape,
              " with this layout needs more than the ", kMaxElemDims,
              " loop dimensions supported; call contiguous() first");
  if (nd == 0) {  // a single element
    sp.shape[0] = 1;
    for (int k = 0; k < nops; ++k) sp.stride[k][0] = 1;
    nd = 1;
  }
  sp.ndim = nd;
  return sp;
}

bool SafeToWriteOver(const Tensor& x, const Tensor& out) {
  if (x.block() != out.block()) return true;
  if (x.offset() != out.offset() || x.shape() != out.shape()) return false;
  for (size_t i = 0; i < x.nDim(); ++i)
    if (x.shape()[i] > 1 && x.stride()[i] != out.stride()[i]) return false;
  return true;
}

Tensor Unaliased(const Tensor& x, const Tensor& out) {
  if (SafeToWriteOver(x, out)) return x;
  Tensor copy(x.shape(), x.device(), x.data_type());
  copy.CopyData(x);
  return copy;
}

size_t NormAxis(int axis, size_t ndim, const char* op) {
  const int n = static_cast<int>(ndim);
  SINGA_CHECK(axis >= -n && axis < n, IndexError, op, ": axis ", axis,
              " is out of range for ", ndim, " dimensions");
  return static_cast<size_t>(axis < 0 ? axis + n : axis);
}

void CheckSameDevice(const char* op, const Tensor& a, const Tensor& b) {
  SINGA_CHECK(a.device() == b.device(), DeviceError, op,
              ": tensors are on different devices, ", a.device()->name(),
              " and ", b.device()->name(), " (move one with to_device)");
}

}  // namespace singa
