/* The selective scan of Mamba-1 (models/mamba.py) with its skip and gate, on one CPU thread, in
 * float32, forward and backward, one sequence at a time with its whole (N, E) state in cache.
 *
 *   s_t = exp(dt_t * A) * s_{t-1} + (dt_t * u_t) B_t,      y_t[e] = sum_n C_t[n] s_t[n, e]
 *   out_t = (y_t + D * u_t) * silu(z_t)
 *
 * u, dt, z, out: (Bt, L, E); AT = A transposed: (N, E); Bm, Cm: (Bt, L, N); D: (E). Every array
 * is C-contiguous. The state is kept state-major, s[n * E + e], so the inner loops run over the
 * contiguous channel axis e and vectorise; exp is a polynomial written here (no libm call in the
 * loop), accurate to about 2 ulp for the arguments a scan meets (dt * A <= 0).
 *
 * The backward pass recomputes one sequence's states, decays exp(dt_t A) and outputs y (kept in
 * `work`, so the walk back evaluates no exp and copies no state) and walks back in time. With gy = dLoss/dy_t = gout_t * silu(z_t) and g = dLoss/ds_t:
 *   gz_t = gout_t (y_t + D u_t) silu'(z_t);  gD += gy u_t;
 *   g += gy_t[e] C_t[n];  gC_t[n] = sum_e gy_t[e] s_t[n, e];  gdu_t[e] = sum_n g B_t[n];
 *   gB_t[n] = sum_e g du_t[e];  k = g * exp(dt_t A) * s_{t-1}  (dLoss/d(dt_t A));
 *   gdt_t[e] = sum_n k A[n, e] + gdu_t[e] u_t[e];  gA += k dt_t;  gu_t = gdu_t dt_t + gy_t D;
 *   g *= exp(dt_t A)  (what reaches s_{t-1}).
 * Written by the archsep authors for this project. */
#include <stdint.h>
#include <string.h>

static inline float exp_neg(float x) {
    /* e^x for x <= 0 (a larger x is not met: dt > 0, A < 0); below about -87.3 it is 0 (what
       a flush of denormals gives). Branch-free, so the loops around it vectorise. */
    /* x = n ln2 + r with n the integer nearest x / ln2 (truncating z - 1/2 rounds a z <= 0),
       so |r| <= ln2 / 2 */
    int32_t ni = (int32_t)(x * 1.44269504088896341f - 0.5f);
    float n = (float)ni;
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    /* minimax polynomial for e^r on [-ln2/2, ln2/2] (Cephes' expf coefficients) */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    ni = ni < -127 ? -127 : ni; /* 2^n as float bits; n = -127 gives +0 */
    union { int32_t i; float f; } scale = {(ni + 127) << 23};
    return p * scale.f;
}

static inline float sigmoid(float z) {
    /* 1 / (1 + e^-z) from e^-|z| <= 1, without a branch */
    float q = exp_neg(-__builtin_fabsf(z));
    float num = z >= 0.0f ? 1.0f : q;  /* a select: GCC vectorises it (a multiply by (float)(z >= 0) it did not) */
    return num / (1.0f + q);
}

static void step_row(float *restrict sn, float *restrict yt, const float *restrict dtt,
                     const float *restrict ut, const float *restrict An, float bn, float cn, int64_t E) {
    /* one state row: s[n, :] = exp(dt A[n, :]) * s[n, :] + dt u B[n];  y += C[n] s[n, :] */
#pragma omp simd
    for (int64_t e = 0; e < E; e++) {
        float v = exp_neg(dtt[e] * An[e]) * sn[e] + dtt[e] * ut[e] * bn;
        sn[e] = v;
        yt[e] += cn * v;
    }
}

static void keep_row(const float *restrict pn, float *restrict sn, float *restrict dn, float *restrict yt,
                     const float *restrict dtt, const float *restrict ut, const float *restrict An,
                     float bn, float cn, int64_t E) {
    /* step_row out of place, keeping the decays: dn = exp(dt A[n, :]);  sn = dn * pn + dt u B[n] */
#pragma omp simd
    for (int64_t e = 0; e < E; e++) {
        float d = exp_neg(dtt[e] * An[e]);
        float v = d * pn[e] + dtt[e] * ut[e] * bn;
        dn[e] = d;
        sn[e] = v;
        yt[e] += cn * v;
    }
}

void scan_forward(const float *u, const float *dt, const float *AT, const float *Bm, const float *Cm,
                  const float *D, const float *z, float *out, float *s, float *y,
                  int64_t Bt, int64_t L, int64_t E, int64_t N) {
    /* s: N * E floats of scratch, y: E */
    for (int64_t b = 0; b < Bt; b++) {
        memset(s, 0, sizeof(float) * N * E);
        for (int64_t t = 0; t < L; t++) {
            const int64_t row = b * L + t;
            const float *ut = u + row * E, *zt = z + row * E;
            float *ot = out + row * E;
            memset(y, 0, sizeof(float) * E);
            for (int64_t n = 0; n < N; n++)
                step_row(s + n * E, y, dt + row * E, ut, AT + n * E, Bm[row * N + n], Cm[row * N + n], E);
#pragma omp simd
            for (int64_t e = 0; e < E; e++) ot[e] = (y[e] + D[e] * ut[e]) * zt[e] * sigmoid(zt[e]);
        }
    }
}

void scan_backward(const float *u, const float *dt, const float *AT, const float *Bm, const float *Cm,
                   const float *D, const float *z, const float *gout,
                   float *gu, float *gdt, float *gAT, float *gB, float *gC, float *gD, float *gz,
                   float *work, int64_t Bt, int64_t L, int64_t E, int64_t N) {
    /* work: (2 L + 1) * N * E + L * E + 2 * N * E + E floats: zeros (s_{-1}) and one sequence's
       states s_0 .. s_{L-1}, its decays exp(dt_t A), its outputs y, g, a zero row, gy. gAT (N, E)
       and gD (E) are accumulated into (the caller zeroes them); gu, gdt, gz (Bt, L, E), gB, gC
       (Bt, L, N) are written */
    const int64_t NE = N * E;
    float *states = work, *decays = work + (L + 1) * NE, *ys = decays + L * NE, *g = ys + L * E, *gy = g + NE;
    memset(states, 0, sizeof(float) * NE);
    for (int64_t b = 0; b < Bt; b++) {
        for (int64_t t = 0; t < L; t++) {  /* the states, decays and outputs of this sequence */
            const int64_t row = b * L + t;
            float *st = states + (t + 1) * NE, *yt = ys + t * E;
            const float *sp = states + t * NE;
            memset(yt, 0, sizeof(float) * E);
            for (int64_t n = 0; n < N; n++)
                keep_row(sp + n * E, st + n * E, decays + t * NE + n * E, yt, dt + row * E, u + row * E,
                         AT + n * E, Bm[row * N + n], Cm[row * N + n], E);
        }
        memset(g, 0, sizeof(float) * NE);
        for (int64_t t = L - 1; t >= 0; t--) {
            const int64_t row = b * L + t;
            const float *ut = u + row * E, *dtt = dt + row * E, *Bt_ = Bm + row * N, *Ct = Cm + row * N;
            const float *zt = z + row * E, *got = gout + row * E, *yt = ys + t * E;
            const float *st = states + (t + 1) * NE, *sp = states + t * NE, *dec = decays + t * NE;
            float *gut = gu + row * E, *gdtt = gdt + row * E, *gBt = gB + row * N, *gCt = gC + row * N;
            float *gzt = gz + row * E;
#pragma omp simd
            for (int64_t e = 0; e < E; e++) {  /* the gate and the skip */
                float sg = sigmoid(zt[e]), yd = yt[e] + D[e] * ut[e];
                float gyd = got[e] * zt[e] * sg;
                gzt[e] = got[e] * yd * sg * (1.0f + zt[e] * (1.0f - sg));
                gD[e] += gyd * ut[e];
                gy[e] = gyd;
                gut[e] = 0.0f;  /* gdu_t first, made gu_t at the end */
                gdtt[e] = 0.0f;
            }
            for (int64_t n = 0; n < N; n++) {
                float *gn = g + n * E, *gAn = gAT + n * E;
                const float *sn = st + n * E, *pn = sp + n * E, *An = AT + n * E, *dn = dec + n * E;
                const float bn = Bt_[n], cn = Ct[n];
                float acc_c = 0.0f, acc_b = 0.0f;
#pragma omp simd reduction(+ : acc_c, acc_b)
                for (int64_t e = 0; e < E; e++) {
                    float gv = gn[e] + gy[e] * cn;
                    acc_c += gy[e] * sn[e];
                    acc_b += gv * dtt[e] * ut[e];
                    gut[e] += gv * bn;
                    float d = dn[e];
                    float k = gv * d * pn[e];
                    gdtt[e] += k * An[e];
                    gAn[e] += k * dtt[e];
                    gn[e] = gv * d;
                }
                gCt[n] = acc_c;
                gBt[n] = acc_b;
            }
#pragma omp simd
            for (int64_t e = 0; e < E; e++) {
                float gdu = gut[e];
                gdtt[e] += gdu * ut[e];
                gut[e] = gdu * dtt[e] + gy[e] * D[e];
            }
        }
    }
}

/* Mamba's causal depthwise convolution of width K followed by SiLU, on (Bt, L, E) inputs whose
 * channels are contiguous (x may be a view: position stride ldx, batch stride L * ldx):
 *   c_t[e] = bias[e] + sum_k wT[k, e] x_{t - (K-1) + k}[e]   (x before position 0 is 0),
 *   out_t = silu(c_t).
 * wT is the weight transposed: (K, E). The backward recomputes c and writes gx (Bt, L, E), and
 * accumulates gwT (K, E) and gbias (E) (the caller zeroes them). */
static void conv_at(float *restrict c, const float *xb, const float *wT, const float *bias,
                    int64_t t, int64_t E, int64_t K, int64_t ldx) {
    /* c = c_t of one sequence (xb: its first position) */
    memcpy(c, bias, sizeof(float) * E);
    for (int64_t k = 0; k < K; k++) {
        int64_t src = t - (K - 1) + k;
        if (src < 0) continue;
        const float *xs = xb + src * ldx, *wk = wT + k * E;
#pragma omp simd
        for (int64_t e = 0; e < E; e++) c[e] += wk[e] * xs[e];
    }
}

void conv_silu_forward(const float *x, const float *wT, const float *bias, float *out,
                       int64_t Bt, int64_t L, int64_t E, int64_t K, int64_t ldx) {
    for (int64_t b = 0; b < Bt; b++) {
        for (int64_t t = 0; t < L; t++) {
            float *ot = out + (b * L + t) * E;
            conv_at(ot, x + b * L * ldx, wT, bias, t, E, K, ldx);
#pragma omp simd
            for (int64_t e = 0; e < E; e++) ot[e] = ot[e] * sigmoid(ot[e]);
        }
    }
}

void conv_silu_backward(const float *x, const float *wT, const float *bias, const float *gout,
                        float *gx, float *gwT, float *gbias, float *gc,
                        int64_t Bt, int64_t L, int64_t E, int64_t K, int64_t ldx) {
    /* gc: L * E floats of scratch (dLoss/dc of one sequence) */
    for (int64_t b = 0; b < Bt; b++) {
        const float *xb = x + b * L * ldx;
        for (int64_t t = 0; t < L; t++) {  /* dLoss/dc_t = gout_t * silu'(c_t) */
            float *gt = gc + t * E;
            const float *got = gout + (b * L + t) * E;
            conv_at(gt, xb, wT, bias, t, E, K, ldx);
#pragma omp simd
            for (int64_t e = 0; e < E; e++) {
                float c = gt[e], sg = sigmoid(c);
                gt[e] = got[e] * sg * (1.0f + c * (1.0f - sg));
                gbias[e] += gt[e];
            }
        }
        for (int64_t s = 0; s < L; s++) {  /* x_s feeds c_{s + (K-1) - k} through wT[k] */
            float *gxs = gx + (b * L + s) * E;
            const float *xs = xb + s * ldx;
            memset(gxs, 0, sizeof(float) * E);
            for (int64_t k = 0; k < K; k++) {
                int64_t t = s + (K - 1) - k;
                if (t >= L) continue;
                const float *gt = gc + t * E, *wk = wT + k * E;
                float *gwk = gwT + k * E;
#pragma omp simd
                for (int64_t e = 0; e < E; e++) {
                    gxs[e] += wk[e] * gt[e];
                    gwk[e] += gt[e] * xs[e];
                }
            }
        }
    }
}
