"""Helpers for the floating-point tests (test_functions.py, test_special_values.py).

Bitwise comparison up to NaN payloads (the sign and payload of a NaN are not part of
IEEE arithmetic's result, and x86 and NumPy produce different ones), distances in ulps,
the special values, and kernels generated from templates into a module of their own
(the engine reads a kernel's source, so generated kernels need a file).
"""
import math
import string

import numpy as np

from adjoint.options import options
from test_property import load

TINY = 5e-324                       # the smallest subnormal
MIN_NORMAL = 2.2250738585072014e-308
SPECIAL = (0.0, -0.0, TINY, -TINY, MIN_NORMAL, 1e-300, -1e-300, 1e300, -1e300,
           math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -2.5, 3.0, 1e16, 1e-16)


def library_ulps():
    """How far the compiled math library's sin, exp, pow, ... may be from glibc's: 0 on the
    CPU and in CUDA emulation (both call glibc); on a GPU, CUDA's double-precision functions
    are within 2 ulps of the correctly rounded result (CUDA programming guide), glibc's
    within 1."""
    return 4 if options.device == "cuda" and not options.cuda_emulation else 0


def ordered(a):
    """The IEEE bit patterns as integers ordered like the values (-0.0 and 0.0 both 0), as
    Python ints so that distances between far values do not overflow."""
    i = np.ascontiguousarray(a, dtype=np.float64).view(np.int64).ravel().tolist()
    return [v if v >= 0 else -(v & 0x7FFF_FFFF_FFFF_FFFF) for v in i]


def mismatches(got, want, ulps=0, zero_sign=True):
    """Indices where ``got`` is not ``want``: NaN where the other is not, more than
    ``ulps`` apart, or (``zero_sign``) zeros of different signs."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    g, w = got.ravel(), want.ravel()
    bad = []
    for k, (a, b, oa, ob) in enumerate(zip(g, w, ordered(g), ordered(w))):
        if np.isnan(a) or np.isnan(b):
            wrong = np.isnan(a) != np.isnan(b)
        else:
            wrong = abs(oa - ob) > ulps or (zero_sign and a == 0.0 and b == 0.0
                                            and np.signbit(a) != np.signbit(b))
        if wrong:
            bad.append(k)
    return bad


def assert_same(got, want, inputs=(), what="", ulps=0, zero_sign=True):
    """``got`` equals ``want`` bitwise (NaN payloads aside), or within ``ulps``; the message
    lists the first mismatches with their inputs (``inputs``: arrays of the same shape)."""
    bad = mismatches(got, want, ulps, zero_sign)
    if not bad:
        return
    g, w = np.ravel(got), np.ravel(want)
    flat = [np.ravel(x) for x in inputs]
    lines = [f"  at {tuple(float(x[k]) for x in flat)!r}: compiled {g[k]!r}, Python {w[k]!r}"
             for k in bad[:12]]
    how = "bitwise" if ulps == 0 else f"within {ulps} ulp"
    raise AssertionError(f"{what}: {len(bad)} of {g.size} values differ ({how}):\n"
                         + "\n".join(lines))


class Fields(string.Formatter):
    """Fills a template's ``{name}`` fields: the names in ``mapping`` by their value, any
    other (a local) by ``name_<suffix>``, so that two forms of one template can share a
    kernel (a name is a number or an array for the whole kernel)."""

    def __init__(self, mapping, suffix):
        super().__init__()
        self.mapping, self.suffix = mapping, suffix

    def get_value(self, key, args, kwargs):
        return self.mapping.get(key, f"{key}_{self.suffix}")


def fill(template, mapping, suffix):
    return Fields(mapping, suffix).format(template)


HEADER = ["import math", "import numpy as np", "from adjoint import float64, kernel, symbol",
          'N = symbol("N")', ""]


def load_kernels(sources, stem):
    """A module holding the kernels whose sources (without imports) are given."""
    return load("\n".join(HEADER + list(sources)) + "\n", stem)


def quiet(func, *args):
    """``func(*args)`` with NumPy's floating-point warnings off (nan, inf are the point)."""
    import warnings
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return func(*args)
