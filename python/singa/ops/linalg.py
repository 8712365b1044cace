"""Matrix products, bias addition and cosine similarity.

Transposes are passed to the C++ GEMM as views, so backward never copies
an operand to transpose it.
"""

from singa import singa_wrap as _cw
from singa.autograd import Operator
from singa.ops import unbroadcast

__all__ = ["Matmul", "matmul", "AddBias", "add_bias", "Gemm", "gemm", "CosSim", "cossim"]


def _swap_last(t):
    """t with its last two axes swapped, as a view."""
    n = t.nDim()
    return t.Transpose(list(range(n - 2)) + [n - 1, n - 2])


class Matmul(Operator):
    """NumPy matmul (ONNX MatMul): 1-D operands are promoted to matrices and
    batch dimensions broadcast."""

    saves_only_when_told = True

    def forward(self, x, w):
        if self.saved:
            self._a, self._b = x, w
        if x.nDim() == 2 and w.nDim() == 2:
            return _cw.Mult(x, w)
        return _cw.Matmul(x, w)

    def backward(self, dy):
        a, b = self._a, self._b
        if a.nDim() == 2 and b.nDim() == 2:
            da = _cw.Mult(dy, b.Transpose()) if self.needs_grad(0) else None
            db = _cw.Mult(a.Transpose(), dy) if self.needs_grad(1) else None
            return da, db
        # Work on the promoted (at least 2-D) operands, then drop the axes
        # that promotion added.
        a2 = a.Reshape([1, a.Size()]) if a.nDim() == 1 else a
        b2 = b.Reshape([b.Size(), 1]) if b.nDim() == 1 else b
        out = list(dy.shape())
        if a.nDim() == 1:
            out.insert(len(out) - (0 if b.nDim() == 1 else 1), 1)
        if b.nDim() == 1:
            out.append(1)
        dy2 = dy.Reshape(out)
        da = _cw.Matmul(dy2, _swap_last(b2))
        db = _cw.Matmul(_swap_last(a2), dy2)
        da = unbroadcast(da, a2.shape()).Reshape(list(a.shape()))
        db = unbroadcast(db, b2.shape()).Reshape(list(b.shape()))
        return da, db


def matmul(x, w):
    return Matmul()(x, w)[0]


class AddBias(Operator):
    """x + b for a 2-D x, as in SINGA: axis=0 adds the vector b to every row
    (b has x's column count), axis=1 to every column (b has x's row count).
    """

    def __init__(self, axis=0, name=None):
        super().__init__(name)
        if axis not in (0, 1):
            raise ValueError(f"add_bias: axis must be 0 (rows) or 1 (columns), got {axis!r}")
        self.axis = axis

    def forward(self, x, b):
        if x.nDim() != 2 or b.nDim() != 1 or b.shape(0) != x.shape(1 - self.axis):
            raise ValueError(f"add_bias: cannot add a bias of shape {b.shape()} along "
                             f"axis {self.axis} of a matrix of shape {x.shape()}")
        if self.axis == 0:
            return _cw.Add(x, b)
        return _cw.Add(x, b.Reshape([b.Size(), 1]))

    def backward(self, dy):
        return dy, _cw.Sum(dy, [self.axis], False)


def add_bias(x, b, axis=0):
    return AddBias(axis)(x, b)[0]


class _Linear(Operator):
    """x W + b for a matrix x, W (in, out) and b (out,): what layer.Linear
    computes as matmul then add_bias, in one operator (one GEMM whose
    output rows start as b, one backward). Exported as ONNX MatMul + Add,
    like the pair."""

    saves_only_when_told = True

    def forward(self, x, w, b):
        if self.saved:
            self._x, self._w = x, w
        return _cw.LinearForward(x, w, b)

    def backward(self, dy):
        dx = _cw.Mult(dy, self._w.Transpose()) if self.needs_grad(0) else None
        dw = _cw.Mult(self._x.Transpose(), dy) if self.needs_grad(1) else None
        db = _cw.Sum(dy, [0], False) if self.needs_grad(2) else None
        return dx, dw, db


def _linear(x, w, b):
    return _Linear()(x, w, b)[0]


class Gemm(Operator):
    """alpha A' B' + beta C, with A' = A^T when transA and B' = B^T when
    transB; C is optional and broadcasts to the result (ONNX Gemm)."""

    def __init__(self, alpha=1.0, beta=1.0, transA=0, transB=0, name=None):
        super().__init__(name)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.transA = int(transA)
        self.transB = int(transB)

    def forward(self, A, B, C=None):
        if A.nDim() != 2 or B.nDim() != 2:
            raise ValueError(f"gemm: A and B must be matrices, got shapes {A.shape()} "
                             f"and {B.shape()}")
        a = A.Transpose() if self.transA else A
        b = B.Transpose() if self.transB else B
        if a.shape(1) != b.shape(0):
            raise ValueError(f"gemm: shapes {A.shape()} (transA={self.transA}) and "
                             f"{B.shape()} (transB={self.transB}) do not chain")
        self._a, self._b = a, b
        self._c_shape = None if C is None else C.shape()
        y = _cw.Mult(a, b)
        if C is None or self.beta == 0.0:
            return y if self.alpha == 1.0 else _cw.MulScalar(y, self.alpha)
        if self.alpha != 1.0:
            y = _cw.MulScalar(y, self.alpha)
        return _cw.Add(y, C if self.beta == 1.0 else _cw.MulScalar(C, self.beta))

    def backward(self, dy):
        a, b = self._a, self._b
        g = dy if self.alpha == 1.0 else _cw.MulScalar(dy, self.alpha)
        # d(a b)/da = g b^T; when A' = A^T the gradient for A is its transpose
        da = db = None
        if self.needs_grad(0):
            da = _cw.Mult(b, g.Transpose()) if self.transA else _cw.Mult(g, b.Transpose())
        if self.needs_grad(1):
            db = _cw.Mult(g.Transpose(), a) if self.transB else _cw.Mult(a.Transpose(), g)
        if self._c_shape is None:
            return da, db
        dc = unbroadcast(dy if self.beta == 1.0 else _cw.MulScalar(dy, self.beta), self._c_shape)
        return da, db, dc


def gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    op = Gemm(alpha, beta, transA, transB)
    return (op(A, B) if C is None else op(A, B, C))[0]


class CosSim(Operator):
    """Cosine similarity of a and b along the last axis (SINGA's cossim):
    for (N, D) inputs the result has shape (N,).

    With c = a.b / (|a| |b|): dc/da = b / (|a| |b|) - c a / |a|^2.
    """

    @classmethod
    def dot(cls, a, b):
        """The row-wise dot products of CTensors a and b of shape (N, D):
        a CTensor of shape (N,)."""
        if a.shape() != b.shape() or a.nDim() != 2:
            raise ValueError(f"CosSim.dot: expected two (N, D) tensors of one shape, got "
                             f"{a.shape()} and {b.shape()}")
        return _cw.Sum(_cw.Mul(a, b), [1], False)

    def forward(self, a, b):
        if a.shape() != b.shape():
            raise ValueError(f"cossim: shapes {a.shape()} and {b.shape()} differ")
        ax = [a.nDim() - 1]
        na = _cw.Sqrt(_cw.Sum(_cw.Square(a), ax, True))
        nb = _cw.Sqrt(_cw.Sum(_cw.Square(b), ax, True))
        dot = _cw.Sum(_cw.Mul(a, b), ax, True)
        c = _cw.Div(dot, _cw.Mul(na, nb))
        self._a, self._b, self._na, self._nb, self._c = a, b, na, nb, c
        return c.Reshape(list(a.shape())[:-1])

    def backward(self, dy):
        a, b, na, nb, c = self._a, self._b, self._na, self._nb, self._c
        g = dy.Reshape(list(c.shape()))
        nab = _cw.Mul(na, nb)
        da = _cw.Sub(_cw.Div(b, nab), _cw.Mul(_cw.Div(c, _cw.Square(na)), a))
        db = _cw.Sub(_cw.Div(a, nab), _cw.Mul(_cw.Div(c, _cw.Square(nb)), b))
        return _cw.Mul(da, g), _cw.Mul(db, g)


def cossim(a, b):
    return CosSim()(a, b)[0]
