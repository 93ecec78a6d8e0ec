/* Hand-written forward and adjoint of models/seidel.py::seidel2d (loss = sum(A)).
 *
 * Forward: TSTEPS-1 in-place Gauss-Seidel sweeps with a 3x3 weight array w.
 * The adjoints are what a careful person would write by hand: they are the
 * "close to the limit" reference the engine is measured against.
 * All arrays are row-major, A and Ab are n x n, w and wb are 3 x 3; none may overlap.
 */
#include <stdint.h>

#define IX(i, j) ((i) * n + (j))

/* The new A[i, j].  By default the term on A[i, j-1], written by the previous update
 * (the loop-carried dependence), is added last, so the other eight products do not wait
 * for it: the order a performance-minded hand-writer picks.  With -DPYTHON_ORDER the
 * terms are summed left to right as in models/seidel.py; built with -ffp-contract=off
 * that is bit-identical to the plain Python. */
static inline double update(int64_t n, int64_t i, int64_t j, const double *restrict A, const double *restrict w)
{
#ifdef PYTHON_ORDER
    return w[0] * A[IX(i - 1, j - 1)] + w[1] * A[IX(i - 1, j)] + w[2] * A[IX(i - 1, j + 1)]
         + w[3] * A[IX(i, j - 1)] + w[4] * A[IX(i, j)] + w[5] * A[IX(i, j + 1)]
         + w[6] * A[IX(i + 1, j - 1)] + w[7] * A[IX(i + 1, j)] + w[8] * A[IX(i + 1, j + 1)];
#else
    return w[0] * A[IX(i - 1, j - 1)] + w[1] * A[IX(i - 1, j)] + w[2] * A[IX(i - 1, j + 1)]
         + w[4] * A[IX(i, j)] + w[5] * A[IX(i, j + 1)] + w[6] * A[IX(i + 1, j - 1)]
         + w[7] * A[IX(i + 1, j)] + w[8] * A[IX(i + 1, j + 1)] + w[3] * A[IX(i, j - 1)];
#endif
}

void seidel_fwd(int64_t n, int64_t tsteps, double *restrict A, const double *restrict w)
{
    for (int64_t t = 0; t < tsteps - 1; t++)
        for (int64_t i = 1; i < n - 1; i++)
            for (int64_t j = 1; j < n - 1; j++)
                A[IX(i, j)] = update(n, i, j, A, w);
}

/* One reverse instance of the update at (i, j): g = Ab[i,j]; Ab[i,j] = 0;
 * Ab[neighbour k] += g * w[k] (the centre's own term is the g * w[4] left behind). */
static inline void propagate(int64_t n, int64_t i, int64_t j, const double *restrict w, double *restrict Ab)
{
    double g = Ab[IX(i, j)];
    Ab[IX(i - 1, j - 1)] += g * w[0];
    Ab[IX(i - 1, j)]     += g * w[1];
    Ab[IX(i - 1, j + 1)] += g * w[2];
    Ab[IX(i, j - 1)]     += g * w[3];
    Ab[IX(i, j)]          = g * w[4];
    Ab[IX(i, j + 1)]     += g * w[5];
    Ab[IX(i + 1, j - 1)] += g * w[6];
    Ab[IX(i + 1, j)]     += g * w[7];
    Ab[IX(i + 1, j + 1)] += g * w[8];
}

/* d sum(A_final) / d A_initial into Ab (overwritten).  The update is linear in A,
 * so the reverse sweep needs no forward values and no tape.  If A is not NULL
 * the forward runs first (A ends as the final state, as for value_and_grad). */
void seidel_grad_A(int64_t n, int64_t tsteps, double *restrict A, const double *restrict w, double *restrict Ab)
{
    if (A)
        seidel_fwd(n, tsteps, A, w);
    for (int64_t k = 0; k < n * n; k++)
        Ab[k] = 1.0;
    for (int64_t t = tsteps - 2; t >= 0; t--)
        for (int64_t i = n - 2; i >= 1; i--)
            for (int64_t j = n - 2; j >= 1; j--)
                propagate(n, i, j, w, Ab);
}

/* d sum(A_final) / d w into wb and d / d A_initial into Ab (both overwritten).
 * The forward pushes the element each update overwrites onto tape
 * ((tsteps-1)*(n-2)^2 doubles); the reverse sweep pops it back, so memory holds
 * exactly what the forward instance read, and accumulates wb from it.
 * A is back at its initial value on return. */
void seidel_grad_w(int64_t n, int64_t tsteps, double *restrict A, const double *restrict w,
                   double *restrict Ab, double *restrict wb, double *restrict tape)
{
    int64_t top = 0;
    for (int64_t t = 0; t < tsteps - 1; t++)
        for (int64_t i = 1; i < n - 1; i++)
            for (int64_t j = 1; j < n - 1; j++) {
                tape[top++] = A[IX(i, j)];
                A[IX(i, j)] = update(n, i, j, A, w);
            }
    for (int64_t k = 0; k < n * n; k++)
        Ab[k] = 1.0;
    double b[9] = {0};
    for (int64_t t = tsteps - 2; t >= 0; t--)
        for (int64_t i = n - 2; i >= 1; i--)
            for (int64_t j = n - 2; j >= 1; j--) {
                A[IX(i, j)] = tape[--top];
                double g = Ab[IX(i, j)];
                b[0] += g * A[IX(i - 1, j - 1)];
                b[1] += g * A[IX(i - 1, j)];
                b[2] += g * A[IX(i - 1, j + 1)];
                b[3] += g * A[IX(i, j - 1)];
                b[4] += g * A[IX(i, j)];
                b[5] += g * A[IX(i, j + 1)];
                b[6] += g * A[IX(i + 1, j - 1)];
                b[7] += g * A[IX(i + 1, j)];
                b[8] += g * A[IX(i + 1, j + 1)];
                propagate(n, i, j, w, Ab);
            }
    for (int k = 0; k < 9; k++)
        wb[k] = b[k];
}
