/* runtime/kernels/k_conv.c: conv2d (im2col + OpenBLAS sgemm) and max/avg pooling
 * on NCHW boxes, forward and backward, with the window geometry helper for
 * spatially sharded boxes (halo rows/cols + local padding).
 * Grouped (G groups of C/G input and N/G output channels, filter (N, C/G, R, S)
 * as PyTorch stores it) and dilated (kernel taps dil apart) convolution: one
 * im2col GEMM per group. Not here: oneDNN, GPU kernels. */
#include "shardbench/kernels.h"

#include <float.h>
#include <string.h>

#include "par.h"

void sb_window_input_range(int out_lo, int out_hi, int window, int stride,
                           int pad, int in_full, int *in_lo, int *in_hi,
                           int *pad_local)
{
    if (out_hi <= out_lo) { // nothing to compute, nothing to read
        *in_lo = *in_hi = 0;
        *pad_local = 0;
        return;
    }
    int first = out_lo * stride - pad;             // first row read
    int last = (out_hi - 1) * stride - pad + window; // one past the last
    int lo = first < 0 ? 0 : first;
    int hi = last > in_full ? in_full : last;
    if (hi < lo)
        hi = lo;
    *in_lo = lo;
    *in_hi = hi;
    *pad_local = lo - first; // local row = global row - lo
}

/* Images per GEMM: small outputs are grouped side by side into one GEMM of
 * about CONV_GROUP_COLS columns (one parallel BLAS call and one packing of
 * the filter per group instead of per image), as long as the group's
 * im2col matrix stays under CONV_GROUP_FLOATS. Depends only on the
 * geometry, so sb_conv2d_work_floats and the kernels agree on it. */
#define CONV_GROUP_COLS 1536
#define CONV_GROUP_MAX 16
#define CONV_GROUP_FLOATS ((size_t)8 << 20)

static int conv_group(int C, int R, int S, int H_out, int W_out)
{
    size_t hw = (size_t)H_out * W_out, crs = (size_t)C * R * S;
    if (hw == 0)
        return 1;
    int g = (int)((CONV_GROUP_COLS + hw - 1) / hw);
    if (g > CONV_GROUP_MAX)
        g = CONV_GROUP_MAX;
    while (g > 1 && (size_t)g * crs * hw > CONV_GROUP_FLOATS)
        g--;
    return g < 1 ? 1 : g;
}

size_t sb_conv2d_work_floats(int C, int R, int S, int N, int H_out, int W_out)
{
    size_t hw = (size_t)H_out * W_out;
    size_t g = (size_t)conv_group(C, R, S, H_out, W_out);
    return g * ((size_t)C * R * S * hw + (size_t)N * hw);
}

// 1x1, stride 1, no padding, same extent: the image itself is the im2col matrix
static int conv_is_direct(int H_in, int W_in, int R, int S, int sh, int sw,
                          int pt, int pl, int H_out, int W_out)
{
    return R == 1 && S == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 &&
           H_out == H_in && W_out == W_in;
}

// Output columns [*x_lo, *x_hi) of a row read input columns inside [0, W_in)
// for the kernel column at offset `tap` (s * dilation): ix = x*sw - pl + tap.
static void valid_cols(int W_out, int W_in, int sw, int pl, int tap, int *x_lo,
                       int *x_hi)
{
    int off = tap - pl; // ix = x*sw + off
    int lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int hi = W_in - off <= 0 ? 0 : (W_in - off + sw - 1) / sw; // ix < W_in
    if (hi > W_out)
        hi = W_out;
    if (lo > hi)
        lo = hi;
    *x_lo = lo;
    *x_hi = hi;
}

// col (C*R*S, H_out*W_out), rows ld apart, from img (C,H_in,W_in) (planes
// H_in*W_in apart); kernel taps dh, dw apart; outside the image reads 0
static void im2col(float *col, size_t ld, const float *img, int C, int H_in,
                   int W_in, int R, int S, int sh, int sw, int pt, int pl,
                   int H_out, int W_out, int dh, int dw)
{
    SB_PAR(collapse(2) if ((size_t)C * R * S * H_out * W_out > SB_PAR_MIN))
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            for (int s = 0; s < S; s++) {
                float *row = col + ((size_t)(c * R + r) * S + s) * ld;
                int x_lo, x_hi;
                valid_cols(W_out, W_in, sw, pl, s * dw, &x_lo, &x_hi);
                for (int y = 0; y < H_out; y++) {
                    float *dst = row + (size_t)y * W_out;
                    int iy = y * sh - pt + r * dh;
                    if (iy < 0 || iy >= H_in) {
                        memset(dst, 0, sizeof(float) * (size_t)W_out);
                        continue;
                    }
                    const float *src = img + ((size_t)c * H_in + iy) * W_in;
                    ptrdiff_t off = (ptrdiff_t)s * dw - pl; // ix = x*sw + off
                    for (int x = 0; x < x_lo; x++)
                        dst[x] = 0.0f;
                    if (sw == 1 && x_hi > x_lo)
                        memcpy(dst + x_lo, src + x_lo + off,
                               sizeof(float) * (size_t)(x_hi - x_lo));
                    else
                        for (int x = x_lo; x < x_hi; x++)
                            dst[x] = src[(ptrdiff_t)x * sw + off];
                    for (int x = x_hi; x < W_out; x++)
                        dst[x] = 0.0f;
                }
            }
}

// img (C,H_in,W_in) += scatter of col (C*R*S, H_out*W_out), rows ld apart;
// kernel taps dh, dw apart
static void col2im_add(float *img, const float *col, size_t ld, int C,
                       int H_in, int W_in, int R, int S, int sh, int sw,
                       int pt, int pl, int H_out, int W_out, int dh, int dw)
{
    /* channel by channel: a channel's plane gets only its own rows */
    SB_PAR(if ((size_t)C * R * S * H_out * W_out > SB_PAR_MIN))
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            for (int s = 0; s < S; s++) {
                const float *row = col + ((size_t)(c * R + r) * S + s) * ld;
                int x_lo, x_hi;
                valid_cols(W_out, W_in, sw, pl, s * dw, &x_lo, &x_hi);
                for (int y = 0; y < H_out; y++) {
                    int iy = y * sh - pt + r * dh;
                    if (iy < 0 || iy >= H_in)
                        continue;
                    const float *src = row + (size_t)y * W_out;
                    float *dst = img + ((size_t)c * H_in + iy) * W_in;
                    ptrdiff_t off = (ptrdiff_t)s * dw - pl; // ix = x*sw + off
                    for (int x = x_lo; x < x_hi; x++)
                        dst[(ptrdiff_t)x * sw + off] += src[x];
                }
            }
}

// dst (n) = dout where out > 0, else 0 (the relu-masked gradient)
static void relu_mask(float *dst, const float *dout, const float *out,
                      size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

// g images' worth of dout (N, HW each) side by side: dst (N, g*HW), masked
// by the relu output out when out != NULL
static void gather_dout(float *dst, const float *dout, const float *out, int g,
                        int N, size_t hw)
{
    size_t ld = (size_t)g * hw;
    SB_PAR(collapse(2) if ((size_t)g * N * hw > SB_PAR_MIN))
    for (int j = 0; j < g; j++)
        for (int n = 0; n < N; n++) {
            const float *src = dout + ((size_t)j * N + n) * hw;
            float *d = dst + (size_t)n * ld + (size_t)j * hw;
            if (out)
                relu_mask(d, src, out + ((size_t)j * N + n) * hw, hw);
            else
                memcpy(d, src, sizeof(float) * hw);
        }
}

/* Images per GEMM (conv_group) and the work layout depend on the totals C and
 * N only: the columns of one group (C/G R S rows) sit at the start of work,
 * the gathered dout or the product (N rows) after C R S rows. Group q reads
 * input channels [q C/G, (q+1) C/G), writes output channels [q N/G, (q+1) N/G)
 * and uses filter rows [q N/G, (q+1) N/G) of w (N, C/G, R, S). */
void sb_conv2d_forward(float *out, const float *inp, const float *w,
                       const float *bias, float *work, int B, int C, int H_in,
                       int W_in, int N, int R, int S, int stride_h,
                       int stride_w, int pad_top, int pad_left, int H_out,
                       int W_out, int dil_h, int dil_w, int groups, int relu)
{
    int Cg = C / groups, Ng = N / groups;
    int crs = Cg * R * S, hw = H_out * W_out;
    size_t in_img = (size_t)C * H_in * W_in, out_img = (size_t)N * hw;
    size_t in_grp = (size_t)Cg * H_in * W_in, crs_all = (size_t)C * R * S;
    int direct = conv_is_direct(H_in, W_in, R, S, stride_h, stride_w, pad_top,
                                pad_left, H_out, W_out);
    int nimg = direct ? 1 : conv_group(C, R, S, H_out, W_out);
    for (int b0 = 0; b0 < B; b0 += nimg) {
        int g = B - b0 < nimg ? B - b0 : nimg, ld = g * hw;
        float *o = out + b0 * out_img;
        // (N, g*HW), group by group: straight into out when g = 1
        float *res = g == 1 ? o : work + crs_all * ld;
        for (int q = 0; q < groups; q++) {
            const float *col = inp + b0 * in_img + q * in_grp;
            if (!direct) {
                for (int j = 0; j < g; j++)
                    im2col(work + (size_t)j * hw, (size_t)ld, inp + (b0 + j) * in_img + q * in_grp,
                           Cg, H_in, W_in, R, S, stride_h, stride_w, pad_top, pad_left, H_out,
                           W_out, dil_h, dil_w);
                col = work;
            }
            // res rows of group q (N/G, g*HW) = w_q (N/G, CRS/G) col (CRS/G, g*HW)
            sb_gemm(0, 0, Ng, ld, crs, 1.0f, w + (size_t)q * Ng * crs, crs, col, ld, 0.0f,
                    res + (size_t)q * Ng * ld, ld);
        }
        if (g == 1 && !bias && !relu)
            continue;
        SB_PAR(collapse(2) if ((size_t)g * N * hw > SB_PAR_MIN))
        for (int j = 0; j < g; j++)
            for (int n = 0; n < N; n++) {
                const float *src = res + (size_t)n * ld + (size_t)j * hw;
                float *on = o + j * out_img + (size_t)n * hw;
                float bn = bias ? bias[n] : 0.0f;
                for (int i = 0; i < hw; i++) {
                    float v = src[i] + bn;
                    on[i] = (relu && v < 0.0f) ? 0.0f : v;
                }
            }
    }
}

void sb_conv2d_backward_data(float *dinp, float *work, const float *dout,
                             const float *out, const float *w, int B, int C,
                             int H_in, int W_in, int N, int R, int S,
                             int stride_h, int stride_w, int pad_top,
                             int pad_left, int H_out, int W_out, int dil_h,
                             int dil_w, int groups)
{
    int Cg = C / groups, Ng = N / groups;
    int crs = Cg * R * S, hw = H_out * W_out;
    size_t in_img = (size_t)C * H_in * W_in, out_img = (size_t)N * hw;
    size_t in_grp = (size_t)Cg * H_in * W_in, crs_all = (size_t)C * R * S;
    int direct = conv_is_direct(H_in, W_in, R, S, stride_h, stride_w, pad_top,
                                pad_left, H_out, W_out);
    int nimg = direct ? 1 : conv_group(C, R, S, H_out, W_out);
    for (int b0 = 0; b0 < B; b0 += nimg) {
        int g = B - b0 < nimg ? B - b0 : nimg, ld = g * hw;
        float *dcol = work, *dy = work + crs_all * ld;
        const float *dyp = dout + b0 * out_img;
        if (g > 1 || out) {
            gather_dout(dy, dyp, out ? out + b0 * out_img : NULL, g, N, (size_t)hw);
            dyp = dy;
        }
        float *di = dinp + b0 * in_img;
        for (int q = 0; q < groups; q++) {
            const float *wq = w + (size_t)q * Ng * crs, *dyq = dyp + (size_t)q * Ng * ld;
            // dcol (CRS/G, g*HW) = w_q^T (CRS/G, N/G) dy_q (N/G, g*HW)
            if (direct) {
                sb_gemm(1, 0, crs, hw, Ng, 1.0f, wq, crs, dyq, hw, 1.0f, di + q * in_grp, hw);
                continue;
            }
            sb_gemm(1, 0, crs, ld, Ng, 1.0f, wq, crs, dyq, ld, 0.0f, dcol, ld);
            for (int j = 0; j < g; j++)
                col2im_add(di + j * in_img + q * in_grp, dcol + (size_t)j * hw, (size_t)ld, Cg,
                           H_in, W_in, R, S, stride_h, stride_w, pad_top, pad_left, H_out, W_out,
                           dil_h, dil_w);
        }
    }
}

void sb_conv2d_backward_filter(float *dw, float *dbias, float *work,
                               const float *dout, const float *out,
                               const float *inp, int B, int C, int H_in,
                               int W_in, int N, int R, int S, int stride_h,
                               int stride_w, int pad_top, int pad_left,
                               int H_out, int W_out, int dil_h, int dil_w,
                               int groups)
{
    int Cg = C / groups, Ng = N / groups;
    int crs = Cg * R * S, hw = H_out * W_out;
    size_t in_img = (size_t)C * H_in * W_in, out_img = (size_t)N * hw;
    size_t in_grp = (size_t)Cg * H_in * W_in, crs_all = (size_t)C * R * S;
    int direct = conv_is_direct(H_in, W_in, R, S, stride_h, stride_w, pad_top,
                                pad_left, H_out, W_out);
    int nimg = direct ? 1 : conv_group(C, R, S, H_out, W_out);
    for (int b0 = 0; b0 < B; b0 += nimg) {
        int g = B - b0 < nimg ? B - b0 : nimg, ld = g * hw;
        float *col = work, *dy = work + crs_all * ld;
        const float *dyp = dout + b0 * out_img;
        if (g > 1 || out) {
            gather_dout(dy, dyp, out ? out + b0 * out_img : NULL, g, N, (size_t)hw);
            dyp = dy;
        }
        for (int q = 0; dw && q < groups; q++) {
            const float *cm = inp + b0 * in_img + q * in_grp;
            if (!direct) {
                for (int j = 0; j < g; j++)
                    im2col(col + (size_t)j * hw, (size_t)ld, inp + (b0 + j) * in_img + q * in_grp,
                           Cg, H_in, W_in, R, S, stride_h, stride_w, pad_top, pad_left, H_out,
                           W_out, dil_h, dil_w);
                cm = col;
            }
            // dw_q (N/G, CRS/G) += dy_q (N/G, g*HW) col^T (g*HW, CRS/G)
            sb_gemm(0, 1, Ng, crs, ld, 1.0f, dyp + (size_t)q * Ng * ld, ld, cm, ld, 1.0f,
                    dw + (size_t)q * Ng * crs, crs);
        }
        if (dbias)
            for (int n = 0; n < N; n++) {
                const float *dn = dyp + (size_t)n * ld;
                float acc = 0.0f;
                for (int i = 0; i < ld; i++)
                    acc += dn[i];
                dbias[n] += acc;
            }
    }
}

/* ---- pooling ---- */

// first maximum of the window at output (y,x) of one plane (row-major
// order within the window); -1 if the window holds no input element
static inline ptrdiff_t window_argmax(const float *plane, int H_in, int W_in,
                                      int R, int S, int y0, int x0)
{
    int ylo = y0 < 0 ? 0 : y0, yhi = y0 + R > H_in ? H_in : y0 + R;
    int xlo = x0 < 0 ? 0 : x0, xhi = x0 + S > W_in ? W_in : x0 + S;
    if (ylo >= yhi || xlo >= xhi)
        return -1;
    ptrdiff_t arg = (ptrdiff_t)ylo * W_in + xlo;
    float best = plane[arg];
    for (int iy = ylo; iy < yhi; iy++) {
        const float *row = plane + (ptrdiff_t)iy * W_in;
        for (int ix = xlo; ix < xhi; ix++)
            if (row[ix] > best) {
                best = row[ix];
                arg = (ptrdiff_t)iy * W_in + ix;
            }
    }
    return arg;
}

void sb_maxpool2d_forward(float *out, const float *inp, int B, int C,
                          int H_in, int W_in, int R, int S, int stride_h,
                          int stride_w, int pad_top, int pad_left, int H_out,
                          int W_out)
{
    size_t in_plane = (size_t)H_in * W_in, out_plane = (size_t)H_out * W_out;
    SB_PAR(if ((size_t)B * C * (in_plane + out_plane) > SB_PAR_MIN))
    for (size_t p = 0; p < (size_t)B * C; p++) {
        const float *ip = inp + p * in_plane;
        float *op = out + p * out_plane;
        for (int y = 0; y < H_out; y++)
            for (int x = 0; x < W_out; x++) {
                ptrdiff_t a = window_argmax(ip, H_in, W_in, R, S,
                                            y * stride_h - pad_top,
                                            x * stride_w - pad_left);
                op[(size_t)y * W_out + x] = a < 0 ? 0.0f : ip[a];
            }
    }
}

void sb_maxpool2d_backward(float *dinp, const float *dout, const float *inp,
                           int B, int C, int H_in, int W_in, int R, int S,
                           int stride_h, int stride_w, int pad_top,
                           int pad_left, int H_out, int W_out)
{
    size_t in_plane = (size_t)H_in * W_in, out_plane = (size_t)H_out * W_out;
    SB_PAR(if ((size_t)B * C * (in_plane + out_plane) > SB_PAR_MIN))
    for (size_t p = 0; p < (size_t)B * C; p++) {
        const float *ip = inp + p * in_plane;
        const float *dp = dout + p * out_plane;
        float *gp = dinp + p * in_plane;
        for (int y = 0; y < H_out; y++)
            for (int x = 0; x < W_out; x++) {
                ptrdiff_t a = window_argmax(ip, H_in, W_in, R, S,
                                            y * stride_h - pad_top,
                                            x * stride_w - pad_left);
                if (a >= 0)
                    gp[a] += dp[(size_t)y * W_out + x];
            }
    }
}

// clamp the window [y0, y0+R) to [0, H): *lo, *hi
static void clamp_window(int y0, int R, int H, int *lo, int *hi)
{
    *lo = y0 < 0 ? 0 : y0;
    *hi = y0 + R > H ? H : y0 + R;
    if (*hi < *lo)
        *hi = *lo;
}

void sb_avgpool2d_forward(float *out, const float *inp, int B, int C,
                          int H_in, int W_in, int R, int S, int stride_h,
                          int stride_w, int pad_top, int pad_left, int H_out,
                          int W_out, int count_pad)
{
    size_t in_plane = (size_t)H_in * W_in, out_plane = (size_t)H_out * W_out;
    SB_PAR(if ((size_t)B * C * (in_plane + out_plane) > SB_PAR_MIN))
    for (size_t p = 0; p < (size_t)B * C; p++) {
        const float *ip = inp + p * in_plane;
        float *op = out + p * out_plane;
        for (int y = 0; y < H_out; y++)
            for (int x = 0; x < W_out; x++) {
                int ylo, yhi, xlo, xhi;
                clamp_window(y * stride_h - pad_top, R, H_in, &ylo, &yhi);
                clamp_window(x * stride_w - pad_left, S, W_in, &xlo, &xhi);
                float acc = 0.0f;
                for (int iy = ylo; iy < yhi; iy++)
                    for (int ix = xlo; ix < xhi; ix++)
                        acc += ip[(size_t)iy * W_in + ix];
                int cnt = count_pad ? R * S : (yhi - ylo) * (xhi - xlo);
                op[(size_t)y * W_out + x] = cnt > 0 ? acc / (float)cnt : 0.0f;
            }
    }
}

void sb_avgpool2d_backward(float *dinp, const float *dout, int B, int C,
                           int H_in, int W_in, int R, int S, int stride_h,
                           int stride_w, int pad_top, int pad_left, int H_out,
                           int W_out, int count_pad)
{
    size_t in_plane = (size_t)H_in * W_in, out_plane = (size_t)H_out * W_out;
    SB_PAR(if ((size_t)B * C * (in_plane + out_plane) > SB_PAR_MIN))
    for (size_t p = 0; p < (size_t)B * C; p++) {
        const float *dp = dout + p * out_plane;
        float *gp = dinp + p * in_plane;
        for (int y = 0; y < H_out; y++)
            for (int x = 0; x < W_out; x++) {
                int ylo, yhi, xlo, xhi;
                clamp_window(y * stride_h - pad_top, R, H_in, &ylo, &yhi);
                clamp_window(x * stride_w - pad_left, S, W_in, &xlo, &xhi);
                int cnt = count_pad ? R * S : (yhi - ylo) * (xhi - xlo);
                if (cnt <= 0)
                    continue;
                float g = dp[(size_t)y * W_out + x] / (float)cnt;
                for (int iy = ylo; iy < yhi; iy++)
                    for (int ix = xlo; ix < xhi; ix++)
                        gp[(size_t)iy * W_in + ix] += g;
            }
    }
}
