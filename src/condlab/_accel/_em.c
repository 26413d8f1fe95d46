/* The line counter's EM, one compiled loop per layer: the fast path "compiled mixture EM"
 * (condlab/_accel/_mixture_em.py says when it runs; the reference, whose arithmetic this follows
 * step by step, is condlab/analysis/_mixture.py: em, _step, e_step, _m_step, _spread, close_pair).
 *
 * Why compiled: numpy runs one EM step of a (50-row, 5-component) layer as ~100 calls over
 * arrays of a few hundred numbers, so the step costs ~25 us; here ~9 (its exp, log and divisions
 * per row and component). C rather than numba: numba's import and the load of a cached kernel cost ~0.6 s in every fresh
 * process (more than the EM of a whole sweep batch), an extension module's import ~1 ms.
 *
 * Plain C99 and the CPython buffer protocol (no numpy headers). Every constant of the method is
 * an argument (defined once, in _mixture.py). Sums run in another order than numpy's (pairwise
 * sums, BLAS products) and exp/log are libm's: results agree with the reference to rounding
 * (tests/test_accel_parity.py). The GIL is released while the layers run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* _mixture_em.py refuses a build of another version (a stale in-place build): raise it with any
 * change of the arguments or of what is computed */
#define ABI_VERSION 1

typedef struct {
    double tol, log_s_min, lo, hi, cos_close;
    long max_iter, newton;
} Consts;

typedef struct { /* one layer's working arrays, (K, n) laid out component by component */
    double *C, *q, *R, *R0, *top, *x, *Rw, *newmu, *mu, *ls, *lp;
    int *live;
} Work;

/* Loops run over the rows of one component (rows innermost, UT laid out (k, n)), so that the
 * compiler vectorizes them; exp and log are libm's, called per element. */

/* E-step of one layer: cosines C, q = c^2 + (1 - c^2)/s^2, responsibilities R, R0 (background);
 * returns the log-likelihood sum_i w_i log p(u_i). Reference: _mixture.e_step. */
static double e_step(const double *UT, const double *w, long n, long k, long K, const double *mu,
                     const double *ls, const double *lp, const int *live, Work *W) {
    double *top = W->top, *Z = W->R0;
    for (long i = 0; i < n; i++) top[i] = lp[0];
    for (long j = 0; j < K; j++) {
        if (!live[j]) continue;
        double inv = exp(-2.0 * ls[j]), c0 = lp[1 + j] - (double)(k - 1) * ls[j], half = -0.5 * (double)k;
        double *C = W->C + j * n, *q = W->q + j * n, *L = W->R + j * n;
        const double *m = mu + j * k;
        for (long i = 0; i < n; i++) C[i] = m[0] * UT[i];
        for (long d = 1; d < k; d++)
            for (long i = 0; i < n; i++) C[i] += m[d] * UT[d * n + i];
        for (long i = 0; i < n; i++) q[i] = C[i] * C[i] * (1.0 - inv) + inv;
        for (long i = 0; i < n; i++) L[i] = log(q[i]) * half + c0;
        for (long i = 0; i < n; i++) top[i] = L[i] > top[i] ? L[i] : top[i];
    }
    /* a row no component (background included) can explain: zero responsibilities, not nan */
    for (long i = 0; i < n; i++) if (!isfinite(top[i])) top[i] = 0.0;
    for (long i = 0; i < n; i++) Z[i] = 0.0;
    for (long j = 0; j < K; j++) {
        if (!live[j]) continue;
        double *E = W->R + j * n;
        for (long i = 0; i < n; i++) E[i] = exp(E[i] - top[i]);
        for (long i = 0; i < n; i++) Z[i] += E[i];
    }
    double ll = 0.0;
    for (long i = 0; i < n; i++) {
        double E0 = exp(lp[0] - top[i]), z = Z[i] + E0;
        z = z < DBL_MIN ? DBL_MIN : z;
        ll += (top[i] + log(z)) * w[i];
        Z[i] = 1.0 / z;
        W->x[i] = E0;
    }
    for (long j = 0; j < K; j++) {
        double *R = W->R + j * n;
        if (!live[j]) { memset(R, 0, (size_t)n * sizeof(double)); continue; }
        for (long i = 0; i < n; i++) R[i] *= Z[i];
    }
    for (long i = 0; i < n; i++) W->R0[i] = W->x[i] * Z[i]; /* R0 held 1/Z until here */
    return ll;
}

/* Whether two live axes lie within MIN_LINE_DEG (|cos| > cos_close). Reference: close_pair. */
static int close_pair(const double *mu, const int *live, long K, long k, double cos_close) {
    for (long a = 0; a < K; a++) {
        if (!live[a]) continue;
        for (long b = a + 1; b < K; b++) {
            if (!live[b]) continue;
            double c = 0.0;
            for (long d = 0; d < k; d++) c += mu[a * k + d] * mu[b * k + d];
            if (fabs(c) > cos_close) return 1;
        }
    }
    return 0;
}

/* log s maximizing the expected log-likelihood of component j at its new axis m (Newton in
 * v = log 1/s^2), from the weighted responsibilities Rw (n,). Reference: _mixture._spread. */
static double spread(const double *UT, const double *Rw, double N, const double *m, double ls, long n,
                     long k, const Consts *c, double *x) {
    for (long i = 0; i < n; i++) x[i] = m[0] * UT[i];
    for (long d = 1; d < k; d++)
        for (long i = 0; i < n; i++) x[i] += m[d] * UT[d * n + i];
    for (long i = 0; i < n; i++) {
        double c2 = x[i] * x[i], t = (1.0 - c2) / c2; /* tan^2 of the angle; a row at 90 deg: inf */
        x[i] = t < 1e30 ? t : 1e30;
    }
    double v = -2.0 * ls;
    for (long it = 0; it < c->newton; it++) {
        double ev = exp(v), g1 = 0.0, g2 = 0.0;
        for (long i = 0; i < n; i++) {
            double a = x[i] * ev;
            a /= 1.0 + a;
            g1 += Rw[i] * a;
            g2 += Rw[i] * a * a;
        }
        double g = 0.5 * (double)(k - 1) * N - 0.5 * (double)k * g1;
        double h = 0.5 * (double)k * (g1 - g2);
        double stepv = g / (h > 1e-12 ? h : 1e-12);
        stepv = stepv < -2.0 ? -2.0 : (stepv > 2.0 ? 2.0 : stepv);
        v += stepv;
        v = v < c->lo ? c->lo : (v > c->hi ? c->hi : v);
    }
    return -0.5 * v;
}

/* M-step of one layer into W->mu, W->ls, W->lp (the new parameters). Reference: _m_step. */
static void m_step(const double *UT, const double *w, long n, long k, long K, const double *mu,
                   const double *ls, const int *live, const Consts *c, Work *W) {
    double N0 = 0.0, Ntot = 0.0, N[64];
    double *Rw = W->Rw, *f = W->top;
    for (long i = 0; i < n; i++) N0 += W->R0[i] * w[i];
    for (long j = 0; j < K; j++) {
        double *nm = W->mu + j * k;
        memcpy(nm, mu + j * k, (size_t)k * sizeof(double));
        W->ls[j] = ls[j];
        N[j] = 0.0;
        if (!live[j]) continue;
        const double *R = W->R + j * n, *C = W->C + j * n, *q = W->q + j * n;
        double Nj = 0.0, norm = 0.0;
        for (long i = 0; i < n; i++) Rw[i] = R[i] * w[i];
        for (long i = 0; i < n; i++) Nj += Rw[i];
        for (long i = 0; i < n; i++) f[i] = Rw[i] / q[i] * C[i];
        for (long d = 0; d < k; d++) {
            double s = 0.0;
            const double *u = UT + d * n;
            for (long i = 0; i < n; i++) s += f[i] * u[i];
            W->newmu[d] = s;
            norm += s * s;
        }
        norm = sqrt(norm);
        if (Nj > 0 && norm > 0) {
            double div = norm > 1e-300 ? norm : 1e-300;
            for (long d = 0; d < k; d++) nm[d] = W->newmu[d] / div;
        }
        if (Nj > 0) W->ls[j] = spread(UT, Rw, Nj, nm, ls[j], n, k, c, W->x);
        N[j] = Nj;
        Ntot += Nj;
    }
    double total = N0 + Ntot;
    if (total < 1e-300) total = 1e-300;
    W->lp[0] = log(N0 / total);
    for (long j = 0; j < K; j++) W->lp[1 + j] = live[j] ? log(N[j] / total) : -INFINITY;
}

/* EM on one layer until it stops (reference: _mixture.em for one layer of the stack); mu (K, k),
 * ls (K,), lp (K + 1,) updated in place, *prev and *steps its last log-likelihood and steps. */
static void em_layer(const double *UT, const double *w, long n, long k, long K, double *mu, double *ls,
                     double *lp, double n_min, double *prev, int64_t *steps, const Consts *c, Work *W) {
    double n_act = 0.0;
    for (long i = 0; i < n; i++) n_act += w[i];
    if (n_act < 1.0) n_act = 1.0;
    double last = *prev;
    int64_t done = *steps;
    for (;;) {
        for (long j = 0; j < K; j++) W->live[j] = isfinite(lp[1 + j]);
        double ll = e_step(UT, w, n, k, K, mu, ls, lp, W->live, W);
        int close = close_pair(mu, W->live, K, k, c->cos_close);
        m_step(UT, w, n, k, K, mu, ls, W->live, c, W);
        int moving = fabs(ll - last) > c->tol * n_act; /* nan (-inf - -inf): stops */
        if (close) moving = 0;
        if (done > 0) {
            for (long j = 0; j < K; j++)
                if (W->live[j] && ls[j] <= c->log_s_min + 1e-9 && exp(lp[1 + j]) * n_act < n_min) moving = 0;
        }
        if (moving) {
            memcpy(mu, W->mu, (size_t)(K * k) * sizeof(double));
            memcpy(ls, W->ls, (size_t)K * sizeof(double));
            memcpy(lp, W->lp, (size_t)(K + 1) * sizeof(double));
        }
        last = ll;
        done += 1;
        if (!moving || done >= c->max_iter) break;
    }
    *prev = last;
    *steps = done;
}

/* A C-contiguous buffer of `len` (-1: any number of) 8-byte items of the kind 'd' (float64) or
 * 'i' (int64), writable if asked; -1 with a ValueError otherwise. */
static int get(PyObject *o, Py_buffer *b, int writable, char kind, Py_ssize_t len, const char *name) {
    if (PyObject_GetBuffer(o, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = b->format ? b->format : "B";
    while (*f == '@' || *f == '=' || *f == '<') f++; /* native byte order (little-endian x86/ARM) */
    int ok = b->itemsize == 8 && f[1] == '\0' && (kind == 'd' ? *f == 'd' : (*f == 'l' || *f == 'q'));
    if (!ok || (len >= 0 && b->len != len * 8)) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd %s items, got %zd bytes of format '%s'", name, len,
                     kind == 'd' ? "float64" : "int64", b->len, b->format ? b->format : "B");
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* em(UT, w, mu, log_s, log_pi, layers, n_min, prev, steps, B, n, k, K,
 *    tol, max_iter, newton, log_s_min, lo, hi, cos_close)
 * UT (B, k, n) (the unit rows, transposed), w (B, n) 0/1, mu (B, K, k), log_s (B, K),
 * log_pi (B, K + 1), prev (B,) float64; layers (L,), n_min (B,), steps (B,) int64. Runs each
 * listed layer to its stop, in place. */
static PyObject *py_em(PyObject *self, PyObject *args) {
    PyObject *o[9];
    Py_ssize_t B, n, k, K, L;
    Consts c;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOnnnndlldddd", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8], &B, &n, &k, &K, &c.tol, &c.max_iter, &c.newton, &c.log_s_min, &c.lo,
                          &c.hi, &c.cos_close))
        return NULL;
    if (K < 1 || K > 64 || n < 1 || k < 1 || B < 0) {
        PyErr_Format(PyExc_ValueError, "em: need 1 <= K <= 64, n >= 1, k >= 1, B >= 0; got K=%zd n=%zd k=%zd B=%zd",
                     K, n, k, B);
        return NULL;
    }
    Py_buffer b[9];
    Py_ssize_t sizes[9] = {B * n * k, B * n, B * K * k, B * K, B * (K + 1), -1, B, B, B};
    int wr[9] = {0, 0, 1, 1, 1, 0, 0, 1, 1};
    const char kinds[] = "dddddiidi";
    const char *names[9] = {"UT", "w", "mu", "log_s", "log_pi", "layers", "n_min", "prev", "steps"};
    int got = 0;
    while (got < 9 && get(o[got], &b[got], wr[got], kinds[got], sizes[got], names[got]) == 0) got++;
    if (got < 9) {
        for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
        return NULL;
    }
    L = b[5].len / 8;
    const double *UT = b[0].buf, *w = b[1].buf;
    double *mu = b[2].buf, *ls = b[3].buf, *lp = b[4].buf, *prev = b[7].buf;
    const int64_t *layers = b[5].buf, *n_min = b[6].buf;
    int64_t *steps = b[8].buf;
    int bad = 0;
    for (Py_ssize_t l = 0; l < L; l++) bad |= layers[l] < 0 || layers[l] >= B;
    Work W;
    double *buf = NULL;
    int *live = NULL;
    if (!bad) {
        buf = malloc(sizeof(double) * (size_t)(3 * K * n + 4 * n + k + K * k + 2 * K + 1));
        live = malloc(sizeof(int) * (size_t)K);
    }
    if (!bad && buf && live) {
        W.C = buf; W.q = W.C + K * n; W.R = W.q + K * n; W.R0 = W.R + K * n; W.top = W.R0 + n; W.x = W.top + n;
        W.Rw = W.x + n; W.newmu = W.Rw + n; W.mu = W.newmu + k; W.ls = W.mu + K * k; W.lp = W.ls + K;
        W.live = live;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t l = 0; l < L; l++) {
            int64_t g = layers[l];
            em_layer(UT + g * n * k, w + g * n, n, k, K, mu + g * K * k, ls + g * K, lp + g * (K + 1),
                     (double)n_min[g], prev + g, steps + g, &c, &W);
        }
        Py_END_ALLOW_THREADS
    }
    free(buf);
    free(live);
    for (int i = 0; i < 9; i++) PyBuffer_Release(&b[i]);
    if (bad) {
        PyErr_SetString(PyExc_IndexError, "em: a layer index is out of range");
        return NULL;
    }
    if (!buf || !live) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"em", py_em, METH_VARARGS, "Run the line counter's EM on the listed layers of a stack, in place."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_em", "The line counter's EM, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__em(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI_VERSION", ABI_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
