"""The ``sc_*`` helper functions of generated code, written once: both preambles (C's
``codegen.c.PREAMBLE``, CUDA's ``cuda_preamble.preamble``) include this text, each with
its own function qualifier (``static inline`` in C, ``SC_HD``, host and device, in
CUDA). What C and NumPy/Python compute differently (printer.HELPERS maps the functions
to these), integer index arithmetic, ``sc_check``'s checked arithmetic, and the engine's
own exp, expm1 and tanh (the option ``vector_math``)."""

CONSTANTS = r"""#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifndef M_E
#define M_E 2.7182818284590452354
#endif
#ifndef M_LN2
#define M_LN2 0.69314718055994530942
#endif
#ifndef M_LN10
#define M_LN10 2.30258509299404568402
#endif
"""

# Index arithmetic and the float helpers of sympy's functions; @FN@ and @POW@ are the
# backend's qualifiers (see arithmetic). sc_mod tests `a - b < b`, not `a < 2 * b`: 2 * b
# overflows for divisors beyond 2^62 (sc_check's sc_cmod takes any int64)
ARITHMETIC = r"""@FN@ int64_t sc_floordiv(int64_t a, int64_t b)
{ int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
@FN@ int64_t sc_mod(int64_t a, int64_t b)   /* wrap-around indices skip the division */
{
    if (b > 0 && a >= -b && (a < b || a - b < b)) return a < 0 ? a + b : (a < b ? a : a - b);
    int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
@FN@ int64_t sc_imin(int64_t a, int64_t b) { return a < b ? a : b; }
/* a ** b of integers, b >= 0 (the frontend checks it); by squaring, wrapping as uint64.
   C's is a const function not inlined, so loops hoist it out of the indices they compute */
@IPOW@int64_t sc_ipow(int64_t a, int64_t b)
{ uint64_t r = 1, x = (uint64_t)a; for (; b > 0; b >>= 1, x *= x) if (b & 1) r *= x;
  return (int64_t)r; }
@FN@ int64_t sc_imax(int64_t a, int64_t b) { return a > b ? a : b; }
/* number of values of range(a, b, s) */
@FN@ int64_t sc_trip(int64_t a, int64_t b, int64_t s)
{ return s > 0 ? (b > a ? (b - a + s - 1) / s : 0) : (a > b ? (a - b - s - 1) / (-s) : 0); }
/* NaN-propagating like np.maximum / np.minimum; unlike fmax/fmin they vectorise */
@FN@ double sc_max(double a, double b) { return (a > b || a != a) ? a : b; }
@FN@ double sc_min(double a, double b) { return (a < b || a != a) ? a : b; }
@POW@double sc_pow(double a, double b) { return pow(a, b); }
@FN@ double sc_sign(double x) { return (double)((x > 0) - (x < 0)); }
/* subgradient convention at kinks: the mean of the one-sided derivatives */
@FN@ double sc_heaviside(double x) { return x > 0 ? 1.0 : (x < 0 ? 0.0 : 0.5); }
"""

# C's sc_pow: GCC must not see through it (printer.py: pow(x, 0.5) and pow(x, -1.0)
# stay calls of pow, rounded as pow rounds)
C_POW = """/* C's pow where GCC would rewrite it (see printer.py) */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
__attribute__((noipa))
#elif defined(__GNUC__)
__attribute__((noinline))
#endif
static """


# C's sc_ipow: a call of constant arguments that loops hoist (GCC and clang)
C_IPOW = "__attribute__((const, noinline)) static "


def arithmetic(qualifier, pow_qualifier, ipow_qualifier):
    """ARITHMETIC with each function declared ``qualifier``, sc_pow ``pow_qualifier`` and
    sc_ipow ``ipow_qualifier``."""
    return ARITHMETIC.replace("@FN@", qualifier).replace("@POW@", pow_qualifier) \
        .replace("@IPOW@", ipow_qualifier)


# Python's and NumPy's semantics where C's differ (printer.HELPERS), in both backends'
# preambles (SC_VALUE: each backend's function qualifier)
PYTHON_SEMANTICS = r"""/* Python's max(a, b) / min(a, b): the first of equals, a nan second argument loses */
SC_VALUE double sc_pymax(double a, double b) { return b > a ? b : a; }
SC_VALUE double sc_pymin(double a, double b) { return b < a ? b : a; }
/* NumPy's power: its square root where the exponent is 0.5 */
SC_VALUE double sc_nppow(double a, double b) { return b == 0.5 ? sqrt(a) : pow(a, b); }
/* NumPy's fmax / fmin: a nan loses; the first of equals */
SC_VALUE double sc_fmax(double a, double b) { return (a >= b || b != b) ? a : b; }
SC_VALUE double sc_fmin(double a, double b) { return (a <= b || b != b) ? a : b; }
/* Python's and NumPy's float // and % (CPython's float_divmod; b == 0 as NumPy) */
SC_VALUE double sc_pymod(double a, double b)
{ double m = fmod(a, b); if (b == 0) return m;
  return m ? (((b < 0) != (m < 0)) ? m + b : m) : copysign(0.0, b); }
SC_VALUE double sc_pyfloordiv(double a, double b)
{ if (b == 0) return a / b;
  double m = fmod(a, b), d = (a - m) / b;
  if (m && ((b < 0) != (m < 0))) d -= 1.0;
  if (!d) return copysign(0.0, a / b);
  double f = floor(d); return d - f > 0.5 ? f + 1.0 : f; }
/* NumPy's integer // and % (0 for a zero divisor, wrapping at the minimum) and shifts
   (0, or the sign, from a count beyond the width) */
SC_VALUE int64_t sc_ipyfloordiv(int64_t a, int64_t b)
{ if (b == 0) return 0; if (b == -1) return (int64_t)((uint64_t)0 - (uint64_t)a);
  int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
SC_VALUE int64_t sc_ipymod(int64_t a, int64_t b)
{ if (b == 0 || b == -1) return 0;
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
SC_VALUE uint64_t sc_shl(int64_t a, int64_t b, int bits)
{ return (b < 0 || b >= bits) ? 0 : (uint64_t)a << b; }
SC_VALUE int64_t sc_shr(int64_t a, int64_t b, int bits)
{ return (b < 0 || b >= bits) ? (a < 0 ? -1 : 0) : a >> b; }
/* NumPy's sign: nan stays nan, both zeros give 0.0 */
SC_VALUE double sc_npsign(double a) { return a != a ? a : (double)((a > 0) - (a < 0)); }
"""

# sc_check's arithmetic (CheckPrinter): exact or it sets *o, never wraps nor traps (after
# the preamble's sc_floordiv and sc_mod; in both backends' preambles)
CHECKED = r"""static inline int64_t sc_cadd(int64_t a, int64_t b, int *o)
{ if (b > 0 ? a > INT64_MAX - b : a < INT64_MIN - b) { *o = 1; return 0; } return a + b; }
static inline int64_t sc_csub(int64_t a, int64_t b, int *o)
{ if (b < 0 ? a > INT64_MAX + b : a < INT64_MIN + b) { *o = 1; return 0; } return a - b; }
static inline int64_t sc_cmul(int64_t a, int64_t b, int *o)
{ if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
            : (b > 0 ? a < INT64_MIN / b : (a < 0 && b < INT64_MAX / a))) { *o = 1; return 0; }
  return a * b; }
static inline int64_t sc_cneg(int64_t a, int *o)
{ if (a == INT64_MIN) { *o = 1; return 0; } return -a; }
static inline int64_t sc_cfloordiv(int64_t a, int64_t b, int *o)
{ if (b == 0 || (a == INT64_MIN && b == -1)) { *o = 1; return 0; } return sc_floordiv(a, b); }
static inline int64_t sc_cmod(int64_t a, int64_t b, int *o)
{ if (b == 0 || (a == INT64_MIN && b == -1)) { *o = 1; return 0; } return sc_mod(a, b); }
static inline int64_t sc_cpow(int64_t a, int64_t b, int *o)
{ /* a * a overflowing with b left means the result overflows too (or |a| <= 1) */
  int64_t r = 1; if (b < 0) { *o = 1; return 0; }
  for (; b > 0; b >>= 1) { if (b & 1) r = sc_cmul(r, a, o); if (b > 1) a = sc_cmul(a, a, o); }
  return r; }
static inline int64_t sc_ctrip(int64_t a, int64_t b, int64_t s, int *o)
{ if (s == 0 || s == INT64_MIN) { *o = 1; return 0; }
  int64_t d = s > 0 ? sc_csub(b, a, o) : sc_csub(a, b, o), m = s > 0 ? s : -s;
  return d > 0 ? sc_cadd(d, m - 1, o) / m : 0; }
"""


# exp, expm1 and tanh of the option vector_math (printer.vector_math; both preambles hold
# them while it is on): no calls and no branches, so loops over them vectorise; + - * /
# and bit operations only (FMA is off in both backends' flags), so every machine, thread
# count and vector width computes the same bits. Out-of-range arguments are not clamped
# but their results selected by bit masks (sc_select) after the computation: GCC sank
# the computation into the in-range branch of a ternary (or folded it for a clamped
# constant), and without AVX-512's masks, under -ftrapping-math, left such loops scalar. Within 1, 2 and 3 ulps of glibc's
# (tests/engine/codegen/test_vector_math.py); inf, nan, -0.0, overflow to inf and
# underflow through the subnormals as glibc has them.
VECTOR_MATH = r"""SC_VALUE double sc_asdouble(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }
SC_VALUE uint64_t sc_asuint(double d) { uint64_t u; memcpy(&u, &d, sizeof u); return u; }
/* x = k ln2 + r, |r| <= ln2/2 + ulps: returns expm1(r) (Taylor to r^13: under 1e-17 off),
   *ki the bits of k + 1.5 * 2^52, whose low 52 bits are k + 2^51 (k > -2^51) */
SC_VALUE double sc_exp_reduce(double x, uint64_t *ki)
{
    const double shift = 0x1.8p52, ln2_hi = 0x1.62e42feep-1, ln2_lo = 0x1.a39ef35793c76p-33;
    double kd = x * 0x1.71547652b82fep0 + shift;        /* round(x / ln2), in its bits */
    *ki = sc_asuint(kd);
    kd -= shift;
    double r = (x - kd * ln2_hi) - kd * ln2_lo;        /* k * ln2_hi exact for |k| < 2^20 */
    /* (expm1(r) - r) / r^2 = sum r^n / (n + 2)!, n < 12, by Estrin's scheme (a short
       dependence chain: a loop's row of a few elements is one vector, latency-bound) */
    double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    double p01 = 0.5 + r * (1.0 / 6.0), p23 = 1.0 / 24.0 + r * (1.0 / 120.0);
    double p45 = 1.0 / 720.0 + r * (1.0 / 5040.0), p67 = 1.0 / 40320.0 + r * (1.0 / 362880.0);
    double p89 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0);
    double p1011 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0);
    double p = (p01 + r2 * p23) + r4 * (p45 + r2 * p67) + r8 * (p89 + r2 * p1011);
    return r + r2 * p;
}
/* 2^k from the bits of k + 2^51 (-1022 <= k <= 1023): shifting drops the 2^51 */
SC_VALUE double sc_pow2(uint64_t ki) { return sc_asdouble((ki + 1023) << 52); }
/* c ? a : b with both computed: a mask, no branch for the compiler to make */
SC_VALUE double sc_select(int c, double a, double b)
{ uint64_t m = -(uint64_t)c; return sc_asdouble((sc_asuint(a) & m) | (sc_asuint(b) & ~m)); }
/* inf from its bits (math.h's HUGE_VAL is the host compiler's builtin, which CUDA's
   device code may not take) */
SC_VALUE double sc_inf(void) { return sc_asdouble(0x7ff0000000000000ULL); }
SC_VALUE double sc_exp(double x)
{
    uint64_t ki;
    double q = sc_exp_reduce(x, &ki);
    /* 2^k as 2^(k - k/2) 2^(k/2) (k/2 rounded down), each normal for k in [-1076, 1024]:
       the first product is exact and the second rounds once, also into subnormals */
    double e = ((1.0 + q) * sc_pow2(ki - (ki >> 1))) * sc_pow2(ki >> 1);
    return sc_select(x < -746.0, 0.0, sc_select(x > 710.0, sc_inf(), e));
}
SC_VALUE double sc_expm1(double x)
{
    uint64_t ki;
    double q = sc_exp_reduce(x, &ki), s = sc_pow2(ki);
    double big = ((1.0 + q) * sc_pow2(ki - (ki >> 1))) * sc_pow2(ki >> 1) - 1.0;
    double em = s * q + (s - 1.0);                      /* 2^k (1 + q) - 1, k <= 1023 */
    /* -0.0 stays; beyond 2^53: big; below -60 (expm1(-60) rounds to -1) and beyond 710 */
    double in = sc_select(x == 0.0, x, sc_select(x > 37.0, big, em));
    return sc_select(x < -60.0, -1.0, sc_select(x > 710.0, sc_inf(), in));
}
/* tanh(|x|) = expm1(2|x|) / (expm1(2|x|) + 2), rounding to 1 from |x| = 22 on */
SC_VALUE double sc_tanh(double x)
{
    uint64_t ki;
    double a = fabs(x);
    double q = sc_exp_reduce(2.0 * a, &ki), s = sc_pow2(ki);
    double em = s * q + (s - 1.0);
    return copysign(sc_select(a > 22.0, 1.0, em / (em + 2.0)), x);
}
"""
